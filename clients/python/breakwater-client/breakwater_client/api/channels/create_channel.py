from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.create_channel import CreateChannel
from ...models.created_channel import CreatedChannel
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    *,
    body: CreateChannel,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/channels",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> CreatedChannel | Problem | None:
    if response.status_code == 201:
        response_201 = CreatedChannel.from_dict(response.json())

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

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

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
) -> Response[CreatedChannel | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: CreateChannel,
) -> Response[CreatedChannel | Problem]:
    """Creates a channel. Its signing secret is in the response, shown once.

     409 `quota_exceeded` (`quota: "channels"`) when the tenant already holds its `channels` quota
    of live channels (default `api.quota_channels`, 1000): nothing is created.

    Args:
        body (CreateChannel): Body of `POST /api/v1/channels`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CreatedChannel | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: CreateChannel,
) -> CreatedChannel | Problem | None:
    """Creates a channel. Its signing secret is in the response, shown once.

     409 `quota_exceeded` (`quota: "channels"`) when the tenant already holds its `channels` quota
    of live channels (default `api.quota_channels`, 1000): nothing is created.

    Args:
        body (CreateChannel): Body of `POST /api/v1/channels`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CreatedChannel | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: CreateChannel,
) -> Response[CreatedChannel | Problem]:
    """Creates a channel. Its signing secret is in the response, shown once.

     409 `quota_exceeded` (`quota: "channels"`) when the tenant already holds its `channels` quota
    of live channels (default `api.quota_channels`, 1000): nothing is created.

    Args:
        body (CreateChannel): Body of `POST /api/v1/channels`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CreatedChannel | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: CreateChannel,
) -> CreatedChannel | Problem | None:
    """Creates a channel. Its signing secret is in the response, shown once.

     409 `quota_exceeded` (`quota: "channels"`) when the tenant already holds its `channels` quota
    of live channels (default `api.quota_channels`, 1000): nothing is created.

    Args:
        body (CreateChannel): Body of `POST /api/v1/channels`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CreatedChannel | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
