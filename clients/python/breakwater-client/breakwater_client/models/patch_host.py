from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="PatchHost")


@_attrs_define
class PatchHost:
    """Body of `PATCH /api/v1/admin/hosts/{host}`; `null` returns a value to the configuration's.

    Attributes:
        failure_threshold (int | None | Unset): Distinct failing channels within the window that open the host (null =
            `hosts.failure_threshold`).
        cooldown_ms (int | None | Unset): First cooldown, ms (null = `hosts.cooldown_ms`).
        max_in_flight (int | None | Unset): Cap of deliveries in flight to the host, cluster-wide (null =
            `hosts.max_in_flight`, if set; else not capped).
    """

    failure_threshold: int | None | Unset = UNSET
    cooldown_ms: int | None | Unset = UNSET
    max_in_flight: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
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

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if failure_threshold is not UNSET:
            field_dict["failure_threshold"] = failure_threshold
        if cooldown_ms is not UNSET:
            field_dict["cooldown_ms"] = cooldown_ms
        if max_in_flight is not UNSET:
            field_dict["max_in_flight"] = max_in_flight

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

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

        patch_host = cls(
            failure_threshold=failure_threshold,
            cooldown_ms=cooldown_ms,
            max_in_flight=max_in_flight,
        )

        return patch_host
