from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.filter_test import FilterTest
from ...models.filter_test_result import FilterTestResult
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    id: UUID,
    *,
    body: FilterTest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/channels/{id}/filter/test".format(
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> FilterTestResult | Problem | None:
    if response.status_code == 200:
        response_200 = FilterTestResult.from_dict(response.json())

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
) -> Response[FilterTestResult | Problem]:
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
    body: FilterTest,
) -> Response[FilterTestResult | Problem]:
    """Tests the channel's payload filter against a sample message.

     `POST /api/v1/channels/{id}/filter/test` with `{payload, event_type?}`: evaluates the
    channel's `filter` (a JSON Logic rule) on `{"event_type": …, "payload": …}` exactly as a
    fan-out does, and answers `{matches, has_filter, error}`. Nothing is stored, sent or audited.
    404 for another tenant's channel; 422 for a bad `event_type`, 413 for a payload over
    `api.max_payload_bytes`.

    Args:
        id (UUID):
        body (FilterTest): Body of `POST /api/v1/channels/{id}/filter/test`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FilterTestResult | Problem]
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
    body: FilterTest,
) -> FilterTestResult | Problem | None:
    """Tests the channel's payload filter against a sample message.

     `POST /api/v1/channels/{id}/filter/test` with `{payload, event_type?}`: evaluates the
    channel's `filter` (a JSON Logic rule) on `{"event_type": …, "payload": …}` exactly as a
    fan-out does, and answers `{matches, has_filter, error}`. Nothing is stored, sent or audited.
    404 for another tenant's channel; 422 for a bad `event_type`, 413 for a payload over
    `api.max_payload_bytes`.

    Args:
        id (UUID):
        body (FilterTest): Body of `POST /api/v1/channels/{id}/filter/test`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FilterTestResult | Problem
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
    body: FilterTest,
) -> Response[FilterTestResult | Problem]:
    """Tests the channel's payload filter against a sample message.

     `POST /api/v1/channels/{id}/filter/test` with `{payload, event_type?}`: evaluates the
    channel's `filter` (a JSON Logic rule) on `{"event_type": …, "payload": …}` exactly as a
    fan-out does, and answers `{matches, has_filter, error}`. Nothing is stored, sent or audited.
    404 for another tenant's channel; 422 for a bad `event_type`, 413 for a payload over
    `api.max_payload_bytes`.

    Args:
        id (UUID):
        body (FilterTest): Body of `POST /api/v1/channels/{id}/filter/test`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FilterTestResult | Problem]
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
    body: FilterTest,
) -> FilterTestResult | Problem | None:
    """Tests the channel's payload filter against a sample message.

     `POST /api/v1/channels/{id}/filter/test` with `{payload, event_type?}`: evaluates the
    channel's `filter` (a JSON Logic rule) on `{"event_type": …, "payload": …}` exactly as a
    fan-out does, and answers `{matches, has_filter, error}`. Nothing is stored, sent or audited.
    404 for another tenant's channel; 422 for a bad `event_type`, 413 for a payload over
    `api.max_payload_bytes`.

    Args:
        id (UUID):
        body (FilterTest): Body of `POST /api/v1/channels/{id}/filter/test`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FilterTestResult | Problem
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
