from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="SendMessage")


@_attrs_define
class SendMessage:
    """Body of `POST /api/v1/messages`.

    Attributes:
        event_type (str): The event's type, 1 to 200 visible ASCII characters (no spaces; matched against each
            channel's `event_types`: an exact name, or a prefix wildcard such as `invoice.*`). When
            the tenant's catalog gives the type a schema, `payload` must be valid against it (422
            `schema_violation`). Example: invoice.paid.
        payload (Any): The event's data: any JSON value, at most `api.max_payload_bytes` as sent.
        channels (list[UUID] | None | Unset): Only these channels (of those whose filter matches), 1 to 1000 of the
            tenant's channel
            ids; absent = every subscribed channel.
    """

    event_type: str
    payload: Any
    channels: list[UUID] | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        event_type = self.event_type

        payload = self.payload

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

        field_dict.update(
            {
                "event_type": event_type,
                "payload": payload,
            }
        )
        if channels is not UNSET:
            field_dict["channels"] = channels

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        event_type = d.pop("event_type")

        payload = d.pop("payload")

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

        send_message = cls(
            event_type=event_type,
            payload=payload,
            channels=channels,
        )

        return send_message
