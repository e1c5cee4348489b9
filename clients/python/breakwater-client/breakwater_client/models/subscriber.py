from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Subscriber")


@_attrs_define
class Subscriber:
    """A channel that takes an event type.

    Attributes:
        id (UUID): The channel id.
        name (None | str | Unset): The channel's display name, if any.
        matched_by (None | str | Unset): The entry of the channel's `event_types` filter that takes the type (the exact
            name, or
            a wildcard such as `invoice.*`); null when the channel has no filter (it takes every
            type).
    """

    id: UUID
    name: None | str | Unset = UNSET
    matched_by: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        matched_by: None | str | Unset
        if isinstance(self.matched_by, Unset):
            matched_by = UNSET
        else:
            matched_by = self.matched_by

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
            }
        )
        if name is not UNSET:
            field_dict["name"] = name
        if matched_by is not UNSET:
            field_dict["matched_by"] = matched_by

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = UUID(d.pop("id"))

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_matched_by(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        matched_by = _parse_matched_by(d.pop("matched_by", UNSET))

        subscriber = cls(
            id=id,
            name=name,
            matched_by=matched_by,
        )

        subscriber.additional_properties = d
        return subscriber

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
