from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.auth_type_1_type import AuthType1Type

T = TypeVar("T", bound="AuthType1")


@_attrs_define
class AuthType1:
    """A static bearer token (RFC 6750): `Authorization: Bearer <token>` on every request.

    Attributes:
        token (str): The token; `********` on reads.
        type_ (AuthType1Type):
    """

    token: str
    type_: AuthType1Type
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        token = self.token

        type_ = self.type_.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "token": token,
                "type": type_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        token = d.pop("token")

        type_ = AuthType1Type(d.pop("type"))

        auth_type_1 = cls(
            token=token,
            type_=type_,
        )

        auth_type_1.additional_properties = d
        return auth_type_1

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
