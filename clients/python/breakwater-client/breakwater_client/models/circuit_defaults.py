from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="CircuitDefaults")


@_attrs_define
class CircuitDefaults:
    """The cluster-wide circuit defaults: the database's value where an operator set one, else the
    configuration's.

        Attributes:
            failure_threshold (int): Consecutive transient failures that open a circuit.
            cooldown_ms (int): First cooldown of an open circuit, ms.
            failure_threshold_overridden (bool): Whether `failure_threshold` comes from an operator's edit (true) or the
                configuration.
            cooldown_ms_overridden (bool): Whether `cooldown_ms` comes from an operator's edit (true) or the configuration.
            close_after_successes (int): Consecutive successful probe deliveries a half-open circuit needs to close (1–100).
            close_after_successes_overridden (bool): Whether `close_after_successes` comes from an operator's edit (true) or
                the
                configuration.
    """

    failure_threshold: int
    cooldown_ms: int
    failure_threshold_overridden: bool
    cooldown_ms_overridden: bool
    close_after_successes: int
    close_after_successes_overridden: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        failure_threshold = self.failure_threshold

        cooldown_ms = self.cooldown_ms

        failure_threshold_overridden = self.failure_threshold_overridden

        cooldown_ms_overridden = self.cooldown_ms_overridden

        close_after_successes = self.close_after_successes

        close_after_successes_overridden = self.close_after_successes_overridden

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "failure_threshold": failure_threshold,
                "cooldown_ms": cooldown_ms,
                "failure_threshold_overridden": failure_threshold_overridden,
                "cooldown_ms_overridden": cooldown_ms_overridden,
                "close_after_successes": close_after_successes,
                "close_after_successes_overridden": close_after_successes_overridden,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        failure_threshold = d.pop("failure_threshold")

        cooldown_ms = d.pop("cooldown_ms")

        failure_threshold_overridden = d.pop("failure_threshold_overridden")

        cooldown_ms_overridden = d.pop("cooldown_ms_overridden")

        close_after_successes = d.pop("close_after_successes")

        close_after_successes_overridden = d.pop("close_after_successes_overridden")

        circuit_defaults = cls(
            failure_threshold=failure_threshold,
            cooldown_ms=cooldown_ms,
            failure_threshold_overridden=failure_threshold_overridden,
            cooldown_ms_overridden=cooldown_ms_overridden,
            close_after_successes=close_after_successes,
            close_after_successes_overridden=close_after_successes_overridden,
        )

        circuit_defaults.additional_properties = d
        return circuit_defaults

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
