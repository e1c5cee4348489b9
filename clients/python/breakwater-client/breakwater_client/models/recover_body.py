from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.delivery_status import DeliveryStatus
from ..types import UNSET, Unset

T = TypeVar("T", bound="RecoverBody")


@_attrs_define
class RecoverBody:
    """Body of `POST /api/v1/channels/{id}/recover`: which of the channel's final deliveries to
    resend.

        Attributes:
            since (datetime.datetime): Resend deliveries accepted at or after this instant (RFC 3339, years 1 to 9999).
            until (datetime.datetime | None | Unset): …and before this one (exclusive; default: no bound); not before
                `since`.
            status (list[DeliveryStatus] | None | Unset): Which final statuses to resend: 1 to 3 of `delivered`, `dead`,
                `cancelled` (default
                `["dead"]`: what the endpoint missed).
            event_types (list[str] | None | Unset): Only these event types (exact match; 1 to 100 of them; default: any).
            dry_run (bool | Unset): Count what would go and show the first 10 ids, sending nothing (default `false`).
            limit (int | None | Unset): Most deliveries this call resends: 1 to 1000 (default 1000).
            after (None | str | Unset): Continue a recover: the previous call's `next_cursor`.
    """

    since: datetime.datetime
    until: datetime.datetime | None | Unset = UNSET
    status: list[DeliveryStatus] | None | Unset = UNSET
    event_types: list[str] | None | Unset = UNSET
    dry_run: bool | Unset = UNSET
    limit: int | None | Unset = UNSET
    after: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        since = self.since.isoformat()

        until: None | str | Unset
        if isinstance(self.until, Unset):
            until = UNSET
        elif isinstance(self.until, datetime.datetime):
            until = self.until.isoformat()
        else:
            until = self.until

        status: list[str] | None | Unset
        if isinstance(self.status, Unset):
            status = UNSET
        elif isinstance(self.status, list):
            status = []
            for status_type_0_item_data in self.status:
                status_type_0_item = status_type_0_item_data.value
                status.append(status_type_0_item)

        else:
            status = self.status

        event_types: list[str] | None | Unset
        if isinstance(self.event_types, Unset):
            event_types = UNSET
        elif isinstance(self.event_types, list):
            event_types = self.event_types

        else:
            event_types = self.event_types

        dry_run = self.dry_run

        limit: int | None | Unset
        if isinstance(self.limit, Unset):
            limit = UNSET
        else:
            limit = self.limit

        after: None | str | Unset
        if isinstance(self.after, Unset):
            after = UNSET
        else:
            after = self.after

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "since": since,
            }
        )
        if until is not UNSET:
            field_dict["until"] = until
        if status is not UNSET:
            field_dict["status"] = status
        if event_types is not UNSET:
            field_dict["event_types"] = event_types
        if dry_run is not UNSET:
            field_dict["dry_run"] = dry_run
        if limit is not UNSET:
            field_dict["limit"] = limit
        if after is not UNSET:
            field_dict["after"] = after

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        since = datetime.datetime.fromisoformat(d.pop("since"))

        def _parse_until(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                until_type_0 = datetime.datetime.fromisoformat(data)

                return until_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        until = _parse_until(d.pop("until", UNSET))

        def _parse_status(data: object) -> list[DeliveryStatus] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                status_type_0 = []
                _status_type_0 = data
                for status_type_0_item_data in _status_type_0:
                    status_type_0_item = DeliveryStatus(status_type_0_item_data)

                    status_type_0.append(status_type_0_item)

                return status_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[DeliveryStatus] | None | Unset, data)

        status = _parse_status(d.pop("status", UNSET))

        def _parse_event_types(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                event_types_type_0 = cast(list[str], data)

                return event_types_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        event_types = _parse_event_types(d.pop("event_types", UNSET))

        dry_run = d.pop("dry_run", UNSET)

        def _parse_limit(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        limit = _parse_limit(d.pop("limit", UNSET))

        def _parse_after(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        after = _parse_after(d.pop("after", UNSET))

        recover_body = cls(
            since=since,
            until=until,
            status=status,
            event_types=event_types,
            dry_run=dry_run,
            limit=limit,
            after=after,
        )

        return recover_body
