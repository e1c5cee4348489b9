from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.host_circuit_state import HostCircuitState
from ..types import UNSET, Unset

T = TypeVar("T", bound="HostCircuit")


@_attrs_define
class HostCircuit:
    """A host circuit as the operator sees it.

    Attributes:
        host_key (str): The host key (see [`host_key`]).
        state (HostCircuitState): A host circuit state (`host_circuits.state`).
        generation (int): Bumped by every transition.
        changed_at (datetime.datetime): When the state last changed.
        probe_failures (int): Failed host probes in a row (the cooldown doubles with each).
        channels (int): Live channels on the host.
        parked (int): Waiting jobs of those channels held by the host (0 while the host's gate is not parked).
        in_flight (int): Deliveries of those channels in flight now, cluster-wide.
        next_probe_at (datetime.datetime | None | Unset): When the next probe may run, while open.
        probe_delivery_id (None | Unset | UUID): The delivery that is the half-open probe, once chosen.
        last_failure_at (datetime.datetime | None | Unset): Last failure that opened or re-opened the host.
        last_failure_reason (None | str | Unset): Its reason.
        failure_threshold (int | None | Unset): Operator override of the threshold (distinct failing channels); null =
            configuration.
        cooldown_ms (int | None | Unset): Operator override of the first cooldown, ms; null = configuration.
        max_in_flight (int | None | Unset): Operator override of the cap of deliveries in flight to the host; null =
            configuration.
        cap (int | None | Unset): The cap in force: the override or `hosts.max_in_flight`; null = not capped.
    """

    host_key: str
    state: HostCircuitState
    generation: int
    changed_at: datetime.datetime
    probe_failures: int
    channels: int
    parked: int
    in_flight: int
    next_probe_at: datetime.datetime | None | Unset = UNSET
    probe_delivery_id: None | Unset | UUID = UNSET
    last_failure_at: datetime.datetime | None | Unset = UNSET
    last_failure_reason: None | str | Unset = UNSET
    failure_threshold: int | None | Unset = UNSET
    cooldown_ms: int | None | Unset = UNSET
    max_in_flight: int | None | Unset = UNSET
    cap: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        host_key = self.host_key

        state = self.state.value

        generation = self.generation

        changed_at = self.changed_at.isoformat()

        probe_failures = self.probe_failures

        channels = self.channels

        parked = self.parked

        in_flight = self.in_flight

        next_probe_at: None | str | Unset
        if isinstance(self.next_probe_at, Unset):
            next_probe_at = UNSET
        elif isinstance(self.next_probe_at, datetime.datetime):
            next_probe_at = self.next_probe_at.isoformat()
        else:
            next_probe_at = self.next_probe_at

        probe_delivery_id: None | str | Unset
        if isinstance(self.probe_delivery_id, Unset):
            probe_delivery_id = UNSET
        elif isinstance(self.probe_delivery_id, UUID):
            probe_delivery_id = str(self.probe_delivery_id)
        else:
            probe_delivery_id = self.probe_delivery_id

        last_failure_at: None | str | Unset
        if isinstance(self.last_failure_at, Unset):
            last_failure_at = UNSET
        elif isinstance(self.last_failure_at, datetime.datetime):
            last_failure_at = self.last_failure_at.isoformat()
        else:
            last_failure_at = self.last_failure_at

        last_failure_reason: None | str | Unset
        if isinstance(self.last_failure_reason, Unset):
            last_failure_reason = UNSET
        else:
            last_failure_reason = self.last_failure_reason

        failure_threshold: int | None | Unset
        if isinstance(self.failure_threshold, Unset):
            failure_threshold = UNSET
        else:
            failure_threshold = self.failure_threshold

        cooldown_ms: int | None | Unset
        if isinstance(self.cooldown_ms, Unset):
            cooldown_ms = UNSET
        else:
            cooldown_ms = self.cooldown_ms

        max_in_flight: int | None | Unset
        if isinstance(self.max_in_flight, Unset):
            max_in_flight = UNSET
        else:
            max_in_flight = self.max_in_flight

        cap: int | None | Unset
        if isinstance(self.cap, Unset):
            cap = UNSET
        else:
            cap = self.cap

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "host_key": host_key,
                "state": state,
                "generation": generation,
                "changed_at": changed_at,
                "probe_failures": probe_failures,
                "channels": channels,
                "parked": parked,
                "in_flight": in_flight,
            }
        )
        if next_probe_at is not UNSET:
            field_dict["next_probe_at"] = next_probe_at
        if probe_delivery_id is not UNSET:
            field_dict["probe_delivery_id"] = probe_delivery_id
        if last_failure_at is not UNSET:
            field_dict["last_failure_at"] = last_failure_at
        if last_failure_reason is not UNSET:
            field_dict["last_failure_reason"] = last_failure_reason
        if failure_threshold is not UNSET:
            field_dict["failure_threshold"] = failure_threshold
        if cooldown_ms is not UNSET:
            field_dict["cooldown_ms"] = cooldown_ms
        if max_in_flight is not UNSET:
            field_dict["max_in_flight"] = max_in_flight
        if cap is not UNSET:
            field_dict["cap"] = cap

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        host_key = d.pop("host_key")

        state = HostCircuitState(d.pop("state"))

        generation = d.pop("generation")

        changed_at = datetime.datetime.fromisoformat(d.pop("changed_at"))

        probe_failures = d.pop("probe_failures")

        channels = d.pop("channels")

        parked = d.pop("parked")

        in_flight = d.pop("in_flight")

        def _parse_next_probe_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                next_probe_at_type_0 = datetime.datetime.fromisoformat(data)

                return next_probe_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        next_probe_at = _parse_next_probe_at(d.pop("next_probe_at", UNSET))

        def _parse_probe_delivery_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                probe_delivery_id_type_0 = UUID(data)

                return probe_delivery_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        probe_delivery_id = _parse_probe_delivery_id(d.pop("probe_delivery_id", UNSET))

        def _parse_last_failure_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_failure_at_type_0 = datetime.datetime.fromisoformat(data)

                return last_failure_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        last_failure_at = _parse_last_failure_at(d.pop("last_failure_at", UNSET))

        def _parse_last_failure_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        last_failure_reason = _parse_last_failure_reason(d.pop("last_failure_reason", UNSET))

        def _parse_failure_threshold(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        failure_threshold = _parse_failure_threshold(d.pop("failure_threshold", UNSET))

        def _parse_cooldown_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        cooldown_ms = _parse_cooldown_ms(d.pop("cooldown_ms", UNSET))

        def _parse_max_in_flight(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_in_flight = _parse_max_in_flight(d.pop("max_in_flight", UNSET))

        def _parse_cap(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        cap = _parse_cap(d.pop("cap", UNSET))

        host_circuit = cls(
            host_key=host_key,
            state=state,
            generation=generation,
            changed_at=changed_at,
            probe_failures=probe_failures,
            channels=channels,
            parked=parked,
            in_flight=in_flight,
            next_probe_at=next_probe_at,
            probe_delivery_id=probe_delivery_id,
            last_failure_at=last_failure_at,
            last_failure_reason=last_failure_reason,
            failure_threshold=failure_threshold,
            cooldown_ms=cooldown_ms,
            max_in_flight=max_in_flight,
            cap=cap,
        )

        host_circuit.additional_properties = d
        return host_circuit

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
