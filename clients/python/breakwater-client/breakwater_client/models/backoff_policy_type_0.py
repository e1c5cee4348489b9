from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.backoff_policy_type_0_kind import BackoffPolicyType0Kind

T = TypeVar("T", bound="BackoffPolicyType0")


@_attrs_define
class BackoffPolicyType0:
    """After failed attempt `n` (1-based) wait `min(base_ms × factor^(n−1), cap_ms)`.

    Attributes:
        base_ms (int): Wait after the first failed attempt, ms, 100–604800000.
        factor (float): Growth per failed attempt, 1–10.
        cap_ms (int): Longest wait, ms, from `base_ms` to 604800000.
        kind (BackoffPolicyType0Kind):
    """

    base_ms: int
    factor: float
    cap_ms: int
    kind: BackoffPolicyType0Kind
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        base_ms = self.base_ms

        factor = self.factor

        cap_ms = self.cap_ms

        kind = self.kind.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "base_ms": base_ms,
                "factor": factor,
                "cap_ms": cap_ms,
                "kind": kind,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        base_ms = d.pop("base_ms")

        factor = d.pop("factor")

        cap_ms = d.pop("cap_ms")

        kind = BackoffPolicyType0Kind(d.pop("kind"))

        backoff_policy_type_0 = cls(
            base_ms=base_ms,
            factor=factor,
            cap_ms=cap_ms,
            kind=kind,
        )

        backoff_policy_type_0.additional_properties = d
        return backoff_policy_type_0

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
