from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.delivery_status import DeliveryStatus
from ..types import UNSET, Unset

T = TypeVar("T", bound="MessageDelivery")


@_attrs_define
class MessageDelivery:
    """One channel's delivery of a message, as `GET /api/v1/messages/{id}` shows it.

    Attributes:
        channel_id (UUID): The channel.
        delivery_id (UUID): The delivery id.
        status (DeliveryStatus): A delivery's status, the `deliveries.status` column (`text`, checked by the table's
            CHECK
            constraint; every value since migration `20261130000010_lifecycle`). Decodes from and
            encodes to that column (`sqlx::Type`) and serializes as the same snake_case word, so the API's
            JSON shows the column's text. `delivered`, `dead` and `cancelled` are final
            ([`Status::is_final`]).
        attempts (int): HTTP attempts made.
        updated_at (datetime.datetime): Last change.
        last_error (None | str | Unset): Last error, if any.
        delivered_at (datetime.datetime | None | Unset): Delivered at.
    """

    channel_id: UUID
    delivery_id: UUID
    status: DeliveryStatus
    attempts: int
    updated_at: datetime.datetime
    last_error: None | str | Unset = UNSET
    delivered_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        channel_id = str(self.channel_id)

        delivery_id = str(self.delivery_id)

        status = self.status.value

        attempts = self.attempts

        updated_at = self.updated_at.isoformat()

        last_error: None | str | Unset
        if isinstance(self.last_error, Unset):
            last_error = UNSET
        else:
            last_error = self.last_error

        delivered_at: None | str | Unset
        if isinstance(self.delivered_at, Unset):
            delivered_at = UNSET
        elif isinstance(self.delivered_at, datetime.datetime):
            delivered_at = self.delivered_at.isoformat()
        else:
            delivered_at = self.delivered_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "channel_id": channel_id,
                "delivery_id": delivery_id,
                "status": status,
                "attempts": attempts,
                "updated_at": updated_at,
            }
        )
        if last_error is not UNSET:
            field_dict["last_error"] = last_error
        if delivered_at is not UNSET:
            field_dict["delivered_at"] = delivered_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        channel_id = UUID(d.pop("channel_id"))

        delivery_id = UUID(d.pop("delivery_id"))

        status = DeliveryStatus(d.pop("status"))

        attempts = d.pop("attempts")

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        def _parse_last_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        last_error = _parse_last_error(d.pop("last_error", UNSET))

        def _parse_delivered_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                delivered_at_type_0 = datetime.datetime.fromisoformat(data)

                return delivered_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        delivered_at = _parse_delivered_at(d.pop("delivered_at", UNSET))

        message_delivery = cls(
            channel_id=channel_id,
            delivery_id=delivery_id,
            status=status,
            attempts=attempts,
            updated_at=updated_at,
            last_error=last_error,
            delivered_at=delivered_at,
        )

        message_delivery.additional_properties = d
        return message_delivery

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
