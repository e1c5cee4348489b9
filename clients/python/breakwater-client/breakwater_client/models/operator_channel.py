from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.channel_ordering import ChannelOrdering
from ..models.circuit_state import CircuitState
from ..models.tier import Tier
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.auth_type_0 import AuthType0
    from ..models.auth_type_1 import AuthType1
    from ..models.auth_type_2 import AuthType2
    from ..models.channel_filter_type_0 import ChannelFilterType0
    from ..models.channel_headers import ChannelHeaders
    from ..models.retry_policy import RetryPolicy


T = TypeVar("T", bound="OperatorChannel")


@_attrs_define
class OperatorChannel:
    """A channel as the operator lists it: with its tenant, tier and parked count.

    Attributes:
        id (UUID): Channel id (also the `group_id` of its jobs).
        tenant_id (UUID): Owning tenant.
        url (str): The endpoint.
        circuit_state (CircuitState): A circuit state (the `channels.circuit_state` column).
        circuit_changed_at (datetime.datetime): When the circuit last changed state.
        consecutive_failures (int): Consecutive transient failures counted while closed.
        trial_successes (int): Successful probe deliveries so far in the current half-open run (meaningful while
            `half_open`).
        ordering (ChannelOrdering): How a channel's deliveries are ordered: `none` (in parallel) or `fifo` (one at a
            time, in
            the order accepted).
        probe_failures (int): Failed probes in a row (the cooldown doubles with each).
        circuit_generation (int): Bumped by every transition.
        rate_limited_total (int): Deliveries held back by the rate limit so far.
        replay_dead_letters_on_close (bool): Replay the channel's recent dead letters when a probe closes its circuit.
        replay_window_ms (int): How far back that replay reaches, ms.
        headers (ChannelHeaders): Custom headers added to every request of the channel: name → `{value, sensitive}`, a
            sensitive value shown as `********`; `{}` for none.
        operator_hold (bool): Whether an operator holds the circuit (an operator's pause or force-open): the tenant's
            pause and resume are refused (409) until an operator resumes or closes it, or a probe
            closes it ([`crate::circuit::apply_manual`]).
        created_at (datetime.datetime): Creation time.
        updated_at (datetime.datetime): Last change.
        tenant_name (str): Tenant name.
        tier (Tier): A tenant's tier; it picks the queue its deliveries run on (docs/design.md, "Tiers").
        parked (int): Waiting deliveries held by a parked circuit: the channel's own (open, half-open, paused)
            or its host's; the same count as the channel view's `circuit.parked`.
        name (None | str | Unset): Optional display name.
        rate_limit (None | str | Unset): Rate limit (`"80/s"`, `"1000/m"`, `"5000/h"`), null = unlimited. Example: 80/s.
        event_types (list[str] | None | Unset): The event types the channel receives from `POST /api/v1/messages`: exact
            names or
            prefix wildcards such as `invoice.*` (see [`canonical_event_types`]); null = every type.
        filter_ (ChannelFilterType0 | None | Unset): The channel's payload filter: a JSON Logic rule over
            `{"event_type", "payload"}`
            evaluated when a message fans out (see [`crate::filters`]); null = every message of a
            subscribed type.
        previous_secret_expires_at (datetime.datetime | None | Unset): Until when the signing secret rotated out by the
            last [`rotate_secret`] still signs each
            request (a second signature); in the past once that grace period is over, null when the
            secret was never rotated or rotated without a grace period.
        host_key (None | str | Unset): The host circuit this channel shares with every channel on the same host (see
            [`crate::hosts::host_key`]), e.g. `api.example.com`; null before it was keyed.
        failure_threshold (int | None | Unset): Per-channel override of the failure threshold (null = global default).
        cooldown_ms (int | None | Unset): Per-channel override of the probe cooldown in ms (null = global default).
        close_after_successes (int | None | Unset): Per-channel override of the consecutive successful probe deliveries
            (1–100) a half-open
            circuit needs before it closes (null = cluster default; see
            [`crate::circuit`], "Careful closing").
        max_in_flight (int | None | Unset): Per-channel ceiling of the adaptive concurrency limit: most deliveries in
            flight at once,
            cluster-wide (null = `worker.channel_concurrency_ceiling`).
        next_probe_at (datetime.datetime | None | Unset): When the next probe may run, while open; while paused from
            open or half-open, the
            earliest its probe goes once resumed (a pause keeps it, a new URL makes it now).
        retry_after_until (datetime.datetime | None | Unset): Nothing is sent before this (a `Retry-After` from the
            endpoint).
        last_failure_at (datetime.datetime | None | Unset): Last transient failure.
        last_failure_reason (None | str | Unset): What the last transient failure was.
        auth (AuthType0 | AuthType1 | AuthType2 | None | Unset):
        retry_policy (None | RetryPolicy | Unset):
    """

    id: UUID
    tenant_id: UUID
    url: str
    circuit_state: CircuitState
    circuit_changed_at: datetime.datetime
    consecutive_failures: int
    trial_successes: int
    ordering: ChannelOrdering
    probe_failures: int
    circuit_generation: int
    rate_limited_total: int
    replay_dead_letters_on_close: bool
    replay_window_ms: int
    headers: ChannelHeaders
    operator_hold: bool
    created_at: datetime.datetime
    updated_at: datetime.datetime
    tenant_name: str
    tier: Tier
    parked: int
    name: None | str | Unset = UNSET
    rate_limit: None | str | Unset = UNSET
    event_types: list[str] | None | Unset = UNSET
    filter_: ChannelFilterType0 | None | Unset = UNSET
    previous_secret_expires_at: datetime.datetime | None | Unset = UNSET
    host_key: None | str | Unset = UNSET
    failure_threshold: int | None | Unset = UNSET
    cooldown_ms: int | None | Unset = UNSET
    close_after_successes: int | None | Unset = UNSET
    max_in_flight: int | None | Unset = UNSET
    next_probe_at: datetime.datetime | None | Unset = UNSET
    retry_after_until: datetime.datetime | None | Unset = UNSET
    last_failure_at: datetime.datetime | None | Unset = UNSET
    last_failure_reason: None | str | Unset = UNSET
    auth: AuthType0 | AuthType1 | AuthType2 | None | Unset = UNSET
    retry_policy: None | RetryPolicy | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.auth_type_0 import AuthType0  # noqa: PLC0415
        from ..models.auth_type_1 import AuthType1  # noqa: PLC0415
        from ..models.auth_type_2 import AuthType2  # noqa: PLC0415
        from ..models.channel_filter_type_0 import ChannelFilterType0  # noqa: PLC0415
        from ..models.retry_policy import RetryPolicy  # noqa: PLC0415

        id = str(self.id)

        tenant_id = str(self.tenant_id)

        url = self.url

        circuit_state = self.circuit_state.value

        circuit_changed_at = self.circuit_changed_at.isoformat()

        consecutive_failures = self.consecutive_failures

        trial_successes = self.trial_successes

        ordering = self.ordering.value

        probe_failures = self.probe_failures

        circuit_generation = self.circuit_generation

        rate_limited_total = self.rate_limited_total

        replay_dead_letters_on_close = self.replay_dead_letters_on_close

        replay_window_ms = self.replay_window_ms

        headers = self.headers.to_dict()

        operator_hold = self.operator_hold

        created_at = self.created_at.isoformat()

        updated_at = self.updated_at.isoformat()

        tenant_name = self.tenant_name

        tier = self.tier.value

        parked = self.parked

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        rate_limit: None | str | Unset
        if isinstance(self.rate_limit, Unset):
            rate_limit = UNSET
        else:
            rate_limit = self.rate_limit

        event_types: list[str] | None | Unset
        if isinstance(self.event_types, Unset):
            event_types = UNSET
        elif isinstance(self.event_types, list):
            event_types = self.event_types

        else:
            event_types = self.event_types

        filter_: dict[str, Any] | None | Unset
        if isinstance(self.filter_, Unset):
            filter_ = UNSET
        elif isinstance(self.filter_, ChannelFilterType0):
            filter_ = self.filter_.to_dict()
        else:
            filter_ = self.filter_

        previous_secret_expires_at: None | str | Unset
        if isinstance(self.previous_secret_expires_at, Unset):
            previous_secret_expires_at = UNSET
        elif isinstance(self.previous_secret_expires_at, datetime.datetime):
            previous_secret_expires_at = self.previous_secret_expires_at.isoformat()
        else:
            previous_secret_expires_at = self.previous_secret_expires_at

        host_key: None | str | Unset
        if isinstance(self.host_key, Unset):
            host_key = UNSET
        else:
            host_key = self.host_key

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

        max_in_flight: int | None | Unset
        if isinstance(self.max_in_flight, Unset):
            max_in_flight = UNSET
        else:
            max_in_flight = self.max_in_flight

        next_probe_at: None | str | Unset
        if isinstance(self.next_probe_at, Unset):
            next_probe_at = UNSET
        elif isinstance(self.next_probe_at, datetime.datetime):
            next_probe_at = self.next_probe_at.isoformat()
        else:
            next_probe_at = self.next_probe_at

        retry_after_until: None | str | Unset
        if isinstance(self.retry_after_until, Unset):
            retry_after_until = UNSET
        elif isinstance(self.retry_after_until, datetime.datetime):
            retry_after_until = self.retry_after_until.isoformat()
        else:
            retry_after_until = self.retry_after_until

        last_failure_at: None | str | Unset
        if isinstance(self.last_failure_at, Unset):
            last_failure_at = UNSET
        elif isinstance(self.last_failure_at, datetime.datetime):
            last_failure_at = self.last_failure_at.isoformat()
        else:
            last_failure_at = self.last_failure_at

        last_failure_reason: None | str | Unset
        if isinstance(self.last_failure_reason, Unset):
            last_failure_reason = UNSET
        else:
            last_failure_reason = self.last_failure_reason

        auth: dict[str, Any] | None | Unset
        if isinstance(self.auth, Unset):
            auth = UNSET
        elif isinstance(self.auth, AuthType0):
            auth = self.auth.to_dict()
        elif isinstance(self.auth, AuthType1):
            auth = self.auth.to_dict()
        elif isinstance(self.auth, AuthType2):
            auth = self.auth.to_dict()
        else:
            auth = self.auth

        retry_policy: dict[str, Any] | None | Unset
        if isinstance(self.retry_policy, Unset):
            retry_policy = UNSET
        elif isinstance(self.retry_policy, RetryPolicy):
            retry_policy = self.retry_policy.to_dict()
        else:
            retry_policy = self.retry_policy

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "tenant_id": tenant_id,
                "url": url,
                "circuit_state": circuit_state,
                "circuit_changed_at": circuit_changed_at,
                "consecutive_failures": consecutive_failures,
                "trial_successes": trial_successes,
                "ordering": ordering,
                "probe_failures": probe_failures,
                "circuit_generation": circuit_generation,
                "rate_limited_total": rate_limited_total,
                "replay_dead_letters_on_close": replay_dead_letters_on_close,
                "replay_window_ms": replay_window_ms,
                "headers": headers,
                "operator_hold": operator_hold,
                "created_at": created_at,
                "updated_at": updated_at,
                "tenant_name": tenant_name,
                "tier": tier,
                "parked": parked,
            }
        )
        if name is not UNSET:
            field_dict["name"] = name
        if rate_limit is not UNSET:
            field_dict["rate_limit"] = rate_limit
        if event_types is not UNSET:
            field_dict["event_types"] = event_types
        if filter_ is not UNSET:
            field_dict["filter"] = filter_
        if previous_secret_expires_at is not UNSET:
            field_dict["previous_secret_expires_at"] = previous_secret_expires_at
        if host_key is not UNSET:
            field_dict["host_key"] = host_key
        if failure_threshold is not UNSET:
            field_dict["failure_threshold"] = failure_threshold
        if cooldown_ms is not UNSET:
            field_dict["cooldown_ms"] = cooldown_ms
        if close_after_successes is not UNSET:
            field_dict["close_after_successes"] = close_after_successes
        if max_in_flight is not UNSET:
            field_dict["max_in_flight"] = max_in_flight
        if next_probe_at is not UNSET:
            field_dict["next_probe_at"] = next_probe_at
        if retry_after_until is not UNSET:
            field_dict["retry_after_until"] = retry_after_until
        if last_failure_at is not UNSET:
            field_dict["last_failure_at"] = last_failure_at
        if last_failure_reason is not UNSET:
            field_dict["last_failure_reason"] = last_failure_reason
        if auth is not UNSET:
            field_dict["auth"] = auth
        if retry_policy is not UNSET:
            field_dict["retry_policy"] = retry_policy

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.auth_type_0 import AuthType0  # noqa: PLC0415
        from ..models.auth_type_1 import AuthType1  # noqa: PLC0415
        from ..models.auth_type_2 import AuthType2  # noqa: PLC0415
        from ..models.channel_filter_type_0 import ChannelFilterType0  # noqa: PLC0415
        from ..models.channel_headers import ChannelHeaders  # noqa: PLC0415
        from ..models.retry_policy import RetryPolicy  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        tenant_id = UUID(d.pop("tenant_id"))

        url = d.pop("url")

        circuit_state = CircuitState(d.pop("circuit_state"))

        circuit_changed_at = datetime.datetime.fromisoformat(d.pop("circuit_changed_at"))

        consecutive_failures = d.pop("consecutive_failures")

        trial_successes = d.pop("trial_successes")

        ordering = ChannelOrdering(d.pop("ordering"))

        probe_failures = d.pop("probe_failures")

        circuit_generation = d.pop("circuit_generation")

        rate_limited_total = d.pop("rate_limited_total")

        replay_dead_letters_on_close = d.pop("replay_dead_letters_on_close")

        replay_window_ms = d.pop("replay_window_ms")

        headers = ChannelHeaders.from_dict(d.pop("headers"))

        operator_hold = d.pop("operator_hold")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        tenant_name = d.pop("tenant_name")

        tier = Tier(d.pop("tier"))

        parked = d.pop("parked")

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_rate_limit(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        rate_limit = _parse_rate_limit(d.pop("rate_limit", UNSET))

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

        def _parse_filter_(data: object) -> ChannelFilterType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                filter_type_0 = ChannelFilterType0.from_dict(data)

                return filter_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ChannelFilterType0 | None | Unset, data)

        filter_ = _parse_filter_(d.pop("filter", UNSET))

        def _parse_previous_secret_expires_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                previous_secret_expires_at_type_0 = datetime.datetime.fromisoformat(data)

                return previous_secret_expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        previous_secret_expires_at = _parse_previous_secret_expires_at(d.pop("previous_secret_expires_at", UNSET))

        def _parse_host_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        host_key = _parse_host_key(d.pop("host_key", UNSET))

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

        def _parse_max_in_flight(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_in_flight = _parse_max_in_flight(d.pop("max_in_flight", UNSET))

        def _parse_next_probe_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                next_probe_at_type_0 = datetime.datetime.fromisoformat(data)

                return next_probe_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        next_probe_at = _parse_next_probe_at(d.pop("next_probe_at", UNSET))

        def _parse_retry_after_until(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                retry_after_until_type_0 = datetime.datetime.fromisoformat(data)

                return retry_after_until_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        retry_after_until = _parse_retry_after_until(d.pop("retry_after_until", UNSET))

        def _parse_last_failure_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_failure_at_type_0 = datetime.datetime.fromisoformat(data)

                return last_failure_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        last_failure_at = _parse_last_failure_at(d.pop("last_failure_at", UNSET))

        def _parse_last_failure_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        last_failure_reason = _parse_last_failure_reason(d.pop("last_failure_reason", UNSET))

        def _parse_auth(data: object) -> AuthType0 | AuthType1 | AuthType2 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_auth_type_0 = AuthType0.from_dict(data)

                return componentsschemas_auth_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_auth_type_1 = AuthType1.from_dict(data)

                return componentsschemas_auth_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_auth_type_2 = AuthType2.from_dict(data)

                return componentsschemas_auth_type_2
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(AuthType0 | AuthType1 | AuthType2 | None | Unset, data)

        auth = _parse_auth(d.pop("auth", UNSET))

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

        operator_channel = cls(
            id=id,
            tenant_id=tenant_id,
            url=url,
            circuit_state=circuit_state,
            circuit_changed_at=circuit_changed_at,
            consecutive_failures=consecutive_failures,
            trial_successes=trial_successes,
            ordering=ordering,
            probe_failures=probe_failures,
            circuit_generation=circuit_generation,
            rate_limited_total=rate_limited_total,
            replay_dead_letters_on_close=replay_dead_letters_on_close,
            replay_window_ms=replay_window_ms,
            headers=headers,
            operator_hold=operator_hold,
            created_at=created_at,
            updated_at=updated_at,
            tenant_name=tenant_name,
            tier=tier,
            parked=parked,
            name=name,
            rate_limit=rate_limit,
            event_types=event_types,
            filter_=filter_,
            previous_secret_expires_at=previous_secret_expires_at,
            host_key=host_key,
            failure_threshold=failure_threshold,
            cooldown_ms=cooldown_ms,
            close_after_successes=close_after_successes,
            max_in_flight=max_in_flight,
            next_probe_at=next_probe_at,
            retry_after_until=retry_after_until,
            last_failure_at=last_failure_at,
            last_failure_reason=last_failure_reason,
            auth=auth,
            retry_policy=retry_policy,
        )

        operator_channel.additional_properties = d
        return operator_channel

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
