from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="QuotaPatch")


@_attrs_define
class QuotaPatch:
    """Changes to a tenant's quotas (the operator's `quotas` object): `None` leaves one alone,
    `Some(None)` (a JSON `null`) puts it back to the cluster default, `Some(Some(n))` sets it.

        Attributes:
            channels (int | None | Unset): Most live channels, 0 to 1 000 000 (null = the cluster default,
                `api.quota_channels`).
            active_keys (int | None | Unset): Most unrevoked API keys, 0 to 1 000 000 (null = the cluster default,
                `api.quota_active_keys`). Keys held above a lowered quota keep working; no new one is
                made until the tenant is under it.
            deliveries_per_second (int | None | Unset): Most deliveries accepted per second, 1 to 10 000 000 (null = the
                cluster default,
                `api.quota_deliveries_per_second`).
            deliveries_per_day (int | None | Unset): Most deliveries accepted per UTC day, 1 to 10^12 (null = the cluster
                default,
                `api.quota_deliveries_per_day`).
    """

    channels: int | None | Unset = UNSET
    active_keys: int | None | Unset = UNSET
    deliveries_per_second: int | None | Unset = UNSET
    deliveries_per_day: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        channels: int | None | Unset
        if isinstance(self.channels, Unset):
            channels = UNSET
        else:
            channels = self.channels

        active_keys: int | None | Unset
        if isinstance(self.active_keys, Unset):
            active_keys = UNSET
        else:
            active_keys = self.active_keys

        deliveries_per_second: int | None | Unset
        if isinstance(self.deliveries_per_second, Unset):
            deliveries_per_second = UNSET
        else:
            deliveries_per_second = self.deliveries_per_second

        deliveries_per_day: int | None | Unset
        if isinstance(self.deliveries_per_day, Unset):
            deliveries_per_day = UNSET
        else:
            deliveries_per_day = self.deliveries_per_day

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if channels is not UNSET:
            field_dict["channels"] = channels
        if active_keys is not UNSET:
            field_dict["active_keys"] = active_keys
        if deliveries_per_second is not UNSET:
            field_dict["deliveries_per_second"] = deliveries_per_second
        if deliveries_per_day is not UNSET:
            field_dict["deliveries_per_day"] = deliveries_per_day

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_channels(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        channels = _parse_channels(d.pop("channels", UNSET))

        def _parse_active_keys(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        active_keys = _parse_active_keys(d.pop("active_keys", UNSET))

        def _parse_deliveries_per_second(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        deliveries_per_second = _parse_deliveries_per_second(d.pop("deliveries_per_second", UNSET))

        def _parse_deliveries_per_day(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        deliveries_per_day = _parse_deliveries_per_day(d.pop("deliveries_per_day", UNSET))

        quota_patch = cls(
            channels=channels,
            active_keys=active_keys,
            deliveries_per_second=deliveries_per_second,
            deliveries_per_day=deliveries_per_day,
        )

        return quota_patch
