from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.page_api_key import PageApiKey
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    include_revoked: bool | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["include_revoked"] = include_revoked

    params["after"] = after

    params["limit"] = limit

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/tenant/keys",
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> PageApiKey | Problem | None:
    if response.status_code == 200:
        response_200 = PageApiKey.from_dict(response.json())

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
) -> Response[PageApiKey | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    include_revoked: bool | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> Response[PageApiKey | Problem]:
    """Lists the calling tenant's API keys (never the keys themselves), oldest first.

     `GET /api/v1/tenant/keys?include_revoked=&after=&limit=`, paged by cursor.

    Args:
        include_revoked (bool | Unset):
        after (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageApiKey | Problem]
    """

    kwargs = _get_kwargs(
        include_revoked=include_revoked,
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
    include_revoked: bool | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> PageApiKey | Problem | None:
    """Lists the calling tenant's API keys (never the keys themselves), oldest first.

     `GET /api/v1/tenant/keys?include_revoked=&after=&limit=`, paged by cursor.

    Args:
        include_revoked (bool | Unset):
        after (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageApiKey | Problem
    """

    return sync_detailed(
        client=client,
        include_revoked=include_revoked,
        after=after,
        limit=limit,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    include_revoked: bool | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> Response[PageApiKey | Problem]:
    """Lists the calling tenant's API keys (never the keys themselves), oldest first.

     `GET /api/v1/tenant/keys?include_revoked=&after=&limit=`, paged by cursor.

    Args:
        include_revoked (bool | Unset):
        after (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageApiKey | Problem]
    """

    kwargs = _get_kwargs(
        include_revoked=include_revoked,
        after=after,
        limit=limit,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    include_revoked: bool | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> PageApiKey | Problem | None:
    """Lists the calling tenant's API keys (never the keys themselves), oldest first.

     `GET /api/v1/tenant/keys?include_revoked=&after=&limit=`, paged by cursor.

    Args:
        include_revoked (bool | Unset):
        after (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageApiKey | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            include_revoked=include_revoked,
            after=after,
            limit=limit,
        )
    ).parsed
