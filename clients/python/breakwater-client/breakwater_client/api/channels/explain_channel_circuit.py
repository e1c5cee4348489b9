from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.explanation import Explanation
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    id: UUID,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/channels/{id}/circuit/explain".format(
            id=quote(str(id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Explanation | Problem | None:
    if response.status_code == 200:
        response_200 = Explanation.from_dict(response.json())

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
) -> Response[Explanation | Problem]:
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
) -> Response[Explanation | Problem]:
    """Explains the channel's breaker from its settings in force (its overrides, its retry policy
    in force, the cluster defaults and the service configuration): how many requests a dead
    endpoint gets before the circuit opens (refused, timing out, 5xx), when the open circuit
    probes it, the longest a delivery waits before it is dead, and warnings for settings that
    fight each other (a timeout longer than the cooldown, a schedule that outlives the
    retention, a rate limit too slow for the circuit's window, …). Nothing is sent or changed.

    Args:
        id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Explanation | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: UUID,
    *,
    client: AuthenticatedClient,
) -> Explanation | Problem | None:
    """Explains the channel's breaker from its settings in force (its overrides, its retry policy
    in force, the cluster defaults and the service configuration): how many requests a dead
    endpoint gets before the circuit opens (refused, timing out, 5xx), when the open circuit
    probes it, the longest a delivery waits before it is dead, and warnings for settings that
    fight each other (a timeout longer than the cooldown, a schedule that outlives the
    retention, a rate limit too slow for the circuit's window, …). Nothing is sent or changed.

    Args:
        id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Explanation | Problem
    """

    return sync_detailed(
        id=id,
        client=client,
    ).parsed


async def asyncio_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Explanation | Problem]:
    """Explains the channel's breaker from its settings in force (its overrides, its retry policy
    in force, the cluster defaults and the service configuration): how many requests a dead
    endpoint gets before the circuit opens (refused, timing out, 5xx), when the open circuit
    probes it, the longest a delivery waits before it is dead, and warnings for settings that
    fight each other (a timeout longer than the cooldown, a schedule that outlives the
    retention, a rate limit too slow for the circuit's window, …). Nothing is sent or changed.

    Args:
        id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Explanation | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: UUID,
    *,
    client: AuthenticatedClient,
) -> Explanation | Problem | None:
    """Explains the channel's breaker from its settings in force (its overrides, its retry policy
    in force, the cluster defaults and the service configuration): how many requests a dead
    endpoint gets before the circuit opens (refused, timing out, 5xx), when the open circuit
    probes it, the longest a delivery waits before it is dead, and warnings for settings that
    fight each other (a timeout longer than the cooldown, a schedule that outlives the
    retention, a rate limit too slow for the circuit's window, …). Nothing is sent or changed.

    Args:
        id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Explanation | Problem
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
        )
    ).parsed
