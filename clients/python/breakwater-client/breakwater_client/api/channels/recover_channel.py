from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.recover_body import RecoverBody
from ...models.recover_result import RecoverResult
from ...types import Response


def _get_kwargs(
    id: UUID,
    *,
    body: RecoverBody,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/channels/{id}/recover".format(
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | RecoverResult | None:
    if response.status_code == 200:
        response_200 = RecoverResult.from_dict(response.json())

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

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = Problem.from_dict(response.json())

        return response_415

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
) -> Response[Problem | RecoverResult]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient,
    body: RecoverBody,
) -> Response[Problem | RecoverResult]:
    """Resends the channel's final deliveries since a time.

     Resends (as `POST /api/v1/deliveries/{id}/resend` does one: same id and `webhook-id`, a new
    attempt series) the channel's deliveries accepted in `[since, until)` whose status is in
    `status` (default `dead`) and event type in `event_types` (default any), whose payload was not
    purged, oldest first, at most `limit` (1 000) per call: `next_cursor` continues after the
    last one looked at. Idempotent while they are on their way: only final deliveries are picked,
    so a second call does not send again what the first resent until that has finished. To an
    open or paused channel they come back parked (`parked: true`). With `dry_run`: the count and
    the first 10 ids, nothing sent, nothing audited. Each real call is audited once
    (`deliveries.recovered`). 422 for a bad body (`since` after `until`, a status that is unknown
    or not final, an empty or too long list, a bad `after`).

    Args:
        id (UUID):
        body (RecoverBody): Body of `POST /api/v1/channels/{id}/recover`: which of the channel's
            final deliveries to
            resend.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RecoverResult]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: UUID,
    *,
    client: AuthenticatedClient,
    body: RecoverBody,
) -> Problem | RecoverResult | None:
    """Resends the channel's final deliveries since a time.

     Resends (as `POST /api/v1/deliveries/{id}/resend` does one: same id and `webhook-id`, a new
    attempt series) the channel's deliveries accepted in `[since, until)` whose status is in
    `status` (default `dead`) and event type in `event_types` (default any), whose payload was not
    purged, oldest first, at most `limit` (1 000) per call: `next_cursor` continues after the
    last one looked at. Idempotent while they are on their way: only final deliveries are picked,
    so a second call does not send again what the first resent until that has finished. To an
    open or paused channel they come back parked (`parked: true`). With `dry_run`: the count and
    the first 10 ids, nothing sent, nothing audited. Each real call is audited once
    (`deliveries.recovered`). 422 for a bad body (`since` after `until`, a status that is unknown
    or not final, an empty or too long list, a bad `after`).

    Args:
        id (UUID):
        body (RecoverBody): Body of `POST /api/v1/channels/{id}/recover`: which of the channel's
            final deliveries to
            resend.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RecoverResult
    """

    return sync_detailed(
        id=id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient,
    body: RecoverBody,
) -> Response[Problem | RecoverResult]:
    """Resends the channel's final deliveries since a time.

     Resends (as `POST /api/v1/deliveries/{id}/resend` does one: same id and `webhook-id`, a new
    attempt series) the channel's deliveries accepted in `[since, until)` whose status is in
    `status` (default `dead`) and event type in `event_types` (default any), whose payload was not
    purged, oldest first, at most `limit` (1 000) per call: `next_cursor` continues after the
    last one looked at. Idempotent while they are on their way: only final deliveries are picked,
    so a second call does not send again what the first resent until that has finished. To an
    open or paused channel they come back parked (`parked: true`). With `dry_run`: the count and
    the first 10 ids, nothing sent, nothing audited. Each real call is audited once
    (`deliveries.recovered`). 422 for a bad body (`since` after `until`, a status that is unknown
    or not final, an empty or too long list, a bad `after`).

    Args:
        id (UUID):
        body (RecoverBody): Body of `POST /api/v1/channels/{id}/recover`: which of the channel's
            final deliveries to
            resend.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RecoverResult]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: UUID,
    *,
    client: AuthenticatedClient,
    body: RecoverBody,
) -> Problem | RecoverResult | None:
    """Resends the channel's final deliveries since a time.

     Resends (as `POST /api/v1/deliveries/{id}/resend` does one: same id and `webhook-id`, a new
    attempt series) the channel's deliveries accepted in `[since, until)` whose status is in
    `status` (default `dead`) and event type in `event_types` (default any), whose payload was not
    purged, oldest first, at most `limit` (1 000) per call: `next_cursor` continues after the
    last one looked at. Idempotent while they are on their way: only final deliveries are picked,
    so a second call does not send again what the first resent until that has finished. To an
    open or paused channel they come back parked (`parked: true`). With `dry_run`: the count and
    the first 10 ids, nothing sent, nothing audited. Each real call is audited once
    (`deliveries.recovered`). 422 for a bad body (`since` after `until`, a status that is unknown
    or not final, an empty or too long list, a bad `after`).

    Args:
        id (UUID):
        body (RecoverBody): Body of `POST /api/v1/channels/{id}/recover`: which of the channel's
            final deliveries to
            resend.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RecoverResult
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
