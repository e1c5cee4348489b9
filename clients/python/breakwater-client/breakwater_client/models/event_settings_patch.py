from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="EventSettingsPatch")


@_attrs_define
class EventSettingsPatch:
    """Changes to a tenant's event settings: an absent field is left alone (none may be `null`).

    Attributes:
        delivery_dead (bool | Unset): Send `delivery.dead` and its summaries.
        channel_failing (bool | Unset): Send `channel.failing`.
        channel_recovered (bool | Unset): Send `channel.recovered`.
        dead_window_ms (int | Unset): Storm window, ms, 1 000 – 86 400 000.
        dead_alerts_per_window (int | Unset): `delivery.dead` per channel per window, 0 – 100.
        failing_window_ms (int | Unset): Failed-share window, ms, 1 000 – 86 400 000.
        failing_threshold_percent (int | Unset): Failing threshold, percent, 1 – 100.
        failing_min_attempts (int | Unset): Fewest attempts for a share to count, 1 – 10 000.
    """

    delivery_dead: bool | Unset = UNSET
    channel_failing: bool | Unset = UNSET
    channel_recovered: bool | Unset = UNSET
    dead_window_ms: int | Unset = UNSET
    dead_alerts_per_window: int | Unset = UNSET
    failing_window_ms: int | Unset = UNSET
    failing_threshold_percent: int | Unset = UNSET
    failing_min_attempts: int | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        delivery_dead = self.delivery_dead

        channel_failing = self.channel_failing

        channel_recovered = self.channel_recovered

        dead_window_ms = self.dead_window_ms

        dead_alerts_per_window = self.dead_alerts_per_window

        failing_window_ms = self.failing_window_ms

        failing_threshold_percent = self.failing_threshold_percent

        failing_min_attempts = self.failing_min_attempts

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if delivery_dead is not UNSET:
            field_dict["delivery_dead"] = delivery_dead
        if channel_failing is not UNSET:
            field_dict["channel_failing"] = channel_failing
        if channel_recovered is not UNSET:
            field_dict["channel_recovered"] = channel_recovered
        if dead_window_ms is not UNSET:
            field_dict["dead_window_ms"] = dead_window_ms
        if dead_alerts_per_window is not UNSET:
            field_dict["dead_alerts_per_window"] = dead_alerts_per_window
        if failing_window_ms is not UNSET:
            field_dict["failing_window_ms"] = failing_window_ms
        if failing_threshold_percent is not UNSET:
            field_dict["failing_threshold_percent"] = failing_threshold_percent
        if failing_min_attempts is not UNSET:
            field_dict["failing_min_attempts"] = failing_min_attempts

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        delivery_dead = d.pop("delivery_dead", UNSET)

        channel_failing = d.pop("channel_failing", UNSET)

        channel_recovered = d.pop("channel_recovered", UNSET)

        dead_window_ms = d.pop("dead_window_ms", UNSET)

        dead_alerts_per_window = d.pop("dead_alerts_per_window", UNSET)

        failing_window_ms = d.pop("failing_window_ms", UNSET)

        failing_threshold_percent = d.pop("failing_threshold_percent", UNSET)

        failing_min_attempts = d.pop("failing_min_attempts", UNSET)

        event_settings_patch = cls(
            delivery_dead=delivery_dead,
            channel_failing=channel_failing,
            channel_recovered=channel_recovered,
            dead_window_ms=dead_window_ms,
            dead_alerts_per_window=dead_alerts_per_window,
            failing_window_ms=failing_window_ms,
            failing_threshold_percent=failing_threshold_percent,
            failing_min_attempts=failing_min_attempts,
        )

        return event_settings_patch
