from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.delivery_status import DeliveryStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.attempt import Attempt


T = TypeVar("T", bound="DeliveryView")


@_attrs_define
class DeliveryView:
    """A delivery with every HTTP attempt made for it.

    Attributes:
        id (UUID): Delivery id (the `webhook-id` of a delivery enqueued to its channel directly; a message's
            deliveries carry the message's id as `webhook-id`).
        channel_id (UUID): Channel.
        event_type (str): Event type.
        status (DeliveryStatus): A delivery's status, the `deliveries.status` column (`text`, checked by the table's
            CHECK
            constraint; every value since migration `20261130000010_lifecycle`). Decodes from and
            encodes to that column (`sqlx::Type`) and serializes as the same snake_case word, so the API's
            JSON shows the column's text. `delivered`, `dead` and `cancelled` are final
            ([`Status::is_final`]).
        attempts (int): HTTP attempts made.
        created_at (datetime.datetime): Accepted at (the enqueue transaction's time: a batch shares it), microseconds
            kept.
        updated_at (datetime.datetime): Last change.
        payload (Any): Event data: the JSON value that was sent, as it was sent (any JSON value; `null` once
            purged, see `payload_purged_at`).
        attempt_log (list[Attempt]): Its attempts, oldest first.
        idempotency_key (None | str | Unset): Idempotency key, if one was given to the per-channel enqueue (a message's
            key is on the
            message).
        last_error (None | str | Unset): Last error, if any.
        delivered_at (datetime.datetime | None | Unset): Delivered at.
        message_id (None | Unset | UUID): The message this delivery fans out, if it was made by `POST /api/v1/messages`;
            its id is
            then the `webhook-id` (see [`crate::messages`]).
        payload_purged_at (datetime.datetime | None | Unset): When the tenant purged the payload
            ([`crate::lifecycle::purge_payload`]), if it did.
    """

    id: UUID
    channel_id: UUID
    event_type: str
    status: DeliveryStatus
    attempts: int
    created_at: datetime.datetime
    updated_at: datetime.datetime
    payload: Any
    attempt_log: list[Attempt]
    idempotency_key: None | str | Unset = UNSET
    last_error: None | str | Unset = UNSET
    delivered_at: datetime.datetime | None | Unset = UNSET
    message_id: None | Unset | UUID = UNSET
    payload_purged_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        channel_id = str(self.channel_id)

        event_type = self.event_type

        status = self.status.value

        attempts = self.attempts

        created_at = self.created_at.isoformat()

        updated_at = self.updated_at.isoformat()

        payload = self.payload

        attempt_log = []
        for attempt_log_item_data in self.attempt_log:
            attempt_log_item = attempt_log_item_data.to_dict()
            attempt_log.append(attempt_log_item)

        idempotency_key: None | str | Unset
        if isinstance(self.idempotency_key, Unset):
            idempotency_key = UNSET
        else:
            idempotency_key = self.idempotency_key

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

        message_id: None | str | Unset
        if isinstance(self.message_id, Unset):
            message_id = UNSET
        elif isinstance(self.message_id, UUID):
            message_id = str(self.message_id)
        else:
            message_id = self.message_id

        payload_purged_at: None | str | Unset
        if isinstance(self.payload_purged_at, Unset):
            payload_purged_at = UNSET
        elif isinstance(self.payload_purged_at, datetime.datetime):
            payload_purged_at = self.payload_purged_at.isoformat()
        else:
            payload_purged_at = self.payload_purged_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "channel_id": channel_id,
                "event_type": event_type,
                "status": status,
                "attempts": attempts,
                "created_at": created_at,
                "updated_at": updated_at,
                "payload": payload,
                "attempt_log": attempt_log,
            }
        )
        if idempotency_key is not UNSET:
            field_dict["idempotency_key"] = idempotency_key
        if last_error is not UNSET:
            field_dict["last_error"] = last_error
        if delivered_at is not UNSET:
            field_dict["delivered_at"] = delivered_at
        if message_id is not UNSET:
            field_dict["message_id"] = message_id
        if payload_purged_at is not UNSET:
            field_dict["payload_purged_at"] = payload_purged_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.attempt import Attempt  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        channel_id = UUID(d.pop("channel_id"))

        event_type = d.pop("event_type")

        status = DeliveryStatus(d.pop("status"))

        attempts = d.pop("attempts")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        payload = d.pop("payload")

        attempt_log = []
        _attempt_log = d.pop("attempt_log")
        for attempt_log_item_data in _attempt_log:
            attempt_log_item = Attempt.from_dict(attempt_log_item_data)

            attempt_log.append(attempt_log_item)

        def _parse_idempotency_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        idempotency_key = _parse_idempotency_key(d.pop("idempotency_key", UNSET))

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

        def _parse_message_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                message_id_type_0 = UUID(data)

                return message_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        message_id = _parse_message_id(d.pop("message_id", UNSET))

        def _parse_payload_purged_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                payload_purged_at_type_0 = datetime.datetime.fromisoformat(data)

                return payload_purged_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        payload_purged_at = _parse_payload_purged_at(d.pop("payload_purged_at", UNSET))

        delivery_view = cls(
            id=id,
            channel_id=channel_id,
            event_type=event_type,
            status=status,
            attempts=attempts,
            created_at=created_at,
            updated_at=updated_at,
            payload=payload,
            attempt_log=attempt_log,
            idempotency_key=idempotency_key,
            last_error=last_error,
            delivered_at=delivered_at,
            message_id=message_id,
            payload_purged_at=payload_purged_at,
        )

        delivery_view.additional_properties = d
        return delivery_view

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
