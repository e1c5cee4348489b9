from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.scope import Scope
from ..types import UNSET, Unset

T = TypeVar("T", bound="PortalSession")


@_attrs_define
class PortalSession:
    """A session as it is listed: never its token or its digest.

    Attributes:
        id (UUID): Session id (the audit actor of what it does is `portal:<id>`).
        tenant_id (UUID): The one tenant it acts for.
        scope (Scope): What a portal session may do.
        created_by (str): Who opened it: `operator` or `tenant:<api key id>`.
        created_at (datetime.datetime): Opened at.
        expires_at (datetime.datetime): Refused (401) from this instant on.
        revoked_at (datetime.datetime | None | Unset): When it was revoked; null while it is not.
    """

    id: UUID
    tenant_id: UUID
    scope: Scope
    created_by: str
    created_at: datetime.datetime
    expires_at: datetime.datetime
    revoked_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        tenant_id = str(self.tenant_id)

        scope = self.scope.value

        created_by = self.created_by

        created_at = self.created_at.isoformat()

        expires_at = self.expires_at.isoformat()

        revoked_at: None | str | Unset
        if isinstance(self.revoked_at, Unset):
            revoked_at = UNSET
        elif isinstance(self.revoked_at, datetime.datetime):
            revoked_at = self.revoked_at.isoformat()
        else:
            revoked_at = self.revoked_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "tenant_id": tenant_id,
                "scope": scope,
                "created_by": created_by,
                "created_at": created_at,
                "expires_at": expires_at,
            }
        )
        if revoked_at is not UNSET:
            field_dict["revoked_at"] = revoked_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = UUID(d.pop("id"))

        tenant_id = UUID(d.pop("tenant_id"))

        scope = Scope(d.pop("scope"))

        created_by = d.pop("created_by")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        expires_at = datetime.datetime.fromisoformat(d.pop("expires_at"))

        def _parse_revoked_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                revoked_at_type_0 = datetime.datetime.fromisoformat(data)

                return revoked_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        revoked_at = _parse_revoked_at(d.pop("revoked_at", UNSET))

        portal_session = cls(
            id=id,
            tenant_id=tenant_id,
            scope=scope,
            created_by=created_by,
            created_at=created_at,
            expires_at=expires_at,
            revoked_at=revoked_at,
        )

        portal_session.additional_properties = d
        return portal_session

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
