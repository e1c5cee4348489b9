from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="FilterTestResult")


@_attrs_define
class FilterTestResult:
    """Response of `POST /api/v1/channels/{id}/filter/test`.

    Attributes:
        matches (bool): Whether a message with this payload and event type would be delivered to the channel by
            `POST /api/v1/messages` (as far as the filter decides; the channel's `event_types` are not
            consulted). True when the channel has no filter.
        has_filter (bool): Whether the channel has a filter.
        error (None | str | Unset): Why the evaluation failed, when it did (e.g. arithmetic on a string): such a message
            does
            not match.
    """

    matches: bool
    has_filter: bool
    error: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        matches = self.matches

        has_filter = self.has_filter

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "matches": matches,
                "has_filter": has_filter,
            }
        )
        if error is not UNSET:
            field_dict["error"] = error

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        matches = d.pop("matches")

        has_filter = d.pop("has_filter")

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        filter_test_result = cls(
            matches=matches,
            has_filter=has_filter,
            error=error,
        )

        filter_test_result.additional_properties = d
        return filter_test_result

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
