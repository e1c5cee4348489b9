from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.subscriber import Subscriber


T = TypeVar("T", bound="EventTypeView")


@_attrs_define
class EventTypeView:
    """An event type with the tenant's channels that take it.

    Attributes:
        tenant_id (UUID): The owning tenant.
        name (str): The dotted name, e.g. `invoice.paid` (see the module docs for the form). Example: invoice.paid.
        deprecated (bool): Whether the type is deprecated (informational: it is still accepted).
        created_at (datetime.datetime): Creation time.
        updated_at (datetime.datetime): Last change.
        channels (list[Subscriber]): The tenant's live channels that receive this type from `POST /api/v1/messages` (by
            exact name, by a wildcard such as `invoice.*`, or because they have no filter), by id,
            at most 100.
        channels_truncated (bool): True when more than 100 channels take it (only the first 100 are listed).
        description (None | str | Unset): What the event means, for a person.
        schema (Any | Unset): The JSON Schema (draft 2020-12) every payload of this type must match; null = any.
        example (Any | Unset): An example payload (valid against `schema`).
    """

    tenant_id: UUID
    name: str
    deprecated: bool
    created_at: datetime.datetime
    updated_at: datetime.datetime
    channels: list[Subscriber]
    channels_truncated: bool
    description: None | str | Unset = UNSET
    schema: Any | Unset = UNSET
    example: Any | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        tenant_id = str(self.tenant_id)

        name = self.name

        deprecated = self.deprecated

        created_at = self.created_at.isoformat()

        updated_at = self.updated_at.isoformat()

        channels = []
        for channels_item_data in self.channels:
            channels_item = channels_item_data.to_dict()
            channels.append(channels_item)

        channels_truncated = self.channels_truncated

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        schema = self.schema

        example = self.example

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "tenant_id": tenant_id,
                "name": name,
                "deprecated": deprecated,
                "created_at": created_at,
                "updated_at": updated_at,
                "channels": channels,
                "channels_truncated": channels_truncated,
            }
        )
        if description is not UNSET:
            field_dict["description"] = description
        if schema is not UNSET:
            field_dict["schema"] = schema
        if example is not UNSET:
            field_dict["example"] = example

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.subscriber import Subscriber  # noqa: PLC0415

        d = dict(src_dict)
        tenant_id = UUID(d.pop("tenant_id"))

        name = d.pop("name")

        deprecated = d.pop("deprecated")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        channels = []
        _channels = d.pop("channels")
        for channels_item_data in _channels:
            channels_item = Subscriber.from_dict(channels_item_data)

            channels.append(channels_item)

        channels_truncated = d.pop("channels_truncated")

        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))

        schema = d.pop("schema", UNSET)

        example = d.pop("example", UNSET)

        event_type_view = cls(
            tenant_id=tenant_id,
            name=name,
            deprecated=deprecated,
            created_at=created_at,
            updated_at=updated_at,
            channels=channels,
            channels_truncated=channels_truncated,
            description=description,
            schema=schema,
            example=example,
        )

        event_type_view.additional_properties = d
        return event_type_view

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
