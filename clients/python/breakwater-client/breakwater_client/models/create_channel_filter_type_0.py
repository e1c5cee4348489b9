from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="CreateChannelFilterType0")


@_attrs_define
class CreateChannelFilterType0:
    """Payload filter: a [JSON Logic](https://jsonlogic.com) rule over `{"event_type": …,
    "payload": …}`; the channel gets a message from `POST /api/v1/messages` only when the
    rule is truthy for it (not applied to `POST /api/v1/channels/{id}/deliveries`, which
    names the channel). At most 4096 bytes, 256 values, 16 levels; the operators of the JSON
    Logic reference that test (`var`, `missing`, `missing_some`, `if`, `==`, `===`, `!=`,
    `!==`, `!`, `!!`, `or`, `and`, `>`, `>=`, `<`, `<=`, `max`, `min`, `+`, `-`, `*`, `/`,
    `%`, `all`, `some`, `none`, `in`, `substr`), iteration not nested. Absent/null = none.

    """

    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        create_channel_filter_type_0 = cls()

        create_channel_filter_type_0.additional_properties = d
        return create_channel_filter_type_0

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
