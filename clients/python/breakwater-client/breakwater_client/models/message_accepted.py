from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.fanned_out import FannedOut


T = TypeVar("T", bound="MessageAccepted")


@_attrs_define
class MessageAccepted:
    """Response of `POST /api/v1/messages`.

    Attributes:
        id (UUID): The message id: the `webhook-id` of every delivery of it.
        event_type (str):
        created_at (datetime.datetime):
        idempotent_replay (bool): True when the `Idempotency-Key` matched an earlier message, whose id and deliveries
            (with their current status) these are; nothing new was enqueued.
        deliveries (list[FannedOut]): `{channel_id, delivery_id, status}` per subscribed channel, by channel id.
    """

    id: UUID
    event_type: str
    created_at: datetime.datetime
    idempotent_replay: bool
    deliveries: list[FannedOut]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        event_type = self.event_type

        created_at = self.created_at.isoformat()

        idempotent_replay = self.idempotent_replay

        deliveries = []
        for deliveries_item_data in self.deliveries:
            deliveries_item = deliveries_item_data.to_dict()
            deliveries.append(deliveries_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "event_type": event_type,
                "created_at": created_at,
                "idempotent_replay": idempotent_replay,
                "deliveries": deliveries,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.fanned_out import FannedOut  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        event_type = d.pop("event_type")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        idempotent_replay = d.pop("idempotent_replay")

        deliveries = []
        _deliveries = d.pop("deliveries")
        for deliveries_item_data in _deliveries:
            deliveries_item = FannedOut.from_dict(deliveries_item_data)

            deliveries.append(deliveries_item)

        message_accepted = cls(
            id=id,
            event_type=event_type,
            created_at=created_at,
            idempotent_replay=idempotent_replay,
            deliveries=deliveries,
        )

        message_accepted.additional_properties = d
        return message_accepted

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
