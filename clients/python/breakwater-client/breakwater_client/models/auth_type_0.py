from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.auth_type_0_type import AuthType0Type

T = TypeVar("T", bound="AuthType0")


@_attrs_define
class AuthType0:
    """HTTP Basic (RFC 7617): `Authorization: Basic base64(username:password)` on every request.

    Attributes:
        username (str): The user id (no `:`, RFC 7617 §2).
        password (str): The password; `********` on reads.
        type_ (AuthType0Type):
    """

    username: str
    password: str
    type_: AuthType0Type
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        username = self.username

        password = self.password

        type_ = self.type_.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "username": username,
                "password": password,
                "type": type_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        username = d.pop("username")

        password = d.pop("password")

        type_ = AuthType0Type(d.pop("type"))

        auth_type_0 = cls(
            username=username,
            password=password,
            type_=type_,
        )

        auth_type_0.additional_properties = d
        return auth_type_0

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
