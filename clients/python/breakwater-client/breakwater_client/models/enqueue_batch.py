from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.batch_item import BatchItem


T = TypeVar("T", bound="EnqueueBatch")


@_attrs_define
class EnqueueBatch:
    """Body of `POST /api/v1/channels/{id}/deliveries/batch`.

    Attributes:
        deliveries (list[BatchItem]): 1 to `api.max_batch_size` (1000) deliveries.
    """

    deliveries: list[BatchItem]

    def to_dict(self) -> dict[str, Any]:
        deliveries = []
        for deliveries_item_data in self.deliveries:
            deliveries_item = deliveries_item_data.to_dict()
            deliveries.append(deliveries_item)

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "deliveries": deliveries,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.batch_item import BatchItem  # noqa: PLC0415

        d = dict(src_dict)
        deliveries = []
        _deliveries = d.pop("deliveries")
        for deliveries_item_data in _deliveries:
            deliveries_item = BatchItem.from_dict(deliveries_item_data)

            deliveries.append(deliveries_item)

        enqueue_batch = cls(
            deliveries=deliveries,
        )

        return enqueue_batch
