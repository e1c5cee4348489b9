from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Quotas")


@_attrs_define
class Quotas:
    """The quotas in force for one tenant: its override where the operator set one, else the
    cluster default.

        Attributes:
            channels (int): Most live channels.
            active_keys (int): Most unrevoked API keys.
            deliveries_per_second (int | None | Unset): Most deliveries accepted per second (a second's worth may come at
                once); null = no limit.
            deliveries_per_day (int | None | Unset): Most deliveries accepted per UTC day; null = no limit.
    """

    channels: int
    active_keys: int
    deliveries_per_second: int | None | Unset = UNSET
    deliveries_per_day: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        channels = self.channels

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
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "channels": channels,
                "active_keys": active_keys,
            }
        )
        if deliveries_per_second is not UNSET:
            field_dict["deliveries_per_second"] = deliveries_per_second
        if deliveries_per_day is not UNSET:
            field_dict["deliveries_per_day"] = deliveries_per_day

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        channels = d.pop("channels")

        active_keys = d.pop("active_keys")

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

        quotas = cls(
            channels=channels,
            active_keys=active_keys,
            deliveries_per_second=deliveries_per_second,
            deliveries_per_day=deliveries_per_day,
        )

        quotas.additional_properties = d
        return quotas

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
