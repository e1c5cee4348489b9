from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.open_session import OpenSession
from ...models.opened_session import OpenedSession
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    id: UUID,
    *,
    body: OpenSession,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/tenants/{id}/portal-sessions".format(
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> OpenedSession | Problem | None:
    if response.status_code == 201:
        response_201 = OpenedSession.from_dict(response.json())

        return response_201

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

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[OpenedSession | Problem]:
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
    body: OpenSession,
) -> Response[OpenedSession | Problem]:
    """Opens a portal session for a tenant.

     `POST /api/v1/tenants/{id}/portal-sessions {scope, ttl_s?}` (operator): 201 with the
    session's `url`, shown once. 404 for a missing or deleted tenant; 422 on `scope` or `ttl_s`.

    Args:
        id (UUID):
        body (OpenSession): Body of `POST …/portal-sessions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[OpenedSession | Problem]
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
    body: OpenSession,
) -> OpenedSession | Problem | None:
    """Opens a portal session for a tenant.

     `POST /api/v1/tenants/{id}/portal-sessions {scope, ttl_s?}` (operator): 201 with the
    session's `url`, shown once. 404 for a missing or deleted tenant; 422 on `scope` or `ttl_s`.

    Args:
        id (UUID):
        body (OpenSession): Body of `POST …/portal-sessions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        OpenedSession | Problem
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
    body: OpenSession,
) -> Response[OpenedSession | Problem]:
    """Opens a portal session for a tenant.

     `POST /api/v1/tenants/{id}/portal-sessions {scope, ttl_s?}` (operator): 201 with the
    session's `url`, shown once. 404 for a missing or deleted tenant; 422 on `scope` or `ttl_s`.

    Args:
        id (UUID):
        body (OpenSession): Body of `POST …/portal-sessions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[OpenedSession | Problem]
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
    body: OpenSession,
) -> OpenedSession | Problem | None:
    """Opens a portal session for a tenant.

     `POST /api/v1/tenants/{id}/portal-sessions {scope, ttl_s?}` (operator): 201 with the
    session's `url`, shown once. 404 for a missing or deleted tenant; 422 on `scope` or `ttl_s`.

    Args:
        id (UUID):
        body (OpenSession): Body of `POST …/portal-sessions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        OpenedSession | Problem
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
