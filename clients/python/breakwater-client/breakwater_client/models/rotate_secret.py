from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="RotateSecret")


@_attrs_define
class RotateSecret:
    """Body of `POST /api/v1/channels/{id}/secret/rotate` (optional: no body, or `{}`, is the
    default grace period).

        Attributes:
            grace_ms (int | None | Unset): How long the old secret keeps signing too, ms: 0 to 604 800 000 (7 days); default
                86 400 000 (24 h).
    """

    grace_ms: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        grace_ms: int | None | Unset
        if isinstance(self.grace_ms, Unset):
            grace_ms = UNSET
        else:
            grace_ms = self.grace_ms

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if grace_ms is not UNSET:
            field_dict["grace_ms"] = grace_ms

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_grace_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        grace_ms = _parse_grace_ms(d.pop("grace_ms", UNSET))

        rotate_secret = cls(
            grace_ms=grace_ms,
        )

        return rotate_secret
