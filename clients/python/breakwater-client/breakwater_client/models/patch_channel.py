from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.channel_ordering import ChannelOrdering
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.auth_input_type_0 import AuthInputType0
    from ..models.auth_input_type_1 import AuthInputType1
    from ..models.auth_input_type_2 import AuthInputType2
    from ..models.patch_channel_filter_type_0 import PatchChannelFilterType0
    from ..models.patch_channel_headers_type_0 import PatchChannelHeadersType0
    from ..models.retry_policy import RetryPolicy


T = TypeVar("T", bound="PatchChannel")


@_attrs_define
class PatchChannel:
    """Body of `PATCH /api/v1/channels/{id}`: every field optional; `null` clears an override.

    Attributes:
        name (None | str | Unset): Display name, 1 to 200 characters (trimmed) without control, bidirectional
            formatting or invisible characters (null removes it).
        url (str | Unset): The endpoint (same rules as at creation; not null).
        failure_threshold (int | None | Unset): Failure threshold override (null = the cluster default).
        cooldown_ms (int | None | Unset): Cooldown override, ms (null = the cluster default).
        close_after_successes (int | None | Unset): Consecutive successful probe deliveries before a half-open circuit
            closes (null = the
            cluster default).
        replay_dead_letters_on_close (bool | Unset): Replay recent dead letters when a probe closes the circuit (not
            null).
        replay_window_ms (int | Unset): How far back that replay reaches, ms (not null).
        rate_limit (None | str | Unset): Rate limit `N/s`, `N/m` or `N/h` (null removes it; applies at once to waiting
            deliveries). Example: 80/s.
        max_in_flight (int | None | Unset): Concurrency ceiling (null = the global one).
        ordering (ChannelOrdering | Unset): How a channel's deliveries are ordered: `none` (in parallel) or `fifo` (one
            at a time, in
            the order accepted).
        event_types (list[str] | None | Unset): Event types the channel receives from `POST /api/v1/messages` (1 to 100;
            exact match);
            `null` clears the filter (every type).
        headers (None | PatchChannelHeadersType0 | Unset): Custom headers (same rules as at creation), replacing all of
            them; `{}` or `null` removes
            them. `{"sensitive": true}` without a `value` keeps a header's stored value.
        auth (AuthInputType0 | AuthInputType1 | AuthInputType2 | None | Unset):
        filter_ (None | PatchChannelFilterType0 | Unset): Payload filter (same rules as at creation); `null` removes it.
        retry_policy (None | RetryPolicy | Unset):
    """

    name: None | str | Unset = UNSET
    url: str | Unset = UNSET
    failure_threshold: int | None | Unset = UNSET
    cooldown_ms: int | None | Unset = UNSET
    close_after_successes: int | None | Unset = UNSET
    replay_dead_letters_on_close: bool | Unset = UNSET
    replay_window_ms: int | Unset = UNSET
    rate_limit: None | str | Unset = UNSET
    max_in_flight: int | None | Unset = UNSET
    ordering: ChannelOrdering | Unset = UNSET
    event_types: list[str] | None | Unset = UNSET
    headers: None | PatchChannelHeadersType0 | Unset = UNSET
    auth: AuthInputType0 | AuthInputType1 | AuthInputType2 | None | Unset = UNSET
    filter_: None | PatchChannelFilterType0 | Unset = UNSET
    retry_policy: None | RetryPolicy | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.auth_input_type_0 import AuthInputType0  # noqa: PLC0415
        from ..models.auth_input_type_1 import AuthInputType1  # noqa: PLC0415
        from ..models.auth_input_type_2 import AuthInputType2  # noqa: PLC0415
        from ..models.patch_channel_filter_type_0 import PatchChannelFilterType0  # noqa: PLC0415
        from ..models.patch_channel_headers_type_0 import PatchChannelHeadersType0  # noqa: PLC0415
        from ..models.retry_policy import RetryPolicy  # noqa: PLC0415

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        url = self.url

        failure_threshold: int | None | Unset
        if isinstance(self.failure_threshold, Unset):
            failure_threshold = UNSET
        else:
            failure_threshold = self.failure_threshold

        cooldown_ms: int | None | Unset
        if isinstance(self.cooldown_ms, Unset):
            cooldown_ms = UNSET
        else:
            cooldown_ms = self.cooldown_ms

        close_after_successes: int | None | Unset
        if isinstance(self.close_after_successes, Unset):
            close_after_successes = UNSET
        else:
            close_after_successes = self.close_after_successes

        replay_dead_letters_on_close = self.replay_dead_letters_on_close

        replay_window_ms = self.replay_window_ms

        rate_limit: None | str | Unset
        if isinstance(self.rate_limit, Unset):
            rate_limit = UNSET
        else:
            rate_limit = self.rate_limit

        max_in_flight: int | None | Unset
        if isinstance(self.max_in_flight, Unset):
            max_in_flight = UNSET
        else:
            max_in_flight = self.max_in_flight

        ordering: str | Unset = UNSET
        if not isinstance(self.ordering, Unset):
            ordering = self.ordering.value

        event_types: list[str] | None | Unset
        if isinstance(self.event_types, Unset):
            event_types = UNSET
        elif isinstance(self.event_types, list):
            event_types = self.event_types

        else:
            event_types = self.event_types

        headers: dict[str, Any] | None | Unset
        if isinstance(self.headers, Unset):
            headers = UNSET
        elif isinstance(self.headers, PatchChannelHeadersType0):
            headers = self.headers.to_dict()
        else:
            headers = self.headers

        auth: dict[str, Any] | None | Unset
        if isinstance(self.auth, Unset):
            auth = UNSET
        elif isinstance(self.auth, AuthInputType0):
            auth = self.auth.to_dict()
        elif isinstance(self.auth, AuthInputType1):
            auth = self.auth.to_dict()
        elif isinstance(self.auth, AuthInputType2):
            auth = self.auth.to_dict()
        else:
            auth = self.auth

        filter_: dict[str, Any] | None | Unset
        if isinstance(self.filter_, Unset):
            filter_ = UNSET
        elif isinstance(self.filter_, PatchChannelFilterType0):
            filter_ = self.filter_.to_dict()
        else:
            filter_ = self.filter_

        retry_policy: dict[str, Any] | None | Unset
        if isinstance(self.retry_policy, Unset):
            retry_policy = UNSET
        elif isinstance(self.retry_policy, RetryPolicy):
            retry_policy = self.retry_policy.to_dict()
        else:
            retry_policy = self.retry_policy

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if name is not UNSET:
            field_dict["name"] = name
        if url is not UNSET:
            field_dict["url"] = url
        if failure_threshold is not UNSET:
            field_dict["failure_threshold"] = failure_threshold
        if cooldown_ms is not UNSET:
            field_dict["cooldown_ms"] = cooldown_ms
        if close_after_successes is not UNSET:
            field_dict["close_after_successes"] = close_after_successes
        if replay_dead_letters_on_close is not UNSET:
            field_dict["replay_dead_letters_on_close"] = replay_dead_letters_on_close
        if replay_window_ms is not UNSET:
            field_dict["replay_window_ms"] = replay_window_ms
        if rate_limit is not UNSET:
            field_dict["rate_limit"] = rate_limit
        if max_in_flight is not UNSET:
            field_dict["max_in_flight"] = max_in_flight
        if ordering is not UNSET:
            field_dict["ordering"] = ordering
        if event_types is not UNSET:
            field_dict["event_types"] = event_types
        if headers is not UNSET:
            field_dict["headers"] = headers
        if auth is not UNSET:
            field_dict["auth"] = auth
        if filter_ is not UNSET:
            field_dict["filter"] = filter_
        if retry_policy is not UNSET:
            field_dict["retry_policy"] = retry_policy

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.auth_input_type_0 import AuthInputType0  # noqa: PLC0415
        from ..models.auth_input_type_1 import AuthInputType1  # noqa: PLC0415
        from ..models.auth_input_type_2 import AuthInputType2  # noqa: PLC0415
        from ..models.patch_channel_filter_type_0 import PatchChannelFilterType0  # noqa: PLC0415
        from ..models.patch_channel_headers_type_0 import PatchChannelHeadersType0  # noqa: PLC0415
        from ..models.retry_policy import RetryPolicy  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        url = d.pop("url", UNSET)

        def _parse_failure_threshold(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        failure_threshold = _parse_failure_threshold(d.pop("failure_threshold", UNSET))

        def _parse_cooldown_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        cooldown_ms = _parse_cooldown_ms(d.pop("cooldown_ms", UNSET))

        def _parse_close_after_successes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        close_after_successes = _parse_close_after_successes(d.pop("close_after_successes", UNSET))

        replay_dead_letters_on_close = d.pop("replay_dead_letters_on_close", UNSET)

        replay_window_ms = d.pop("replay_window_ms", UNSET)

        def _parse_rate_limit(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        rate_limit = _parse_rate_limit(d.pop("rate_limit", UNSET))

        def _parse_max_in_flight(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_in_flight = _parse_max_in_flight(d.pop("max_in_flight", UNSET))

        _ordering = d.pop("ordering", UNSET)
        ordering: ChannelOrdering | Unset
        if isinstance(_ordering, Unset):
            ordering = UNSET
        else:
            ordering = ChannelOrdering(_ordering)

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

        def _parse_headers(data: object) -> None | PatchChannelHeadersType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                headers_type_0 = PatchChannelHeadersType0.from_dict(data)

                return headers_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PatchChannelHeadersType0 | Unset, data)

        headers = _parse_headers(d.pop("headers", UNSET))

        def _parse_auth(data: object) -> AuthInputType0 | AuthInputType1 | AuthInputType2 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_auth_input_type_0 = AuthInputType0.from_dict(data)

                return componentsschemas_auth_input_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_auth_input_type_1 = AuthInputType1.from_dict(data)

                return componentsschemas_auth_input_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_auth_input_type_2 = AuthInputType2.from_dict(data)

                return componentsschemas_auth_input_type_2
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(AuthInputType0 | AuthInputType1 | AuthInputType2 | None | Unset, data)

        auth = _parse_auth(d.pop("auth", UNSET))

        def _parse_filter_(data: object) -> None | PatchChannelFilterType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                filter_type_0 = PatchChannelFilterType0.from_dict(data)

                return filter_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PatchChannelFilterType0 | Unset, data)

        filter_ = _parse_filter_(d.pop("filter", UNSET))

        def _parse_retry_policy(data: object) -> None | RetryPolicy | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                retry_policy_type_1 = RetryPolicy.from_dict(data)

                return retry_policy_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetryPolicy | Unset, data)

        retry_policy = _parse_retry_policy(d.pop("retry_policy", UNSET))

        patch_channel = cls(
            name=name,
            url=url,
            failure_threshold=failure_threshold,
            cooldown_ms=cooldown_ms,
            close_after_successes=close_after_successes,
            replay_dead_letters_on_close=replay_dead_letters_on_close,
            replay_window_ms=replay_window_ms,
            rate_limit=rate_limit,
            max_in_flight=max_in_flight,
            ordering=ordering,
            event_types=event_types,
            headers=headers,
            auth=auth,
            filter_=filter_,
            retry_policy=retry_policy,
        )

        return patch_channel
