from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.quota import Quota
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.violation import Violation


T = TypeVar("T", bound="Problem")


@_attrs_define
class Problem:
    """The body of every error: an RFC 9457 problem, `application/problem+json`.

    Attributes:
        type_ (str): `urn:breakwater:problem:<code>`. Example: urn:breakwater:problem:not_found.
        title (str): The HTTP status's reason phrase. Example: Not Found.
        status (int): The HTTP status. Example: 404.
        detail (str): What is wrong, for a person. Never a secret, never an internal address. Example: channel not
            found.
        code (str): Stable, machine-readable: `bad_request`, `malformed_json`, `invalid_path`,
            `invalid_query`, `invalid_body`, `invalid_field`, `invalid_text`, `unauthorized`,
            `schema_violation`, `forbidden`, `not_found`, `method_not_allowed`, `conflict`,
            `not_dead`,
            `quota_exceeded`, `payload_too_large`, `unsupported_media_type`, `rate_limited`,
            `unavailable`, `commit_outcome_unknown`, `not_ready`, `internal`. Example: not_found.
        field (None | str | Unset): What the error is about, when it is about one value: a body field or its path in the
            body (`url`, `deliveries[3].event_type`), a path parameter (`id`) or a query parameter
            (`tenant_id`).
        quota (None | Quota | Unset):
        errors (list[Violation] | Unset): With `schema_violation`: the first (up to 5) failing parts of the value named
            by
            `field`, each a JSON pointer into it and what is wrong there.
    """

    type_: str
    title: str
    status: int
    detail: str
    code: str
    field: None | str | Unset = UNSET
    quota: None | Quota | Unset = UNSET
    errors: list[Violation] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        title = self.title

        status = self.status

        detail = self.detail

        code = self.code

        field: None | str | Unset
        if isinstance(self.field, Unset):
            field = UNSET
        else:
            field = self.field

        quota: None | str | Unset
        if isinstance(self.quota, Unset):
            quota = UNSET
        elif isinstance(self.quota, Quota):
            quota = self.quota.value
        else:
            quota = self.quota

        errors: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.errors, Unset):
            errors = []
            for errors_item_data in self.errors:
                errors_item = errors_item_data.to_dict()
                errors.append(errors_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "type": type_,
                "title": title,
                "status": status,
                "detail": detail,
                "code": code,
            }
        )
        if field is not UNSET:
            field_dict["field"] = field
        if quota is not UNSET:
            field_dict["quota"] = quota
        if errors is not UNSET:
            field_dict["errors"] = errors

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.violation import Violation  # noqa: PLC0415

        d = dict(src_dict)
        type_ = d.pop("type")

        title = d.pop("title")

        status = d.pop("status")

        detail = d.pop("detail")

        code = d.pop("code")

        def _parse_field(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        field = _parse_field(d.pop("field", UNSET))

        def _parse_quota(data: object) -> None | Quota | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                quota_type_1 = Quota(data)

                return quota_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Quota | Unset, data)

        quota = _parse_quota(d.pop("quota", UNSET))

        _errors = d.pop("errors", UNSET)
        errors: list[Violation] | Unset = UNSET
        if _errors is not UNSET:
            errors = []
            for errors_item_data in _errors:
                errors_item = Violation.from_dict(errors_item_data)

                errors.append(errors_item)

        problem = cls(
            type_=type_,
            title=title,
            status=status,
            detail=detail,
            code=code,
            field=field,
            quota=quota,
            errors=errors,
        )

        problem.additional_properties = d
        return problem

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
