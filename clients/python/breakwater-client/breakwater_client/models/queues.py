from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.queue_stats import QueueStats


T = TypeVar("T", bound="Queues")


@_attrs_define
class Queues:
    """`{"data": [{"queue", "available", "scheduled", "executing", "parked",
    "oldest_available_ms"}, …]}`: the tier queues (highest first), `circuit`, `alerts`, then any
    other queue with live jobs. `available` is the depth (due, waiting for a worker),
    `executing` the jobs in flight on all nodes.

        Attributes:
            data (list[QueueStats]): One entry per queue.
    """

    data: list[QueueStats]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = []
        for data_item_data in self.data:
            data_item = data_item_data.to_dict()
            data.append(data_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "data": data,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.queue_stats import QueueStats  # noqa: PLC0415

        d = dict(src_dict)
        data = []
        _data = d.pop("data")
        for data_item_data in _data:
            data_item = QueueStats.from_dict(data_item_data)

            data.append(data_item)

        queues = cls(
            data=data,
        )

        queues.additional_properties = d
        return queues

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
