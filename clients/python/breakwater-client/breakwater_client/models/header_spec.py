from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="HeaderSpec")


@_attrs_define
class HeaderSpec:
    """A header's value in its object form.

    Attributes:
        value (None | str | Unset): The value: visible ASCII, spaces and tabs (no CR, LF or NUL). In a `PATCH`, absent
            keeps the header's stored value (for a header that is already set).
        sensitive (bool | Unset): Whether the value is a secret: never shown again (reads show `********`), never
            logged,
            audited only as changed.
    """

    value: None | str | Unset = UNSET
    sensitive: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        value: None | str | Unset
        if isinstance(self.value, Unset):
            value = UNSET
        else:
            value = self.value

        sensitive = self.sensitive

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if value is not UNSET:
            field_dict["value"] = value
        if sensitive is not UNSET:
            field_dict["sensitive"] = sensitive

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_value(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        value = _parse_value(d.pop("value", UNSET))

        sensitive = d.pop("sensitive", UNSET)

        header_spec = cls(
            value=value,
            sensitive=sensitive,
        )

        return header_spec
