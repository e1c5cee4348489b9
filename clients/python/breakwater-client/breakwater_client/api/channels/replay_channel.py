from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.replay_window import ReplayWindow
from ...models.replayed import Replayed
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: UUID,
    *,
    body: ReplayWindow | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/channels/{id}/replay".format(
            id=quote(str(id), safe=""),
        ),
    }

    if not isinstance(body, Unset):
        _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | Replayed | None:
    if response.status_code == 200:
        response_200 = Replayed.from_dict(response.json())

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | Replayed]:
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
    body: ReplayWindow | Unset = UNSET,
) -> Response[Problem | Replayed]:
    """Replays the channel's dead deliveries from a window.

     Re-enqueues the deliveries that went dead in the window (at most 10 000 per call). 200 with
    the count and ids. No body (or `{}`) replays the last 24 h.

    Args:
        id (UUID):
        body (ReplayWindow | Unset): Body of `POST /api/v1/channels/{id}/replay`: the window in
            which deliveries went dead
            (RFC 3339; default: the last 24 h up to now).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Replayed]
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
    body: ReplayWindow | Unset = UNSET,
) -> Problem | Replayed | None:
    """Replays the channel's dead deliveries from a window.

     Re-enqueues the deliveries that went dead in the window (at most 10 000 per call). 200 with
    the count and ids. No body (or `{}`) replays the last 24 h.

    Args:
        id (UUID):
        body (ReplayWindow | Unset): Body of `POST /api/v1/channels/{id}/replay`: the window in
            which deliveries went dead
            (RFC 3339; default: the last 24 h up to now).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Replayed
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
    body: ReplayWindow | Unset = UNSET,
) -> Response[Problem | Replayed]:
    """Replays the channel's dead deliveries from a window.

     Re-enqueues the deliveries that went dead in the window (at most 10 000 per call). 200 with
    the count and ids. No body (or `{}`) replays the last 24 h.

    Args:
        id (UUID):
        body (ReplayWindow | Unset): Body of `POST /api/v1/channels/{id}/replay`: the window in
            which deliveries went dead
            (RFC 3339; default: the last 24 h up to now).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Replayed]
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
    body: ReplayWindow | Unset = UNSET,
) -> Problem | Replayed | None:
    """Replays the channel's dead deliveries from a window.

     Re-enqueues the deliveries that went dead in the window (at most 10 000 per call). 200 with
    the count and ids. No body (or `{}`) replays the last 24 h.

    Args:
        id (UUID):
        body (ReplayWindow | Unset): Body of `POST /api/v1/channels/{id}/replay`: the window in
            which deliveries went dead
            (RFC 3339; default: the last 24 h up to now).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Replayed
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
