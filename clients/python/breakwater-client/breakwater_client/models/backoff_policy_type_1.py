from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.backoff_policy_type_1_kind import BackoffPolicyType1Kind

T = TypeVar("T", bound="BackoffPolicyType1")


@_attrs_define
class BackoffPolicyType1:
    """After failed attempt `n` (1-based) wait `delays_ms[n−1]`; past the end of the list, its
    last delay again.

        Attributes:
            delays_ms (list[int]): 1 to 50 delays, ms, each 100–604800000.
            kind (BackoffPolicyType1Kind):
    """

    delays_ms: list[int]
    kind: BackoffPolicyType1Kind
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        delays_ms = self.delays_ms

        kind = self.kind.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "delays_ms": delays_ms,
                "kind": kind,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        delays_ms = cast(list[int], d.pop("delays_ms"))

        kind = BackoffPolicyType1Kind(d.pop("kind"))

        backoff_policy_type_1 = cls(
            delays_ms=delays_ms,
            kind=kind,
        )

        backoff_policy_type_1.additional_properties = d
        return backoff_policy_type_1

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
