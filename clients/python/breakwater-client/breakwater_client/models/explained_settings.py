from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.policy_in_force import PolicyInForce


T = TypeVar("T", bound="ExplainedSettings")


@_attrs_define
class ExplainedSettings:
    """The settings an [`Explanation`] is computed from.

    Attributes:
        failure_threshold (int): Failure threshold in force.
        cooldown_ms (int): First cooldown in force, ms.
        concurrency_initial (int): The concurrency limit a channel starts at (`worker.channel_concurrency_initial`).
        concurrency_floor (int): Its floor (`worker.channel_concurrency_floor`).
        concurrency_ceiling (int): Its ceiling (the channel's `max_in_flight`, else
            `worker.channel_concurrency_ceiling`).
        retry_policy (PolicyInForce): The policy a channel's new deliveries are accepted with: every field resolved
            (channel,
            else tenant, else configuration), with the configuration's jitter and where each comes from.
        retention_days (int): `retention.deliveries_days`.
        rate_limit (None | str | Unset): Rate limit, if any.
    """

    failure_threshold: int
    cooldown_ms: int
    concurrency_initial: int
    concurrency_floor: int
    concurrency_ceiling: int
    retry_policy: PolicyInForce
    retention_days: int
    rate_limit: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        failure_threshold = self.failure_threshold

        cooldown_ms = self.cooldown_ms

        concurrency_initial = self.concurrency_initial

        concurrency_floor = self.concurrency_floor

        concurrency_ceiling = self.concurrency_ceiling

        retry_policy = self.retry_policy.to_dict()

        retention_days = self.retention_days

        rate_limit: None | str | Unset
        if isinstance(self.rate_limit, Unset):
            rate_limit = UNSET
        else:
            rate_limit = self.rate_limit

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "failure_threshold": failure_threshold,
                "cooldown_ms": cooldown_ms,
                "concurrency_initial": concurrency_initial,
                "concurrency_floor": concurrency_floor,
                "concurrency_ceiling": concurrency_ceiling,
                "retry_policy": retry_policy,
                "retention_days": retention_days,
            }
        )
        if rate_limit is not UNSET:
            field_dict["rate_limit"] = rate_limit

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.policy_in_force import PolicyInForce  # noqa: PLC0415

        d = dict(src_dict)
        failure_threshold = d.pop("failure_threshold")

        cooldown_ms = d.pop("cooldown_ms")

        concurrency_initial = d.pop("concurrency_initial")

        concurrency_floor = d.pop("concurrency_floor")

        concurrency_ceiling = d.pop("concurrency_ceiling")

        retry_policy = PolicyInForce.from_dict(d.pop("retry_policy"))

        retention_days = d.pop("retention_days")

        def _parse_rate_limit(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        rate_limit = _parse_rate_limit(d.pop("rate_limit", UNSET))

        explained_settings = cls(
            failure_threshold=failure_threshold,
            cooldown_ms=cooldown_ms,
            concurrency_initial=concurrency_initial,
            concurrency_floor=concurrency_floor,
            concurrency_ceiling=concurrency_ceiling,
            retry_policy=retry_policy,
            retention_days=retention_days,
            rate_limit=rate_limit,
        )

        explained_settings.additional_properties = d
        return explained_settings

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
