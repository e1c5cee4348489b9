from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.self_patch import SelfPatch
from ...models.tenant_quotas import TenantQuotas
from ...types import Response


def _get_kwargs(
    *,
    body: SelfPatch,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "patch",
        "url": "/api/v1/tenant",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | TenantQuotas | None:
    if response.status_code == 200:
        response_200 = TenantQuotas.from_dict(response.json())

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
) -> Response[Problem | TenantQuotas]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: SelfPatch,
) -> Response[Problem | TenantQuotas]:
    """Changes the calling tenant's alert URL, `alert_on_manual`, `reject_unknown_event_types` or
    the default `retry_policy` of its channels, or `alert_events` (its delivery-level alert
    events: see the README's "Delivery events").
    Not its quotas: a body with
    `quotas` is a 422 `invalid_body` (unknown field), since only the operator sets them.

    Args:
        body (SelfPatch): Body of `PATCH /api/v1/tenant` (the tenant itself): its alert URL
            (`null` removes it) and
            whether its own pause and resume alert.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | TenantQuotas]
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
    body: SelfPatch,
) -> Problem | TenantQuotas | None:
    """Changes the calling tenant's alert URL, `alert_on_manual`, `reject_unknown_event_types` or
    the default `retry_policy` of its channels, or `alert_events` (its delivery-level alert
    events: see the README's "Delivery events").
    Not its quotas: a body with
    `quotas` is a 422 `invalid_body` (unknown field), since only the operator sets them.

    Args:
        body (SelfPatch): Body of `PATCH /api/v1/tenant` (the tenant itself): its alert URL
            (`null` removes it) and
            whether its own pause and resume alert.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | TenantQuotas
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: SelfPatch,
) -> Response[Problem | TenantQuotas]:
    """Changes the calling tenant's alert URL, `alert_on_manual`, `reject_unknown_event_types` or
    the default `retry_policy` of its channels, or `alert_events` (its delivery-level alert
    events: see the README's "Delivery events").
    Not its quotas: a body with
    `quotas` is a 422 `invalid_body` (unknown field), since only the operator sets them.

    Args:
        body (SelfPatch): Body of `PATCH /api/v1/tenant` (the tenant itself): its alert URL
            (`null` removes it) and
            whether its own pause and resume alert.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | TenantQuotas]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: SelfPatch,
) -> Problem | TenantQuotas | None:
    """Changes the calling tenant's alert URL, `alert_on_manual`, `reject_unknown_event_types` or
    the default `retry_policy` of its channels, or `alert_events` (its delivery-level alert
    events: see the README's "Delivery events").
    Not its quotas: a body with
    `quotas` is a 422 `invalid_body` (unknown field), since only the operator sets them.

    Args:
        body (SelfPatch): Body of `PATCH /api/v1/tenant` (the tenant itself): its alert URL
            (`null` removes it) and
            whether its own pause and resume alert.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | TenantQuotas
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
