from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.policy_source import PolicySource

T = TypeVar("T", bound="PolicySources")


@_attrs_define
class PolicySources:
    """Where each field of a [`PolicyInForce`] comes from.

    Attributes:
        max_attempts (PolicySource): Where a field of the policy in force comes from.
        backoff (PolicySource): Where a field of the policy in force comes from.
        request_timeout_ms (PolicySource): Where a field of the policy in force comes from.
    """

    max_attempts: PolicySource
    backoff: PolicySource
    request_timeout_ms: PolicySource
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        max_attempts = self.max_attempts.value

        backoff = self.backoff.value

        request_timeout_ms = self.request_timeout_ms.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "max_attempts": max_attempts,
                "backoff": backoff,
                "request_timeout_ms": request_timeout_ms,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        max_attempts = PolicySource(d.pop("max_attempts"))

        backoff = PolicySource(d.pop("backoff"))

        request_timeout_ms = PolicySource(d.pop("request_timeout_ms"))

        policy_sources = cls(
            max_attempts=max_attempts,
            backoff=backoff,
            request_timeout_ms=request_timeout_ms,
        )

        policy_sources.additional_properties = d
        return policy_sources

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
