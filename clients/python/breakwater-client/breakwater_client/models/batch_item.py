from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="BatchItem")


@_attrs_define
class BatchItem:
    """One delivery of a batch.

    Attributes:
        event_type (str): The event's type, 1 to 200 visible ASCII characters (no spaces). Example: invoice.paid.
        payload (Any): The event's data: any JSON value, at most `api.max_payload_bytes` as sent.
        idempotency_key (None | str | Unset): Like the `Idempotency-Key` header: 1 to 200 visible ASCII characters (no
            spaces).
    """

    event_type: str
    payload: Any
    idempotency_key: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        event_type = self.event_type

        payload = self.payload

        idempotency_key: None | str | Unset
        if isinstance(self.idempotency_key, Unset):
            idempotency_key = UNSET
        else:
            idempotency_key = self.idempotency_key

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "event_type": event_type,
                "payload": payload,
            }
        )
        if idempotency_key is not UNSET:
            field_dict["idempotency_key"] = idempotency_key

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        event_type = d.pop("event_type")

        payload = d.pop("payload")

        def _parse_idempotency_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        idempotency_key = _parse_idempotency_key(d.pop("idempotency_key", UNSET))

        batch_item = cls(
            event_type=event_type,
            payload=payload,
            idempotency_key=idempotency_key,
        )

        return batch_item
