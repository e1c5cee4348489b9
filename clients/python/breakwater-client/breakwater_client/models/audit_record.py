from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="AuditRecord")


@_attrs_define
class AuditRecord:
    """A stored audit entry.

    Attributes:
        id (int): Sequence number.
        at (datetime.datetime): When (database time).
        actor (str): Who.
        action (str): What.
        details (Any): Details: for a change of settings, `{"old": {field: value}, "new": {field: value}}` with
            only the fields that changed (see [`changes`]); never a secret.
        tenant_id (None | Unset | UUID): Tenant concerned.
        channel_id (None | Unset | UUID): Channel concerned.
        from_state (None | str | Unset): Circuit state before.
        to_state (None | str | Unset): Circuit state after.
        reason (None | str | Unset): Why.
        request_id (None | str | Unset): The `x-request-id` of the API request that made the change; `None` for the
            system's own
            changes (see [`begin_request`]).
    """

    id: int
    at: datetime.datetime
    actor: str
    action: str
    details: Any
    tenant_id: None | Unset | UUID = UNSET
    channel_id: None | Unset | UUID = UNSET
    from_state: None | str | Unset = UNSET
    to_state: None | str | Unset = UNSET
    reason: None | str | Unset = UNSET
    request_id: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        at = self.at.isoformat()

        actor = self.actor

        action = self.action

        details = self.details

        tenant_id: None | str | Unset
        if isinstance(self.tenant_id, Unset):
            tenant_id = UNSET
        elif isinstance(self.tenant_id, UUID):
            tenant_id = str(self.tenant_id)
        else:
            tenant_id = self.tenant_id

        channel_id: None | str | Unset
        if isinstance(self.channel_id, Unset):
            channel_id = UNSET
        elif isinstance(self.channel_id, UUID):
            channel_id = str(self.channel_id)
        else:
            channel_id = self.channel_id

        from_state: None | str | Unset
        if isinstance(self.from_state, Unset):
            from_state = UNSET
        else:
            from_state = self.from_state

        to_state: None | str | Unset
        if isinstance(self.to_state, Unset):
            to_state = UNSET
        else:
            to_state = self.to_state

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        request_id: None | str | Unset
        if isinstance(self.request_id, Unset):
            request_id = UNSET
        else:
            request_id = self.request_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "at": at,
                "actor": actor,
                "action": action,
                "details": details,
            }
        )
        if tenant_id is not UNSET:
            field_dict["tenant_id"] = tenant_id
        if channel_id is not UNSET:
            field_dict["channel_id"] = channel_id
        if from_state is not UNSET:
            field_dict["from_state"] = from_state
        if to_state is not UNSET:
            field_dict["to_state"] = to_state
        if reason is not UNSET:
            field_dict["reason"] = reason
        if request_id is not UNSET:
            field_dict["request_id"] = request_id

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = d.pop("id")

        at = datetime.datetime.fromisoformat(d.pop("at"))

        actor = d.pop("actor")

        action = d.pop("action")

        details = d.pop("details")

        def _parse_tenant_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                tenant_id_type_0 = UUID(data)

                return tenant_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        tenant_id = _parse_tenant_id(d.pop("tenant_id", UNSET))

        def _parse_channel_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                channel_id_type_0 = UUID(data)

                return channel_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        channel_id = _parse_channel_id(d.pop("channel_id", UNSET))

        def _parse_from_state(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        from_state = _parse_from_state(d.pop("from_state", UNSET))

        def _parse_to_state(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        to_state = _parse_to_state(d.pop("to_state", UNSET))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        def _parse_request_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        request_id = _parse_request_id(d.pop("request_id", UNSET))

        audit_record = cls(
            id=id,
            at=at,
            actor=actor,
            action=action,
            details=details,
            tenant_id=tenant_id,
            channel_id=channel_id,
            from_state=from_state,
            to_state=to_state,
            reason=reason,
            request_id=request_id,
        )

        audit_record.additional_properties = d
        return audit_record

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
