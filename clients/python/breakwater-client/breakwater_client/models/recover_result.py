from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="RecoverResult")


@_attrs_define
class RecoverResult:
    """What a recover did, or (dry run) would do.

    Attributes:
        dry_run (bool): Whether this was a dry run (nothing sent).
        count (int): Dry run: how many deliveries the whole window selects now (every call's worth); else
            how many this call resent.
        ids (list[UUID]): Dry run: the first (up to 10) that would go, oldest first; else every one resent.
        parked (bool): Whether they were (or would be) resent parked (`paused`): the channel's circuit is open
            or paused, so they go when it resumes or closes.
        next_cursor (None | str | Unset): More may match after this call's bound: pass it as `after` with the same body
            to
            continue; `null` when the window is done (always `null` on a dry run).
    """

    dry_run: bool
    count: int
    ids: list[UUID]
    parked: bool
    next_cursor: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dry_run = self.dry_run

        count = self.count

        ids = []
        for ids_item_data in self.ids:
            ids_item = str(ids_item_data)
            ids.append(ids_item)

        parked = self.parked

        next_cursor: None | str | Unset
        if isinstance(self.next_cursor, Unset):
            next_cursor = UNSET
        else:
            next_cursor = self.next_cursor

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dry_run": dry_run,
                "count": count,
                "ids": ids,
                "parked": parked,
            }
        )
        if next_cursor is not UNSET:
            field_dict["next_cursor"] = next_cursor

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        dry_run = d.pop("dry_run")

        count = d.pop("count")

        ids = []
        _ids = d.pop("ids")
        for ids_item_data in _ids:
            ids_item = UUID(ids_item_data)

            ids.append(ids_item)

        parked = d.pop("parked")

        def _parse_next_cursor(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        next_cursor = _parse_next_cursor(d.pop("next_cursor", UNSET))

        recover_result = cls(
            dry_run=dry_run,
            count=count,
            ids=ids,
            parked=parked,
            next_cursor=next_cursor,
        )

        recover_result.additional_properties = d
        return recover_result

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
