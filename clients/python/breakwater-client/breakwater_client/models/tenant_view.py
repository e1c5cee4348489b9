from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.tier import Tier
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.event_settings import EventSettings
    from ..models.quotas import Quotas
    from ..models.retry_policy import RetryPolicy


T = TypeVar("T", bound="TenantView")


@_attrs_define
class TenantView:
    """A tenant, its quotas and, after a tier change, how many waiting jobs moved queue.

    Attributes:
        id (UUID): Tenant id.
        name (str): Display name.
        tier (Tier): A tenant's tier; it picks the queue its deliveries run on (docs/design.md, "Tiers").
        alert_on_manual (bool): Whether the tenant's own pause and resume of a channel send alerts (default false: they
            are audited but page nobody). Operator actions and the breaker's own transitions always
            alert (under the flapping policy).
        reject_unknown_event_types (bool): Whether an enqueue or a message whose event type is not in the tenant's
            catalog
            ([`crate::event_types`]) is refused (422 on `event_type`); default false: accepted.
        created_at (datetime.datetime): Creation time.
        quotas (Quotas): The quotas in force for one tenant: its override where the operator set one, else the
            cluster default.
        alert_events (EventSettings): A tenant's delivery-level event settings (the `alert_events` object of the tenant
            API).
        alert_url (None | str | Unset): Where circuit alerts for this tenant's channels are sent, if anywhere.
        retry_policy (None | RetryPolicy | Unset):
        jobs_moved (int | None | Unset): After a tier change: how many waiting jobs moved to the new tier's queue.
    """

    id: UUID
    name: str
    tier: Tier
    alert_on_manual: bool
    reject_unknown_event_types: bool
    created_at: datetime.datetime
    quotas: Quotas
    alert_events: EventSettings
    alert_url: None | str | Unset = UNSET
    retry_policy: None | RetryPolicy | Unset = UNSET
    jobs_moved: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.retry_policy import RetryPolicy  # noqa: PLC0415

        id = str(self.id)

        name = self.name

        tier = self.tier.value

        alert_on_manual = self.alert_on_manual

        reject_unknown_event_types = self.reject_unknown_event_types

        created_at = self.created_at.isoformat()

        quotas = self.quotas.to_dict()

        alert_events = self.alert_events.to_dict()

        alert_url: None | str | Unset
        if isinstance(self.alert_url, Unset):
            alert_url = UNSET
        else:
            alert_url = self.alert_url

        retry_policy: dict[str, Any] | None | Unset
        if isinstance(self.retry_policy, Unset):
            retry_policy = UNSET
        elif isinstance(self.retry_policy, RetryPolicy):
            retry_policy = self.retry_policy.to_dict()
        else:
            retry_policy = self.retry_policy

        jobs_moved: int | None | Unset
        if isinstance(self.jobs_moved, Unset):
            jobs_moved = UNSET
        else:
            jobs_moved = self.jobs_moved

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
                "quotas": quotas,
                "alert_events": alert_events,
            }
        )
        if alert_url is not UNSET:
            field_dict["alert_url"] = alert_url
        if retry_policy is not UNSET:
            field_dict["retry_policy"] = retry_policy
        if jobs_moved is not UNSET:
            field_dict["jobs_moved"] = jobs_moved

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.event_settings import EventSettings  # noqa: PLC0415
        from ..models.quotas import Quotas  # noqa: PLC0415
        from ..models.retry_policy import RetryPolicy  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        name = d.pop("name")

        tier = Tier(d.pop("tier"))

        alert_on_manual = d.pop("alert_on_manual")

        reject_unknown_event_types = d.pop("reject_unknown_event_types")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        quotas = Quotas.from_dict(d.pop("quotas"))

        alert_events = EventSettings.from_dict(d.pop("alert_events"))

        def _parse_alert_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        alert_url = _parse_alert_url(d.pop("alert_url", UNSET))

        def _parse_retry_policy(data: object) -> None | RetryPolicy | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                retry_policy_type_1 = RetryPolicy.from_dict(data)

                return retry_policy_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetryPolicy | Unset, data)

        retry_policy = _parse_retry_policy(d.pop("retry_policy", UNSET))

        def _parse_jobs_moved(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        jobs_moved = _parse_jobs_moved(d.pop("jobs_moved", UNSET))

        tenant_view = cls(
            id=id,
            name=name,
            tier=tier,
            alert_on_manual=alert_on_manual,
            reject_unknown_event_types=reject_unknown_event_types,
            created_at=created_at,
            quotas=quotas,
            alert_events=alert_events,
            alert_url=alert_url,
            retry_policy=retry_policy,
            jobs_moved=jobs_moved,
        )

        tenant_view.additional_properties = d
        return tenant_view

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
