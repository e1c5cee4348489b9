from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.backoff_policy_type_0 import BackoffPolicyType0
    from ..models.backoff_policy_type_1 import BackoffPolicyType1


T = TypeVar("T", bound="RetryPolicy")


@_attrs_define
class RetryPolicy:
    """A retry policy: the body field `retry_policy` of a channel (its own) or a tenant (the
    default of its channels), and the copy on each delivery. Every field is optional: absent (or
    null) inherits it (channel → tenant → service configuration).

        Example:
            {'backoff': {'delays_ms': [5000, 300000, 1800000, 7200000, 18000000, 36000000], 'kind': 'schedule'},
                'max_attempts': 7, 'request_timeout_ms': 10000}

        Attributes:
            max_attempts (int | None | Unset): HTTP attempts a delivery gets before it is dead, 1–100. With a `schedule` and
                no
                `max_attempts`, the schedule's length + 1 (one first attempt, one retry per delay).
            backoff (BackoffPolicyType0 | BackoffPolicyType1 | None | Unset):
            request_timeout_ms (int | None | Unset): Total timeout of one request (connect, send, response status and the
                kept excerpt of
                its body), ms of the node's running time, 100–120000.
    """

    max_attempts: int | None | Unset = UNSET
    backoff: BackoffPolicyType0 | BackoffPolicyType1 | None | Unset = UNSET
    request_timeout_ms: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.backoff_policy_type_0 import BackoffPolicyType0  # noqa: PLC0415
        from ..models.backoff_policy_type_1 import BackoffPolicyType1  # noqa: PLC0415

        max_attempts: int | None | Unset
        if isinstance(self.max_attempts, Unset):
            max_attempts = UNSET
        else:
            max_attempts = self.max_attempts

        backoff: dict[str, Any] | None | Unset
        if isinstance(self.backoff, Unset):
            backoff = UNSET
        elif isinstance(self.backoff, BackoffPolicyType0):
            backoff = self.backoff.to_dict()
        elif isinstance(self.backoff, BackoffPolicyType1):
            backoff = self.backoff.to_dict()
        else:
            backoff = self.backoff

        request_timeout_ms: int | None | Unset
        if isinstance(self.request_timeout_ms, Unset):
            request_timeout_ms = UNSET
        else:
            request_timeout_ms = self.request_timeout_ms

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if max_attempts is not UNSET:
            field_dict["max_attempts"] = max_attempts
        if backoff is not UNSET:
            field_dict["backoff"] = backoff
        if request_timeout_ms is not UNSET:
            field_dict["request_timeout_ms"] = request_timeout_ms

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.backoff_policy_type_0 import BackoffPolicyType0  # noqa: PLC0415
        from ..models.backoff_policy_type_1 import BackoffPolicyType1  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_max_attempts(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_attempts = _parse_max_attempts(d.pop("max_attempts", UNSET))

        def _parse_backoff(data: object) -> BackoffPolicyType0 | BackoffPolicyType1 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_backoff_policy_type_0 = BackoffPolicyType0.from_dict(data)

                return componentsschemas_backoff_policy_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_backoff_policy_type_1 = BackoffPolicyType1.from_dict(data)

                return componentsschemas_backoff_policy_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BackoffPolicyType0 | BackoffPolicyType1 | None | Unset, data)

        backoff = _parse_backoff(d.pop("backoff", UNSET))

        def _parse_request_timeout_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        request_timeout_ms = _parse_request_timeout_ms(d.pop("request_timeout_ms", UNSET))

        retry_policy = cls(
            max_attempts=max_attempts,
            backoff=backoff,
            request_timeout_ms=request_timeout_ms,
        )

        return retry_policy
