from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="DeadMode")


@_attrs_define
class DeadMode:
    """A dead endpoint of one kind, before the circuit opens.

    Attributes:
        requests (int): Requests the endpoint gets before the circuit opens (with a backlog).
        rounds (int): In how many rounds: each round waits for the previous one's failures.
        time_to_open_ms (int): The least time from the first request to the opening, ms: rounds × the time one failure
            takes (0 for a refusal, the request timeout for a timeout, the endpoint's own answer time
            for a 5xx, not known here), or the rate limit's spacing of the requests if longer.
        note (str): What the figure assumes.
    """

    requests: int
    rounds: int
    time_to_open_ms: int
    note: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        requests = self.requests

        rounds = self.rounds

        time_to_open_ms = self.time_to_open_ms

        note = self.note

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "requests": requests,
                "rounds": rounds,
                "time_to_open_ms": time_to_open_ms,
                "note": note,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        requests = d.pop("requests")

        rounds = d.pop("rounds")

        time_to_open_ms = d.pop("time_to_open_ms")

        note = d.pop("note")

        dead_mode = cls(
            requests=requests,
            rounds=rounds,
            time_to_open_ms=time_to_open_ms,
            note=note,
        )

        dead_mode.additional_properties = d
        return dead_mode

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
