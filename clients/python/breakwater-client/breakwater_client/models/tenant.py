from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.tier import Tier
from ..types import UNSET, Unset

T = TypeVar("T", bound="Tenant")


@_attrs_define
class Tenant:
    """A tenant, as the API shows it (the alert secret is never included).

    Attributes:
        id (UUID): Tenant id.
        name (str): Display name.
        tier (Tier): A tenant's tier; it picks the queue its deliveries run on (DESIGN.md, "Tiers").
        alert_on_manual (bool): Whether the tenant's own pause and resume of a channel send alerts (default false: they
            are audited but page nobody). Operator actions and the breaker's own transitions always
            alert (under the flapping policy).
        reject_unknown_event_types (bool): Whether an enqueue or a message whose event type is not in the tenant's
            catalog
            ([`crate::event_types`]) is refused (422 on `event_type`); default false: accepted.
        created_at (datetime.datetime): Creation time.
        alert_url (None | str | Unset): Where circuit alerts for this tenant's channels are sent, if anywhere.
    """

    id: UUID
    name: str
    tier: Tier
    alert_on_manual: bool
    reject_unknown_event_types: bool
    created_at: datetime.datetime
    alert_url: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        name = self.name

        tier = self.tier.value

        alert_on_manual = self.alert_on_manual

        reject_unknown_event_types = self.reject_unknown_event_types

        created_at = self.created_at.isoformat()

        alert_url: None | str | Unset
        if isinstance(self.alert_url, Unset):
            alert_url = UNSET
        else:
            alert_url = self.alert_url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "name": name,
                "tier": tier,
                "alert_on_manual": alert_on_manual,
                "reject_unknown_event_types": reject_unknown_event_types,
                "created_at": created_at,
            }
        )
        if alert_url is not UNSET:
            field_dict["alert_url"] = alert_url

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = UUID(d.pop("id"))

        name = d.pop("name")

        tier = Tier(d.pop("tier"))

        alert_on_manual = d.pop("alert_on_manual")

        reject_unknown_event_types = d.pop("reject_unknown_event_types")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_alert_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        alert_url = _parse_alert_url(d.pop("alert_url", UNSET))

        tenant = cls(
            id=id,
            name=name,
            tier=tier,
            alert_on_manual=alert_on_manual,
            reject_unknown_event_types=reject_unknown_event_types,
            created_at=created_at,
            alert_url=alert_url,
        )

        tenant.additional_properties = d
        return tenant

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
