from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateEventType")


@_attrs_define
class CreateEventType:
    """Body of `POST /api/v1/event-types`.

    Attributes:
        name (str): 1 to 128 characters: segments of ASCII letters, digits, `_` and `-` joined by single
            dots. Example: invoice.paid.
        description (None | str | Unset): What the event means, at most 1000 characters (trimmed; empty or null: none).
        schema (Any | Unset): A JSON Schema (draft 2020-12; an object, or true/false) every payload of this type must
            match, at most 64 KiB as JSON; `$ref`s resolve only inside it. Null or absent: any
            payload.
        example (Any | Unset): An example payload, at most 64 KiB as JSON, valid against `schema` (422
            `schema_violation` on `example` otherwise). Null or absent: none.
        deprecated (bool | Unset): Mark the type deprecated (informational; still accepted). Default false.
    """

    name: str
    description: None | str | Unset = UNSET
    schema: Any | Unset = UNSET
    example: Any | Unset = UNSET
    deprecated: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        schema = self.schema

        example = self.example

        deprecated = self.deprecated

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
            }
        )
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
        name = d.pop("name")

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

        create_event_type = cls(
            name=name,
            description=description,
            schema=schema,
            example=example,
            deprecated=deprecated,
        )

        return create_event_type
