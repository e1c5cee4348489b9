from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.auth_input_type_2_type import AuthInputType2Type
from ..types import UNSET, Unset

T = TypeVar("T", bound="AuthInputType2")


@_attrs_define
class AuthInputType2:
    """OAuth2 client credentials (RFC 6749 §4.4).

    Attributes:
        token_url (str): The token endpoint (same rules as a channel's `url`).
        client_id (str): The client id: no control characters, at most 1024 bytes.
        type_ (AuthInputType2Type):
        client_secret (None | str | Unset): The client secret: no control characters, at most 1024 bytes (absent in a
            `PATCH`:
            kept while `token_url` is unchanged).
        scope (None | str | Unset): The scope asked for, if any (RFC 6749 §3.3: space-separated tokens).
    """

    token_url: str
    client_id: str
    type_: AuthInputType2Type
    client_secret: None | str | Unset = UNSET
    scope: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        token_url = self.token_url

        client_id = self.client_id

        type_ = self.type_.value

        client_secret: None | str | Unset
        if isinstance(self.client_secret, Unset):
            client_secret = UNSET
        else:
            client_secret = self.client_secret

        scope: None | str | Unset
        if isinstance(self.scope, Unset):
            scope = UNSET
        else:
            scope = self.scope

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "token_url": token_url,
                "client_id": client_id,
                "type": type_,
            }
        )
        if client_secret is not UNSET:
            field_dict["client_secret"] = client_secret
        if scope is not UNSET:
            field_dict["scope"] = scope

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        token_url = d.pop("token_url")

        client_id = d.pop("client_id")

        type_ = AuthInputType2Type(d.pop("type"))

        def _parse_client_secret(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        client_secret = _parse_client_secret(d.pop("client_secret", UNSET))

        def _parse_scope(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        scope = _parse_scope(d.pop("scope", UNSET))

        auth_input_type_2 = cls(
            token_url=token_url,
            client_id=client_id,
            type_=type_,
            client_secret=client_secret,
            scope=scope,
        )

        auth_input_type_2.additional_properties = d
        return auth_input_type_2

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
