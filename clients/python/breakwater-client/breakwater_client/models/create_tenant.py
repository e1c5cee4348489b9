from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.tier import Tier
from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateTenant")


@_attrs_define
class CreateTenant:
    """Body of `POST /api/v1/tenants`.

    Attributes:
        name (str): Display name, 1 to 200 characters (trimmed) without control, bidirectional
            formatting or invisible characters. Example: acme.
        tier (None | Tier | Unset):
        alert_url (None | str | Unset): Where circuit alerts are sent (same rules as a channel URL); empty or null =
            none.
    """

    name: str
    tier: None | Tier | Unset = UNSET
    alert_url: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        tier: None | str | Unset
        if isinstance(self.tier, Unset):
            tier = UNSET
        elif isinstance(self.tier, Tier):
            tier = self.tier.value
        else:
            tier = self.tier

        alert_url: None | str | Unset
        if isinstance(self.alert_url, Unset):
            alert_url = UNSET
        else:
            alert_url = self.alert_url

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
            }
        )
        if tier is not UNSET:
            field_dict["tier"] = tier
        if alert_url is not UNSET:
            field_dict["alert_url"] = alert_url

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        def _parse_tier(data: object) -> None | Tier | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                tier_type_1 = Tier(data)

                return tier_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Tier | Unset, data)

        tier = _parse_tier(d.pop("tier", UNSET))

        def _parse_alert_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        alert_url = _parse_alert_url(d.pop("alert_url", UNSET))

        create_tenant = cls(
            name=name,
            tier=tier,
            alert_url=alert_url,
        )

        return create_tenant
