from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.backoff_policy_type_0 import BackoffPolicyType0
    from ..models.backoff_policy_type_1 import BackoffPolicyType1
    from ..models.policy_sources import PolicySources


T = TypeVar("T", bound="PolicyInForce")


@_attrs_define
class PolicyInForce:
    """The policy a channel's new deliveries are accepted with: every field resolved (channel,
    else tenant, else configuration), with the configuration's jitter and where each comes from.

        Attributes:
            max_attempts (int): HTTP attempts before a delivery is dead.
            backoff (BackoffPolicyType0 | BackoffPolicyType1): The wait before each retry, either shape jittered by
                `worker.backoff_jitter`.
            request_timeout_ms (int): Total timeout of one request, ms.
            jitter (float): Proportional jitter of every wait (`worker.backoff_jitter`): a wait is scaled by a random
                factor in `[1 − jitter, 1 + jitter]`.
            source (PolicySources): Where each field of a [`PolicyInForce`] comes from.
    """

    max_attempts: int
    backoff: BackoffPolicyType0 | BackoffPolicyType1
    request_timeout_ms: int
    jitter: float
    source: PolicySources
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.backoff_policy_type_0 import BackoffPolicyType0  # noqa: PLC0415

        max_attempts = self.max_attempts

        backoff: dict[str, Any]
        if isinstance(self.backoff, BackoffPolicyType0):
            backoff = self.backoff.to_dict()
        else:
            backoff = self.backoff.to_dict()

        request_timeout_ms = self.request_timeout_ms

        jitter = self.jitter

        source = self.source.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "max_attempts": max_attempts,
                "backoff": backoff,
                "request_timeout_ms": request_timeout_ms,
                "jitter": jitter,
                "source": source,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.backoff_policy_type_0 import BackoffPolicyType0  # noqa: PLC0415
        from ..models.backoff_policy_type_1 import BackoffPolicyType1  # noqa: PLC0415
        from ..models.policy_sources import PolicySources  # noqa: PLC0415

        d = dict(src_dict)
        max_attempts = d.pop("max_attempts")

        def _parse_backoff(data: object) -> BackoffPolicyType0 | BackoffPolicyType1:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_backoff_policy_type_0 = BackoffPolicyType0.from_dict(data)

                return componentsschemas_backoff_policy_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_backoff_policy_type_1 = BackoffPolicyType1.from_dict(data)

            return componentsschemas_backoff_policy_type_1

        backoff = _parse_backoff(d.pop("backoff"))

        request_timeout_ms = d.pop("request_timeout_ms")

        jitter = d.pop("jitter")

        source = PolicySources.from_dict(d.pop("source"))

        policy_in_force = cls(
            max_attempts=max_attempts,
            backoff=backoff,
            request_timeout_ms=request_timeout_ms,
            jitter=jitter,
            source=source,
        )

        policy_in_force.additional_properties = d
        return policy_in_force

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
