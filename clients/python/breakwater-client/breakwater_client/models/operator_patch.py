from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.tier import Tier
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.event_settings_patch import EventSettingsPatch
    from ..models.quota_patch import QuotaPatch
    from ..models.retry_policy import RetryPolicy


T = TypeVar("T", bound="OperatorPatch")


@_attrs_define
class OperatorPatch:
    """Body of `PATCH /api/v1/tenants/{id}` (operator): every field optional; `alert_url: null`
    removes it. A tier change moves the tenant's waiting deliveries to the new tier's queue.

        Attributes:
            name (str | Unset): Display name, 1 to 200 characters (trimmed; not null) without control,
                bidirectional formatting or invisible characters.
            tier (Tier | Unset): A tenant's tier; it picks the queue its deliveries run on (docs/design.md, "Tiers").
            alert_url (None | str | Unset): Alert URL (null or empty removes it).
            alert_on_manual (bool | Unset): Whether the tenant's own pause and resume of a channel send alerts (default
                false:
                audited, but nobody is paged; not null). Operator actions always alert.
            alert_events (EventSettingsPatch | Unset): Changes to a tenant's event settings: an absent field is left alone
                (none may be `null`).
            quotas (QuotaPatch | Unset): Changes to a tenant's quotas (the operator's `quotas` object): `None` leaves one
                alone,
                `Some(None)` (a JSON `null`) puts it back to the cluster default, `Some(Some(n))` sets it.
            reject_unknown_event_types (bool | Unset): Whether an enqueue or a message whose event type is not in the
                tenant's event-type
                catalog is refused (422 on `event_type`); default false: accepted (not null).
            retry_policy (None | RetryPolicy | Unset):
    """

    name: str | Unset = UNSET
    tier: Tier | Unset = UNSET
    alert_url: None | str | Unset = UNSET
    alert_on_manual: bool | Unset = UNSET
    alert_events: EventSettingsPatch | Unset = UNSET
    quotas: QuotaPatch | Unset = UNSET
    reject_unknown_event_types: bool | Unset = UNSET
    retry_policy: None | RetryPolicy | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.retry_policy import RetryPolicy  # noqa: PLC0415

        name = self.name

        tier: str | Unset = UNSET
        if not isinstance(self.tier, Unset):
            tier = self.tier.value

        alert_url: None | str | Unset
        if isinstance(self.alert_url, Unset):
            alert_url = UNSET
        else:
            alert_url = self.alert_url

        alert_on_manual = self.alert_on_manual

        alert_events: dict[str, Any] | Unset = UNSET
        if not isinstance(self.alert_events, Unset):
            alert_events = self.alert_events.to_dict()

        quotas: dict[str, Any] | Unset = UNSET
        if not isinstance(self.quotas, Unset):
            quotas = self.quotas.to_dict()

        reject_unknown_event_types = self.reject_unknown_event_types

        retry_policy: dict[str, Any] | None | Unset
        if isinstance(self.retry_policy, Unset):
            retry_policy = UNSET
        elif isinstance(self.retry_policy, RetryPolicy):
            retry_policy = self.retry_policy.to_dict()
        else:
            retry_policy = self.retry_policy

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if name is not UNSET:
            field_dict["name"] = name
        if tier is not UNSET:
            field_dict["tier"] = tier
        if alert_url is not UNSET:
            field_dict["alert_url"] = alert_url
        if alert_on_manual is not UNSET:
            field_dict["alert_on_manual"] = alert_on_manual
        if alert_events is not UNSET:
            field_dict["alert_events"] = alert_events
        if quotas is not UNSET:
            field_dict["quotas"] = quotas
        if reject_unknown_event_types is not UNSET:
            field_dict["reject_unknown_event_types"] = reject_unknown_event_types
        if retry_policy is not UNSET:
            field_dict["retry_policy"] = retry_policy

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.event_settings_patch import EventSettingsPatch  # noqa: PLC0415
        from ..models.quota_patch import QuotaPatch  # noqa: PLC0415
        from ..models.retry_policy import RetryPolicy  # noqa: PLC0415

        d = dict(src_dict)
        name = d.pop("name", UNSET)

        _tier = d.pop("tier", UNSET)
        tier: Tier | Unset
        if isinstance(_tier, Unset):
            tier = UNSET
        else:
            tier = Tier(_tier)

        def _parse_alert_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        alert_url = _parse_alert_url(d.pop("alert_url", UNSET))

        alert_on_manual = d.pop("alert_on_manual", UNSET)

        _alert_events = d.pop("alert_events", UNSET)
        alert_events: EventSettingsPatch | Unset
        if isinstance(_alert_events, Unset):
            alert_events = UNSET
        else:
            alert_events = EventSettingsPatch.from_dict(_alert_events)

        _quotas = d.pop("quotas", UNSET)
        quotas: QuotaPatch | Unset
        if isinstance(_quotas, Unset):
            quotas = UNSET
        else:
            quotas = QuotaPatch.from_dict(_quotas)

        reject_unknown_event_types = d.pop("reject_unknown_event_types", UNSET)

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

        operator_patch = cls(
            name=name,
            tier=tier,
            alert_url=alert_url,
            alert_on_manual=alert_on_manual,
            alert_events=alert_events,
            quotas=quotas,
            reject_unknown_event_types=reject_unknown_event_types,
            retry_policy=retry_policy,
        )

        return operator_patch
