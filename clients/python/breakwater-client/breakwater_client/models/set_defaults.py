from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="SetDefaults")


@_attrs_define
class SetDefaults:
    """Body of `PATCH /api/v1/admin/circuit-defaults`; `null` returns a value to the configuration's.

    Attributes:
        failure_threshold (int | None | Unset): Failure threshold (null = the configuration's).
        cooldown_ms (int | None | Unset): First cooldown, ms (null = the configuration's).
        close_after_successes (int | None | Unset): Consecutive successes to close (null = the configuration's).
    """

    failure_threshold: int | None | Unset = UNSET
    cooldown_ms: int | None | Unset = UNSET
    close_after_successes: int | None | Unset = UNSET

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

        close_after_successes: int | None | Unset
        if isinstance(self.close_after_successes, Unset):
            close_after_successes = UNSET
        else:
            close_after_successes = self.close_after_successes

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if failure_threshold is not UNSET:
            field_dict["failure_threshold"] = failure_threshold
        if cooldown_ms is not UNSET:
            field_dict["cooldown_ms"] = cooldown_ms
        if close_after_successes is not UNSET:
            field_dict["close_after_successes"] = close_after_successes

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

        def _parse_close_after_successes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        close_after_successes = _parse_close_after_successes(d.pop("close_after_successes", UNSET))

        set_defaults = cls(
            failure_threshold=failure_threshold,
            cooldown_ms=cooldown_ms,
            close_after_successes=close_after_successes,
        )

        return set_defaults
