from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="QueueStats")


@_attrs_define
class QueueStats:
    """One queue's live jobs.

    Attributes:
        queue (str): Queue name.
        available (int): Due now and waiting for a worker (`available`, not parked): the queue's depth.
        scheduled (int): Waiting for their time: backoff, snooze (`scheduled`, parked or not).
        executing (int): Claimed by a worker on some node (`executing`): in flight.
        parked (int): Of `available` + `scheduled`, those of parked groups ([`crate::park_group`]) or of
            groups in a parked gate ([`crate::park_gate`]) — for Breakwater, deliveries held back by
            an open channel or host circuit, or a pause.
        oldest_available_ms (int): How long the oldest available job has been due, milliseconds (0 when none is).
    """

    queue: str
    available: int
    scheduled: int
    executing: int
    parked: int
    oldest_available_ms: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        queue = self.queue

        available = self.available

        scheduled = self.scheduled

        executing = self.executing

        parked = self.parked

        oldest_available_ms = self.oldest_available_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "queue": queue,
                "available": available,
                "scheduled": scheduled,
                "executing": executing,
                "parked": parked,
                "oldest_available_ms": oldest_available_ms,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        queue = d.pop("queue")

        available = d.pop("available")

        scheduled = d.pop("scheduled")

        executing = d.pop("executing")

        parked = d.pop("parked")

        oldest_available_ms = d.pop("oldest_available_ms")

        queue_stats = cls(
            queue=queue,
            available=available,
            scheduled=scheduled,
            executing=executing,
            parked=parked,
            oldest_available_ms=oldest_available_ms,
        )

        queue_stats.additional_properties = d
        return queue_stats

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
