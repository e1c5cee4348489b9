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
    from ..models.create_channel_filter_type_0 import CreateChannelFilterType0
    from ..models.create_channel_headers_type_0 import CreateChannelHeadersType0
    from ..models.retry_policy import RetryPolicy


T = TypeVar("T", bound="CreateChannel")


@_attrs_define
class CreateChannel:
    """Body of `POST /api/v1/channels`.

    Attributes:
        url (str): The endpoint: an absolute `http` or `https` URL without credentials, at most 2048
            characters, whose host resolves to public addresses only (unless
            `allow_private_targets`). Example: https://example.com/hooks.
        name (None | str | Unset): Display name, 1 to 200 characters (trimmed) without control, bidirectional
            formatting or invisible characters (absent or null: none).
        failure_threshold (int | None | Unset): Consecutive transient failures that open the circuit (null = the cluster
            default).
        cooldown_ms (int | None | Unset): First cooldown of an open circuit before a probe, ms (null = the cluster
            default).
        close_after_successes (int | None | Unset): Consecutive successful probe deliveries before a half-open circuit
            closes: the probe,
            then this many minus one trial deliveries, one at a time (null = the cluster default).
        replay_dead_letters_on_close (bool | Unset): Replay the channel's recent dead letters when a probe closes its
            circuit.
        replay_window_ms (int | None | Unset): How far back that replay reaches, ms (default 1 h, at most 30 days).
        rate_limit (None | str | Unset): Strict cluster-wide rate limit: `N/s`, `N/m` or `N/h` with N from 1 to 1 000
            000
            (null = none). Example: 80/s.
        max_in_flight (int | None | Unset): Ceiling of the channel's adaptive concurrency, cluster-wide (null = the
            global one).
        ordering (ChannelOrdering | Unset): How a channel's deliveries are ordered: `none` (in parallel) or `fifo` (one
            at a time, in
            the order accepted).
        event_types (list[str] | None | Unset): Event types the channel receives from `POST /api/v1/messages` (1 to
            100): exact names,
            or prefix wildcards such as `invoice.*` (every type under `invoice.`); absent/null =
            every type.
        headers (CreateChannelHeadersType0 | None | Unset): Custom headers sent with every request of the channel: name
            → value, a value being a
            string or `{"value": "…", "sensitive": true}` (a secret: never shown again, never
            logged, audited as changed only). At most 20 headers and 4096 bytes of names and values;
            names are RFC 9110 tokens other than hop-by-hop, framing, `Proxy-*`, `Content-Type` and
            the Standard Webhooks headers; values without CR, LF or NUL. Example: {'X-Api-Key': {'sensitive': True, 'value':
            'k-123'}, 'X-Tenant': 'acme'}.
        auth (AuthInputType0 | AuthInputType1 | AuthInputType2 | None | Unset):
        filter_ (CreateChannelFilterType0 | None | Unset): Payload filter: a [JSON Logic](https://jsonlogic.com) rule
            over `{"event_type": …,
            "payload": …}`; the channel gets a message from `POST /api/v1/messages` only when the
            rule is truthy for it (not applied to `POST /api/v1/channels/{id}/deliveries`, which
            names the channel). At most 4096 bytes, 256 values, 16 levels; the operators of the JSON
            Logic reference that test (`var`, `missing`, `missing_some`, `if`, `==`, `===`, `!=`,
            `!==`, `!`, `!!`, `or`, `and`, `>`, `>=`, `<`, `<=`, `max`, `min`, `+`, `-`, `*`, `/`,
            `%`, `all`, `some`, `none`, `in`, `substr`), iteration not nested. Absent/null = none.
        retry_policy (None | RetryPolicy | Unset):
    """

    url: str
    name: None | str | Unset = UNSET
    failure_threshold: int | None | Unset = UNSET
    cooldown_ms: int | None | Unset = UNSET
    close_after_successes: int | None | Unset = UNSET
    replay_dead_letters_on_close: bool | Unset = UNSET
    replay_window_ms: int | None | Unset = UNSET
    rate_limit: None | str | Unset = UNSET
    max_in_flight: int | None | Unset = UNSET
    ordering: ChannelOrdering | Unset = UNSET
    event_types: list[str] | None | Unset = UNSET
    headers: CreateChannelHeadersType0 | None | Unset = UNSET
    auth: AuthInputType0 | AuthInputType1 | AuthInputType2 | None | Unset = UNSET
    filter_: CreateChannelFilterType0 | None | Unset = UNSET
    retry_policy: None | RetryPolicy | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.auth_input_type_0 import AuthInputType0  # noqa: PLC0415
        from ..models.auth_input_type_1 import AuthInputType1  # noqa: PLC0415
        from ..models.auth_input_type_2 import AuthInputType2  # noqa: PLC0415
        from ..models.create_channel_filter_type_0 import CreateChannelFilterType0  # noqa: PLC0415
        from ..models.create_channel_headers_type_0 import CreateChannelHeadersType0  # noqa: PLC0415
        from ..models.retry_policy import RetryPolicy  # noqa: PLC0415

        url = self.url

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

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

        replay_window_ms: int | None | Unset
        if isinstance(self.replay_window_ms, Unset):
            replay_window_ms = UNSET
        else:
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
        elif isinstance(self.headers, CreateChannelHeadersType0):
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
        elif isinstance(self.filter_, CreateChannelFilterType0):
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

        field_dict.update(
            {
                "url": url,
            }
        )
        if name is not UNSET:
            field_dict["name"] = name
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
        from ..models.create_channel_filter_type_0 import CreateChannelFilterType0  # noqa: PLC0415
        from ..models.create_channel_headers_type_0 import CreateChannelHeadersType0  # noqa: PLC0415
        from ..models.retry_policy import RetryPolicy  # noqa: PLC0415

        d = dict(src_dict)
        url = d.pop("url")

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

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

        def _parse_replay_window_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        replay_window_ms = _parse_replay_window_ms(d.pop("replay_window_ms", UNSET))

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

        def _parse_headers(data: object) -> CreateChannelHeadersType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                headers_type_0 = CreateChannelHeadersType0.from_dict(data)

                return headers_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CreateChannelHeadersType0 | None | Unset, data)

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

        def _parse_filter_(data: object) -> CreateChannelFilterType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                filter_type_0 = CreateChannelFilterType0.from_dict(data)

                return filter_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CreateChannelFilterType0 | None | Unset, data)

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

        create_channel = cls(
            url=url,
            name=name,
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

        return create_channel
