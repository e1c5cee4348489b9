from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ConcurrencyView")


@_attrs_define
class ConcurrencyView:
    """The channel's cluster-wide concurrency, as the scheduler sees it now.

    Attributes:
        in_flight (int): Deliveries of the channel in flight now, on every node.
        waiting (int): Deliveries of the channel waiting for a send (due now or later, parked, held or not):
            its backlog.
        limit (int): The adaptive limit in force (it follows the endpoint's own latency), whole deliveries.
        floor (int): Its lower bound.
        ceiling (int): Its upper bound: the channel's `max_in_flight`, or the global ceiling; 1 for a `fifo`
            channel.
    """

    in_flight: int
    waiting: int
    limit: int
    floor: int
    ceiling: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        in_flight = self.in_flight

        waiting = self.waiting

        limit = self.limit

        floor = self.floor

        ceiling = self.ceiling

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "in_flight": in_flight,
                "waiting": waiting,
                "limit": limit,
                "floor": floor,
                "ceiling": ceiling,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        in_flight = d.pop("in_flight")

        waiting = d.pop("waiting")

        limit = d.pop("limit")

        floor = d.pop("floor")

        ceiling = d.pop("ceiling")

        concurrency_view = cls(
            in_flight=in_flight,
            waiting=waiting,
            limit=limit,
            floor=floor,
            ceiling=ceiling,
        )

        concurrency_view.additional_properties = d
        return concurrency_view

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
