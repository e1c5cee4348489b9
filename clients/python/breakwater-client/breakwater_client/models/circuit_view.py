from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.circuit_state import CircuitState
from ..types import UNSET, Unset

T = TypeVar("T", bound="CircuitView")


@_attrs_define
class CircuitView:
    """The circuit as an operator reads it.

    Attributes:
        state (CircuitState): A circuit state (the `channels.circuit_state` column).
        since (datetime.datetime): In this state since.
        consecutive_failures (int): Consecutive transient failures (while closed; the count at opening while open).
        failure_threshold (int): Effective threshold (override or global default).
        cooldown_ms (int): Effective first cooldown, ms.
        close_after_successes (int): Effective consecutive successes a half-open circuit needs to close (override or
            cluster
            default).
        trial_successes (int): Successful probe deliveries so far while half-open (0 in any other state).
        parked (int): Jobs parked by the circuit (the channel's own, or its host's), waiting for release.
        held (int): Deliveries not parked but waiting out the `Retry-After` hold (`retry_after_until`): none
            is sent before it ends. 0 without a hold.
        probe_failures (int): Failed probes in a row.
        operator_hold (bool): An operator holds the circuit (paused it or forced it open): the tenant can neither
            pause nor resume it (409) until an operator resumes or closes it, or a probe closes it.
        next_probe_at (datetime.datetime | None | Unset): When the next probe may run (open).
        retry_after_until (datetime.datetime | None | Unset): No request before this (Retry-After).
    """

    state: CircuitState
    since: datetime.datetime
    consecutive_failures: int
    failure_threshold: int
    cooldown_ms: int
    close_after_successes: int
    trial_successes: int
    parked: int
    held: int
    probe_failures: int
    operator_hold: bool
    next_probe_at: datetime.datetime | None | Unset = UNSET
    retry_after_until: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        state = self.state.value

        since = self.since.isoformat()

        consecutive_failures = self.consecutive_failures

        failure_threshold = self.failure_threshold

        cooldown_ms = self.cooldown_ms

        close_after_successes = self.close_after_successes

        trial_successes = self.trial_successes

        parked = self.parked

        held = self.held

        probe_failures = self.probe_failures

        operator_hold = self.operator_hold

        next_probe_at: None | str | Unset
        if isinstance(self.next_probe_at, Unset):
            next_probe_at = UNSET
        elif isinstance(self.next_probe_at, datetime.datetime):
            next_probe_at = self.next_probe_at.isoformat()
        else:
            next_probe_at = self.next_probe_at

        retry_after_until: None | str | Unset
        if isinstance(self.retry_after_until, Unset):
            retry_after_until = UNSET
        elif isinstance(self.retry_after_until, datetime.datetime):
            retry_after_until = self.retry_after_until.isoformat()
        else:
            retry_after_until = self.retry_after_until

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "state": state,
                "since": since,
                "consecutive_failures": consecutive_failures,
                "failure_threshold": failure_threshold,
                "cooldown_ms": cooldown_ms,
                "close_after_successes": close_after_successes,
                "trial_successes": trial_successes,
                "parked": parked,
                "held": held,
                "probe_failures": probe_failures,
                "operator_hold": operator_hold,
            }
        )
        if next_probe_at is not UNSET:
            field_dict["next_probe_at"] = next_probe_at
        if retry_after_until is not UNSET:
            field_dict["retry_after_until"] = retry_after_until

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        state = CircuitState(d.pop("state"))

        since = datetime.datetime.fromisoformat(d.pop("since"))

        consecutive_failures = d.pop("consecutive_failures")

        failure_threshold = d.pop("failure_threshold")

        cooldown_ms = d.pop("cooldown_ms")

        close_after_successes = d.pop("close_after_successes")

        trial_successes = d.pop("trial_successes")

        parked = d.pop("parked")

        held = d.pop("held")

        probe_failures = d.pop("probe_failures")

        operator_hold = d.pop("operator_hold")

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

        def _parse_retry_after_until(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                retry_after_until_type_0 = datetime.datetime.fromisoformat(data)

                return retry_after_until_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        retry_after_until = _parse_retry_after_until(d.pop("retry_after_until", UNSET))

        circuit_view = cls(
            state=state,
            since=since,
            consecutive_failures=consecutive_failures,
            failure_threshold=failure_threshold,
            cooldown_ms=cooldown_ms,
            close_after_successes=close_after_successes,
            trial_successes=trial_successes,
            parked=parked,
            held=held,
            probe_failures=probe_failures,
            operator_hold=operator_hold,
            next_probe_at=next_probe_at,
            retry_after_until=retry_after_until,
        )

        circuit_view.additional_properties = d
        return circuit_view

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
