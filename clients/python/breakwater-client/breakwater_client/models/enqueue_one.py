from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="EnqueueOne")


@_attrs_define
class EnqueueOne:
    """Body of `POST /api/v1/channels/{id}/deliveries`.

    Attributes:
        event_type (str): The event's type, 1 to 200 visible ASCII characters (no spaces). Example: invoice.paid.
        payload (Any): The event's data: any JSON value, at most `api.max_payload_bytes` (256 KiB) as sent;
            valid against the event type's schema when the tenant's catalog gives it one.
    """

    event_type: str
    payload: Any

    def to_dict(self) -> dict[str, Any]:
        event_type = self.event_type

        payload = self.payload

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "event_type": event_type,
                "payload": payload,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        event_type = d.pop("event_type")

        payload = d.pop("payload")

        enqueue_one = cls(
            event_type=event_type,
            payload=payload,
        )

        return enqueue_one
