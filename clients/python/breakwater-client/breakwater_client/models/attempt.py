from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.attempt_outcome import AttemptOutcome
from ..types import UNSET, Unset

T = TypeVar("T", bound="Attempt")


@_attrs_define
class Attempt:
    """One HTTP attempt as the API shows it.

    Attributes:
        attempt (int): Attempt number of the delivery, from 1.
        started_at (datetime.datetime): When the request started.
        duration_ms (int): How long it took, ms.
        outcome (AttemptOutcome): The class of an attempt's outcome: the `delivery_attempts.outcome` column (`text`) and
            the
            attempt log's `outcome` in the API.
        status_code (int | None | Unset): HTTP status, if a response arrived.
        error_kind (None | str | Unset): `connect` | `timeout` | `blocked` | `other`, when no status.
        error (None | str | Unset): Error text.
        response_excerpt (None | str | Unset): The first bytes of the response body.
    """

    attempt: int
    started_at: datetime.datetime
    duration_ms: int
    outcome: AttemptOutcome
    status_code: int | None | Unset = UNSET
    error_kind: None | str | Unset = UNSET
    error: None | str | Unset = UNSET
    response_excerpt: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        attempt = self.attempt

        started_at = self.started_at.isoformat()

        duration_ms = self.duration_ms

        outcome = self.outcome.value

        status_code: int | None | Unset
        if isinstance(self.status_code, Unset):
            status_code = UNSET
        else:
            status_code = self.status_code

        error_kind: None | str | Unset
        if isinstance(self.error_kind, Unset):
            error_kind = UNSET
        else:
            error_kind = self.error_kind

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        response_excerpt: None | str | Unset
        if isinstance(self.response_excerpt, Unset):
            response_excerpt = UNSET
        else:
            response_excerpt = self.response_excerpt

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attempt": attempt,
                "started_at": started_at,
                "duration_ms": duration_ms,
                "outcome": outcome,
            }
        )
        if status_code is not UNSET:
            field_dict["status_code"] = status_code
        if error_kind is not UNSET:
            field_dict["error_kind"] = error_kind
        if error is not UNSET:
            field_dict["error"] = error
        if response_excerpt is not UNSET:
            field_dict["response_excerpt"] = response_excerpt

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        attempt = d.pop("attempt")

        started_at = datetime.datetime.fromisoformat(d.pop("started_at"))

        duration_ms = d.pop("duration_ms")

        outcome = AttemptOutcome(d.pop("outcome"))

        def _parse_status_code(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        status_code = _parse_status_code(d.pop("status_code", UNSET))

        def _parse_error_kind(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error_kind = _parse_error_kind(d.pop("error_kind", UNSET))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_response_excerpt(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        response_excerpt = _parse_response_excerpt(d.pop("response_excerpt", UNSET))

        attempt = cls(
            attempt=attempt,
            started_at=started_at,
            duration_ms=duration_ms,
            outcome=outcome,
            status_code=status_code,
            error_kind=error_kind,
            error=error,
            response_excerpt=response_excerpt,
        )

        attempt.additional_properties = d
        return attempt

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
