from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="FilterTest")


@_attrs_define
class FilterTest:
    """Body of `POST /api/v1/channels/{id}/filter/test`.

    Attributes:
        payload (Any): A sample payload: any JSON value, at most `api.max_payload_bytes` as sent (the filter
            reads it as `payload`).
        event_type (None | str | Unset): A sample event type (the filter reads it as `event_type`; absent = `null`),
            checked as a
            message's. Example: invoice.paid.
    """

    payload: Any
    event_type: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        payload = self.payload

        event_type: None | str | Unset
        if isinstance(self.event_type, Unset):
            event_type = UNSET
        else:
            event_type = self.event_type

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "payload": payload,
            }
        )
        if event_type is not UNSET:
            field_dict["event_type"] = event_type

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        payload = d.pop("payload")

        def _parse_event_type(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        event_type = _parse_event_type(d.pop("event_type", UNSET))

        filter_test = cls(
            payload=payload,
            event_type=event_type,
        )

        return filter_test
