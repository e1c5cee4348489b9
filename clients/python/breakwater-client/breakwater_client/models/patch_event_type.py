from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="PatchEventType")


@_attrs_define
class PatchEventType:
    """Body of `PATCH /api/v1/event-types/{name}`: every field optional; `null` removes a
    description, schema or example. The name cannot change (create another, delete this one).

        Attributes:
            description (None | str | Unset): New description (null removes it).
            schema (Any | Unset): New JSON Schema (null removes it). The example (new or kept) must be valid against it.
            example (Any | Unset): New example (null removes it), valid against the schema (new or kept).
            deprecated (bool | Unset): New deprecated flag (not null).
    """

    description: None | str | Unset = UNSET
    schema: Any | Unset = UNSET
    example: Any | Unset = UNSET
    deprecated: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        schema = self.schema

        example = self.example

        deprecated = self.deprecated

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if description is not UNSET:
            field_dict["description"] = description
        if schema is not UNSET:
            field_dict["schema"] = schema
        if example is not UNSET:
            field_dict["example"] = example
        if deprecated is not UNSET:
            field_dict["deprecated"] = deprecated

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))

        schema = d.pop("schema", UNSET)

        example = d.pop("example", UNSET)

        deprecated = d.pop("deprecated", UNSET)

        patch_event_type = cls(
            description=description,
            schema=schema,
            example=example,
            deprecated=deprecated,
        )

        return patch_event_type
