from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.delivery_status import DeliveryStatus

T = TypeVar("T", bound="FannedOut")


@_attrs_define
class FannedOut:
    """One channel's delivery of a message.

    Attributes:
        channel_id (UUID): The channel.
        delivery_id (UUID): The delivery id (for `GET /api/v1/deliveries/{id}`; its `webhook-id` is the message id).
        status (DeliveryStatus): A delivery's status, the `deliveries.status` column (`text`, checked by the table's
            CHECK
            constraint; every value since migration `20261130000010_lifecycle`). Decodes from and
            encodes to that column (`sqlx::Type`) and serializes as the same snake_case word, so the API's
            JSON shows the column's text. `delivered`, `dead` and `cancelled` are final
            ([`Status::is_final`]).
    """

    channel_id: UUID
    delivery_id: UUID
    status: DeliveryStatus
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        channel_id = str(self.channel_id)

        delivery_id = str(self.delivery_id)

        status = self.status.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "channel_id": channel_id,
                "delivery_id": delivery_id,
                "status": status,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        channel_id = UUID(d.pop("channel_id"))

        delivery_id = UUID(d.pop("delivery_id"))

        status = DeliveryStatus(d.pop("status"))

        fanned_out = cls(
            channel_id=channel_id,
            delivery_id=delivery_id,
            status=status,
        )

        fanned_out.additional_properties = d
        return fanned_out

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
