from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.scope import Scope

T = TypeVar("T", bound="OpenedSession")


@_attrs_define
class OpenedSession:
    """An opened portal session: its URL holds the token, shown this once.

    Attributes:
        id (UUID): Session id (revoke it with `DELETE …/portal-sessions/{id}`; what it does is audited as
            `portal:<id>`).
        tenant_id (UUID): Its tenant.
        scope (Scope): What a portal session may do.
        url (str): The portal page with the token in the fragment: `<api.public_url>/portal#token=bwp_…`
            (a path when `api.public_url` is empty). Open it or embed it in an `<iframe>`; only the
            token's digest is stored, so it cannot be shown again. Example: https://hooks.example.com/portal#token=bwp_….
        expires_at (datetime.datetime): Refused (401) from this instant on.
    """

    id: UUID
    tenant_id: UUID
    scope: Scope
    url: str
    expires_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        tenant_id = str(self.tenant_id)

        scope = self.scope.value

        url = self.url

        expires_at = self.expires_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "tenant_id": tenant_id,
                "scope": scope,
                "url": url,
                "expires_at": expires_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = UUID(d.pop("id"))

        tenant_id = UUID(d.pop("tenant_id"))

        scope = Scope(d.pop("scope"))

        url = d.pop("url")

        expires_at = datetime.datetime.fromisoformat(d.pop("expires_at"))

        opened_session = cls(
            id=id,
            tenant_id=tenant_id,
            scope=scope,
            url=url,
            expires_at=expires_at,
        )

        opened_session.additional_properties = d
        return opened_session

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
