from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="EventSettings")


@_attrs_define
class EventSettings:
    """A tenant's delivery-level event settings (the `alert_events` object of the tenant API).

    Attributes:
        delivery_dead (bool): Send `delivery.dead` (and its `deliveries.dead` summaries). Default true.
        channel_failing (bool): Send `channel.failing`. Default false.
        channel_recovered (bool): Send `channel.recovered` at the end of a failing streak. Default false.
        dead_window_ms (int): The storm window of one channel's deaths, ms (1 000 – 86 400 000; default 300 000).
        dead_alerts_per_window (int): `delivery.dead` alerts per channel per window; later deaths of the window are
            summarised
            in one `deliveries.dead` at its end (0 – 100; default 5; 0 = summaries only).
        failing_window_ms (int): The window the failed share is counted over, ms (1 000 – 86 400 000; default 300 000);
            also the shortest failing streak.
        failing_threshold_percent (int): The failed share, percent, at or over which a channel is failing (1 – 100;
            default 50).
        failing_min_attempts (int): The fewest attempts in the window for a share to count (1 – 10 000; default 20).
    """

    delivery_dead: bool
    channel_failing: bool
    channel_recovered: bool
    dead_window_ms: int
    dead_alerts_per_window: int
    failing_window_ms: int
    failing_threshold_percent: int
    failing_min_attempts: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

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
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "delivery_dead": delivery_dead,
                "channel_failing": channel_failing,
                "channel_recovered": channel_recovered,
                "dead_window_ms": dead_window_ms,
                "dead_alerts_per_window": dead_alerts_per_window,
                "failing_window_ms": failing_window_ms,
                "failing_threshold_percent": failing_threshold_percent,
                "failing_min_attempts": failing_min_attempts,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        delivery_dead = d.pop("delivery_dead")

        channel_failing = d.pop("channel_failing")

        channel_recovered = d.pop("channel_recovered")

        dead_window_ms = d.pop("dead_window_ms")

        dead_alerts_per_window = d.pop("dead_alerts_per_window")

        failing_window_ms = d.pop("failing_window_ms")

        failing_threshold_percent = d.pop("failing_threshold_percent")

        failing_min_attempts = d.pop("failing_min_attempts")

        event_settings = cls(
            delivery_dead=delivery_dead,
            channel_failing=channel_failing,
            channel_recovered=channel_recovered,
            dead_window_ms=dead_window_ms,
            dead_alerts_per_window=dead_alerts_per_window,
            failing_window_ms=failing_window_ms,
            failing_threshold_percent=failing_threshold_percent,
            failing_min_attempts=failing_min_attempts,
        )

        event_settings.additional_properties = d
        return event_settings

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
