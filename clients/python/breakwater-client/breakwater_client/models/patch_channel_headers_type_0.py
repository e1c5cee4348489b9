from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.header_spec import HeaderSpec


T = TypeVar("T", bound="PatchChannelHeadersType0")


@_attrs_define
class PatchChannelHeadersType0:
    """Custom headers (same rules as at creation), replacing all of them; `{}` or `null` removes
    them. `{"sensitive": true}` without a `value` keeps a header's stored value.

    """

    additional_properties: dict[str, HeaderSpec | str] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.header_spec import HeaderSpec  # noqa: PLC0415

        field_dict: dict[str, Any] = {}
        for prop_name, prop in self.additional_properties.items():
            if isinstance(prop, HeaderSpec):
                field_dict[prop_name] = prop.to_dict()
            else:
                field_dict[prop_name] = prop

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.header_spec import HeaderSpec  # noqa: PLC0415

        d = dict(src_dict)
        patch_channel_headers_type_0 = cls()

        additional_properties = {}
        for prop_name, prop_dict in d.items():

            def _parse_additional_property(data: object) -> HeaderSpec | str:
                try:
                    if not isinstance(data, dict):
                        raise TypeError()
                    componentsschemas_header_input_type_1 = HeaderSpec.from_dict(data)

                    return componentsschemas_header_input_type_1
                except (TypeError, ValueError, AttributeError, KeyError):
                    pass
                return cast(HeaderSpec | str, data)

            additional_property = _parse_additional_property(prop_dict)

            additional_properties[prop_name] = additional_property

        patch_channel_headers_type_0.additional_properties = additional_properties
        return patch_channel_headers_type_0

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> HeaderSpec | str:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: HeaderSpec | str) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
