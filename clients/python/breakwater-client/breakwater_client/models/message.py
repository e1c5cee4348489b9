from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.message_delivery import MessageDelivery


T = TypeVar("T", bound="Message")


@_attrs_define
class Message:
    """A message with each channel's delivery.

    Attributes:
        id (UUID): Message id (= the `webhook-id` of all its deliveries).
        event_type (str): Event type.
        payload (Any): Event data, as sent.
        created_at (datetime.datetime): Accepted at.
        deliveries (list[MessageDelivery]): One per channel it was fanned out to, ordered by channel id.
        idempotency_key (None | str | Unset): Idempotency key, if one was given.
        channels (list[UUID] | None | Unset): The channels the sender named, if any (sorted, without repeats).
    """

    id: UUID
    event_type: str
    payload: Any
    created_at: datetime.datetime
    deliveries: list[MessageDelivery]
    idempotency_key: None | str | Unset = UNSET
    channels: list[UUID] | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        event_type = self.event_type

        payload = self.payload

        created_at = self.created_at.isoformat()

        deliveries = []
        for deliveries_item_data in self.deliveries:
            deliveries_item = deliveries_item_data.to_dict()
            deliveries.append(deliveries_item)

        idempotency_key: None | str | Unset
        if isinstance(self.idempotency_key, Unset):
            idempotency_key = UNSET
        else:
            idempotency_key = self.idempotency_key

        channels: list[str] | None | Unset
        if isinstance(self.channels, Unset):
            channels = UNSET
        elif isinstance(self.channels, list):
            channels = []
            for channels_type_0_item_data in self.channels:
                channels_type_0_item = str(channels_type_0_item_data)
                channels.append(channels_type_0_item)

        else:
            channels = self.channels

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "event_type": event_type,
                "payload": payload,
                "created_at": created_at,
                "deliveries": deliveries,
            }
        )
        if idempotency_key is not UNSET:
            field_dict["idempotency_key"] = idempotency_key
        if channels is not UNSET:
            field_dict["channels"] = channels

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.message_delivery import MessageDelivery  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        event_type = d.pop("event_type")

        payload = d.pop("payload")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        deliveries = []
        _deliveries = d.pop("deliveries")
        for deliveries_item_data in _deliveries:
            deliveries_item = MessageDelivery.from_dict(deliveries_item_data)

            deliveries.append(deliveries_item)

        def _parse_idempotency_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        idempotency_key = _parse_idempotency_key(d.pop("idempotency_key", UNSET))

        def _parse_channels(data: object) -> list[UUID] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                channels_type_0 = []
                _channels_type_0 = data
                for channels_type_0_item_data in _channels_type_0:
                    channels_type_0_item = UUID(channels_type_0_item_data)

                    channels_type_0.append(channels_type_0_item)

                return channels_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[UUID] | None | Unset, data)

        channels = _parse_channels(d.pop("channels", UNSET))

        message = cls(
            id=id,
            event_type=event_type,
            payload=payload,
            created_at=created_at,
            deliveries=deliveries,
            idempotency_key=idempotency_key,
            channels=channels,
        )

        message.additional_properties = d
        return message

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
