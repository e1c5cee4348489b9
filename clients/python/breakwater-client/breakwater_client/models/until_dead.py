from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="UntilDead")


@_attrs_define
class UntilDead:
    """The longest a delivery can wait before it is dead.

    Attributes:
        max_attempts (int): HTTP attempts.
        waits_ms (list[int]): The waits between them, ms, before jitter (`max_attempts − 1` of them, at most 100
            shown).
        waits_total_ms (int): Their sum, ms.
        requests_total_ms (int): Every attempt timing out: `max_attempts × request_timeout_ms`.
        longest_ms (int): The longest, ms: the waits at their jitter's upper end plus every attempt timing out.
        longest_with_retry_after_ms (int): The same if every retry met a `Retry-After` at its cap
            (`circuit.retry_after_cap_ms`)
            where that is longer than the wait, ms.
        parked_time_excluded (bool): Time parked while the circuit is open or paused is not in these figures: a parked
            delivery uses no attempt and waits until the circuit closes, however long.
    """

    max_attempts: int
    waits_ms: list[int]
    waits_total_ms: int
    requests_total_ms: int
    longest_ms: int
    longest_with_retry_after_ms: int
    parked_time_excluded: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        max_attempts = self.max_attempts

        waits_ms = self.waits_ms

        waits_total_ms = self.waits_total_ms

        requests_total_ms = self.requests_total_ms

        longest_ms = self.longest_ms

        longest_with_retry_after_ms = self.longest_with_retry_after_ms

        parked_time_excluded = self.parked_time_excluded

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "max_attempts": max_attempts,
                "waits_ms": waits_ms,
                "waits_total_ms": waits_total_ms,
                "requests_total_ms": requests_total_ms,
                "longest_ms": longest_ms,
                "longest_with_retry_after_ms": longest_with_retry_after_ms,
                "parked_time_excluded": parked_time_excluded,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        max_attempts = d.pop("max_attempts")

        waits_ms = cast(list[int], d.pop("waits_ms"))

        waits_total_ms = d.pop("waits_total_ms")

        requests_total_ms = d.pop("requests_total_ms")

        longest_ms = d.pop("longest_ms")

        longest_with_retry_after_ms = d.pop("longest_with_retry_after_ms")

        parked_time_excluded = d.pop("parked_time_excluded")

        until_dead = cls(
            max_attempts=max_attempts,
            waits_ms=waits_ms,
            waits_total_ms=waits_total_ms,
            requests_total_ms=requests_total_ms,
            longest_ms=longest_ms,
            longest_with_retry_after_ms=longest_with_retry_after_ms,
            parked_time_excluded=parked_time_excluded,
        )

        until_dead.additional_properties = d
        return until_dead

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
