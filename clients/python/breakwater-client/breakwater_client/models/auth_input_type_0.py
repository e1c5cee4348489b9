from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.auth_input_type_0_type import AuthInputType0Type
from ..types import UNSET, Unset

T = TypeVar("T", bound="AuthInputType0")


@_attrs_define
class AuthInputType0:
    """HTTP Basic (RFC 7617).

    Attributes:
        username (str): The user id: no `:` and no control characters, at most 1024 bytes.
        type_ (AuthInputType0Type):
        password (None | str | Unset): The password: no control characters, at most 1024 bytes (absent in a `PATCH`:
            kept).
    """

    username: str
    type_: AuthInputType0Type
    password: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        username = self.username

        type_ = self.type_.value

        password: None | str | Unset
        if isinstance(self.password, Unset):
            password = UNSET
        else:
            password = self.password

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "username": username,
                "type": type_,
            }
        )
        if password is not UNSET:
            field_dict["password"] = password

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        username = d.pop("username")

        type_ = AuthInputType0Type(d.pop("type"))

        def _parse_password(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        password = _parse_password(d.pop("password", UNSET))

        auth_input_type_0 = cls(
            username=username,
            type_=type_,
            password=password,
        )

        auth_input_type_0.additional_properties = d
        return auth_input_type_0

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
