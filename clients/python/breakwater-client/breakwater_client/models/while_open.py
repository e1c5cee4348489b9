from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="WhileOpen")


@_attrs_define
class WhileOpen:
    """How the open circuit is probed.

    Attributes:
        first_probe_after_ms (int): From the opening to the first probe, ms.
        growth_factor (float): Each failed probe doubles the next wait, up to `max_cooldown_ms`.
        max_cooldown_ms (int): The longest wait between probes, ms.
        probes_at_ms (list[int]): When the first probes go, ms after the opening, while each fails (at most 12).
        probes_first_hour (int): Probes in the first hour open.
        probes_per_day_at_cap (int): Probes a day once the wait reached its cap.
        close_after_successes (int): Consecutive successful probe deliveries before the circuit closes.
    """

    first_probe_after_ms: int
    growth_factor: float
    max_cooldown_ms: int
    probes_at_ms: list[int]
    probes_first_hour: int
    probes_per_day_at_cap: int
    close_after_successes: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        first_probe_after_ms = self.first_probe_after_ms

        growth_factor = self.growth_factor

        max_cooldown_ms = self.max_cooldown_ms

        probes_at_ms = self.probes_at_ms

        probes_first_hour = self.probes_first_hour

        probes_per_day_at_cap = self.probes_per_day_at_cap

        close_after_successes = self.close_after_successes

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "first_probe_after_ms": first_probe_after_ms,
                "growth_factor": growth_factor,
                "max_cooldown_ms": max_cooldown_ms,
                "probes_at_ms": probes_at_ms,
                "probes_first_hour": probes_first_hour,
                "probes_per_day_at_cap": probes_per_day_at_cap,
                "close_after_successes": close_after_successes,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        first_probe_after_ms = d.pop("first_probe_after_ms")

        growth_factor = d.pop("growth_factor")

        max_cooldown_ms = d.pop("max_cooldown_ms")

        probes_at_ms = cast(list[int], d.pop("probes_at_ms"))

        probes_first_hour = d.pop("probes_first_hour")

        probes_per_day_at_cap = d.pop("probes_per_day_at_cap")

        close_after_successes = d.pop("close_after_successes")

        while_open = cls(
            first_probe_after_ms=first_probe_after_ms,
            growth_factor=growth_factor,
            max_cooldown_ms=max_cooldown_ms,
            probes_at_ms=probes_at_ms,
            probes_first_hour=probes_first_hour,
            probes_per_day_at_cap=probes_per_day_at_cap,
            close_after_successes=close_after_successes,
        )

        while_open.additional_properties = d
        return while_open

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
