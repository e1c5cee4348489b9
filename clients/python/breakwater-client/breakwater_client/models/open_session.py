from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.scope import Scope
from ..types import UNSET, Unset

T = TypeVar("T", bound="OpenSession")


@_attrs_define
class OpenSession:
    """Body of `POST …/portal-sessions`.

    Attributes:
        scope (Scope): What a portal session may do.
        ttl_s (int | None | Unset): Lifetime, seconds: 1 to 86 400 (24 h); default 3 600 (1 h). Longer → 422. Example:
            3600.
    """

    scope: Scope
    ttl_s: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        scope = self.scope.value

        ttl_s: int | None | Unset
        if isinstance(self.ttl_s, Unset):
            ttl_s = UNSET
        else:
            ttl_s = self.ttl_s

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "scope": scope,
            }
        )
        if ttl_s is not UNSET:
            field_dict["ttl_s"] = ttl_s

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        scope = Scope(d.pop("scope"))

        def _parse_ttl_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ttl_s = _parse_ttl_s(d.pop("ttl_s", UNSET))

        open_session = cls(
            scope=scope,
            ttl_s=ttl_s,
        )

        return open_session
