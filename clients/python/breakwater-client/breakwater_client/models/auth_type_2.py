from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.auth_type_2_type import AuthType2Type
from ..types import UNSET, Unset

T = TypeVar("T", bound="AuthType2")


@_attrs_define
class AuthType2:
    """OAuth2 client credentials (RFC 6749 §4.4): a token is fetched from `token_url` with the
    client's id and secret (HTTP Basic, §2.3.1), cached by the worker node until it expires,
    and sent as `Authorization: Bearer <access_token>`; fetched again once after a 401.

        Attributes:
            token_url (str): The token endpoint: the same rules as a channel's URL (absolute `http(s)`, public
                addresses only unless `allow_private_targets`).
            client_id (str): The client id.
            client_secret (str): The client secret; `********` on reads.
            type_ (AuthType2Type):
            scope (None | str | Unset): The scope asked for (space-separated), if any.
    """

    token_url: str
    client_id: str
    client_secret: str
    type_: AuthType2Type
    scope: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        token_url = self.token_url

        client_id = self.client_id

        client_secret = self.client_secret

        type_ = self.type_.value

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
                "client_secret": client_secret,
                "type": type_,
            }
        )
        if scope is not UNSET:
            field_dict["scope"] = scope

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        token_url = d.pop("token_url")

        client_id = d.pop("client_id")

        client_secret = d.pop("client_secret")

        type_ = AuthType2Type(d.pop("type"))

        def _parse_scope(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        scope = _parse_scope(d.pop("scope", UNSET))

        auth_type_2 = cls(
            token_url=token_url,
            client_id=client_id,
            client_secret=client_secret,
            type_=type_,
            scope=scope,
        )

        auth_type_2.additional_properties = d
        return auth_type_2

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
