import datetime
from http import HTTPStatus
from typing import Any
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.delivery_status import DeliveryStatus
from ...models.page_delivery_summary import PageDeliverySummary
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    status: DeliveryStatus | Unset = UNSET,
    event_type: str | Unset = UNSET,
    channel_id: UUID | Unset = UNSET,
    message_id: UUID | Unset = UNSET,
    since: datetime.datetime | Unset = UNSET,
    until: datetime.datetime | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_status: str | Unset = UNSET
    if not isinstance(status, Unset):
        json_status = status.value

    params["status"] = json_status

    params["event_type"] = event_type

    json_channel_id: str | Unset = UNSET
    if not isinstance(channel_id, Unset):
        json_channel_id = str(channel_id)
    params["channel_id"] = json_channel_id

    json_message_id: str | Unset = UNSET
    if not isinstance(message_id, Unset):
        json_message_id = str(message_id)
    params["message_id"] = json_message_id

    json_since: str | Unset = UNSET
    if not isinstance(since, Unset):
        json_since = since.isoformat()
    params["since"] = json_since

    json_until: str | Unset = UNSET
    if not isinstance(until, Unset):
        json_until = until.isoformat()
    params["until"] = json_until

    params["after"] = after

    params["limit"] = limit

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/deliveries",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> PageDeliverySummary | Problem | None:
    if response.status_code == 200:
        response_200 = PageDeliverySummary.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

    if response.status_code == 429:
        response_429 = Problem.from_dict(response.json())

        return response_429

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[PageDeliverySummary | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    status: DeliveryStatus | Unset = UNSET,
    event_type: str | Unset = UNSET,
    channel_id: UUID | Unset = UNSET,
    message_id: UUID | Unset = UNSET,
    since: datetime.datetime | Unset = UNSET,
    until: datetime.datetime | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> Response[PageDeliverySummary | Problem]:
    """Searches the tenant's deliveries on every channel, newest first, without payloads.

     `GET /api/v1/deliveries?event_type=&status=&channel_id=&message_id=&since=&until=&after=&limit=`:
    the calling tenant's deliveries, newest first by `(created_at, id)`, paged by cursor as every
    list; each parameter narrows it, `since` (inclusive) and `until` (exclusive) bound when they
    were accepted. No filter, a time window, `channel_id`, `message_id` and `status=dead` or
    `cancelled` read an index range; another `status` and `event_type` filter the tenant's list
    as it is walked, so a rare match costs more (39 ms for a type at 0.1 % of 1 M rows: docs/api.md,
    "What a delivery search costs"). Another tenant's channel or message id finds nothing (an empty
    page, not a 404: a
    search names no object). An unknown `status`, a bad `event_type`, id or instant, or `since`
    after `until` → 422.

    Args:
        status (DeliveryStatus | Unset): A delivery's status, the `deliveries.status` column
            (`text`, checked by the table's CHECK
            constraint; every value since migration `20261130000010_lifecycle`). Decodes from and
            encodes to that column (`sqlx::Type`) and serializes as the same snake_case word, so the
            API's
            JSON shows the column's text. `delivered`, `dead` and `cancelled` are final
            ([`Status::is_final`]).
        event_type (str | Unset):
        channel_id (UUID | Unset):
        message_id (UUID | Unset):
        since (datetime.datetime | Unset):
        until (datetime.datetime | Unset):
        after (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageDeliverySummary | Problem]
    """

    kwargs = _get_kwargs(
        status=status,
        event_type=event_type,
        channel_id=channel_id,
        message_id=message_id,
        since=since,
        until=until,
        after=after,
        limit=limit,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    status: DeliveryStatus | Unset = UNSET,
    event_type: str | Unset = UNSET,
    channel_id: UUID | Unset = UNSET,
    message_id: UUID | Unset = UNSET,
    since: datetime.datetime | Unset = UNSET,
    until: datetime.datetime | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> PageDeliverySummary | Problem | None:
    """Searches the tenant's deliveries on every channel, newest first, without payloads.

     `GET /api/v1/deliveries?event_type=&status=&channel_id=&message_id=&since=&until=&after=&limit=`:
    the calling tenant's deliveries, newest first by `(created_at, id)`, paged by cursor as every
    list; each parameter narrows it, `since` (inclusive) and `until` (exclusive) bound when they
    were accepted. No filter, a time window, `channel_id`, `message_id` and `status=dead` or
    `cancelled` read an index range; another `status` and `event_type` filter the tenant's list
    as it is walked, so a rare match costs more (39 ms for a type at 0.1 % of 1 M rows: docs/api.md,
    "What a delivery search costs"). Another tenant's channel or message id finds nothing (an empty
    page, not a 404: a
    search names no object). An unknown `status`, a bad `event_type`, id or instant, or `since`
    after `until` → 422.

    Args:
        status (DeliveryStatus | Unset): A delivery's status, the `deliveries.status` column
            (`text`, checked by the table's CHECK
            constraint; every value since migration `20261130000010_lifecycle`). Decodes from and
            encodes to that column (`sqlx::Type`) and serializes as the same snake_case word, so the
            API's
            JSON shows the column's text. `delivered`, `dead` and `cancelled` are final
            ([`Status::is_final`]).
        event_type (str | Unset):
        channel_id (UUID | Unset):
        message_id (UUID | Unset):
        since (datetime.datetime | Unset):
        until (datetime.datetime | Unset):
        after (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageDeliverySummary | Problem
    """

    return sync_detailed(
        client=client,
        status=status,
        event_type=event_type,
        channel_id=channel_id,
        message_id=message_id,
        since=since,
        until=until,
        after=after,
        limit=limit,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    status: DeliveryStatus | Unset = UNSET,
    event_type: str | Unset = UNSET,
    channel_id: UUID | Unset = UNSET,
    message_id: UUID | Unset = UNSET,
    since: datetime.datetime | Unset = UNSET,
    until: datetime.datetime | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> Response[PageDeliverySummary | Problem]:
    """Searches the tenant's deliveries on every channel, newest first, without payloads.

     `GET /api/v1/deliveries?event_type=&status=&channel_id=&message_id=&since=&until=&after=&limit=`:
    the calling tenant's deliveries, newest first by `(created_at, id)`, paged by cursor as every
    list; each parameter narrows it, `since` (inclusive) and `until` (exclusive) bound when they
    were accepted. No filter, a time window, `channel_id`, `message_id` and `status=dead` or
    `cancelled` read an index range; another `status` and `event_type` filter the tenant's list
    as it is walked, so a rare match costs more (39 ms for a type at 0.1 % of 1 M rows: docs/api.md,
    "What a delivery search costs"). Another tenant's channel or message id finds nothing (an empty
    page, not a 404: a
    search names no object). An unknown `status`, a bad `event_type`, id or instant, or `since`
    after `until` → 422.

    Args:
        status (DeliveryStatus | Unset): A delivery's status, the `deliveries.status` column
            (`text`, checked by the table's CHECK
            constraint; every value since migration `20261130000010_lifecycle`). Decodes from and
            encodes to that column (`sqlx::Type`) and serializes as the same snake_case word, so the
            API's
            JSON shows the column's text. `delivered`, `dead` and `cancelled` are final
            ([`Status::is_final`]).
        event_type (str | Unset):
        channel_id (UUID | Unset):
        message_id (UUID | Unset):
        since (datetime.datetime | Unset):
        until (datetime.datetime | Unset):
        after (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageDeliverySummary | Problem]
    """

    kwargs = _get_kwargs(
        status=status,
        event_type=event_type,
        channel_id=channel_id,
        message_id=message_id,
        since=since,
        until=until,
        after=after,
        limit=limit,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    status: DeliveryStatus | Unset = UNSET,
    event_type: str | Unset = UNSET,
    channel_id: UUID | Unset = UNSET,
    message_id: UUID | Unset = UNSET,
    since: datetime.datetime | Unset = UNSET,
    until: datetime.datetime | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> PageDeliverySummary | Problem | None:
    """Searches the tenant's deliveries on every channel, newest first, without payloads.

     `GET /api/v1/deliveries?event_type=&status=&channel_id=&message_id=&since=&until=&after=&limit=`:
    the calling tenant's deliveries, newest first by `(created_at, id)`, paged by cursor as every
    list; each parameter narrows it, `since` (inclusive) and `until` (exclusive) bound when they
    were accepted. No filter, a time window, `channel_id`, `message_id` and `status=dead` or
    `cancelled` read an index range; another `status` and `event_type` filter the tenant's list
    as it is walked, so a rare match costs more (39 ms for a type at 0.1 % of 1 M rows: docs/api.md,
    "What a delivery search costs"). Another tenant's channel or message id finds nothing (an empty
    page, not a 404: a
    search names no object). An unknown `status`, a bad `event_type`, id or instant, or `since`
    after `until` → 422.

    Args:
        status (DeliveryStatus | Unset): A delivery's status, the `deliveries.status` column
            (`text`, checked by the table's CHECK
            constraint; every value since migration `20261130000010_lifecycle`). Decodes from and
            encodes to that column (`sqlx::Type`) and serializes as the same snake_case word, so the
            API's
            JSON shows the column's text. `delivered`, `dead` and `cancelled` are final
            ([`Status::is_final`]).
        event_type (str | Unset):
        channel_id (UUID | Unset):
        message_id (UUID | Unset):
        since (datetime.datetime | Unset):
        until (datetime.datetime | Unset):
        after (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageDeliverySummary | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            status=status,
            event_type=event_type,
            channel_id=channel_id,
            message_id=message_id,
            since=since,
            until=until,
            after=after,
            limit=limit,
        )
    ).parsed
