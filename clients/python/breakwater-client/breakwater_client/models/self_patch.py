from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="SelfPatch")


@_attrs_define
class SelfPatch:
    """Body of `PATCH /api/v1/tenant` (the tenant itself): its alert URL (`null` removes it) and
    whether its own pause and resume alert.

        Attributes:
            alert_url (None | str | Unset): Alert URL (null or empty removes it).
            alert_on_manual (bool | Unset): Whether the tenant's own pause and resume of a channel send alerts (default
                false:
                audited, but nobody is paged; not null). Operator actions always alert.
            reject_unknown_event_types (bool | Unset): Whether an enqueue or a message whose event type is not in the
                tenant's event-type
                catalog is refused (422 on `event_type`); default false: accepted (not null).
    """

    alert_url: None | str | Unset = UNSET
    alert_on_manual: bool | Unset = UNSET
    reject_unknown_event_types: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        alert_url: None | str | Unset
        if isinstance(self.alert_url, Unset):
            alert_url = UNSET
        else:
            alert_url = self.alert_url

        alert_on_manual = self.alert_on_manual

        reject_unknown_event_types = self.reject_unknown_event_types

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if alert_url is not UNSET:
            field_dict["alert_url"] = alert_url
        if alert_on_manual is not UNSET:
            field_dict["alert_on_manual"] = alert_on_manual
        if reject_unknown_event_types is not UNSET:
            field_dict["reject_unknown_event_types"] = reject_unknown_event_types

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_alert_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        alert_url = _parse_alert_url(d.pop("alert_url", UNSET))

        alert_on_manual = d.pop("alert_on_manual", UNSET)

        reject_unknown_event_types = d.pop("reject_unknown_event_types", UNSET)

        self_patch = cls(
            alert_url=alert_url,
            alert_on_manual=alert_on_manual,
            reject_unknown_event_types=reject_unknown_event_types,
        )

        return self_patch
