from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.operator_patch import OperatorPatch
from ...models.problem import Problem
from ...models.tenant_view import TenantView
from ...types import Response


def _get_kwargs(
    id: UUID,
    *,
    body: OperatorPatch,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "patch",
        "url": "/api/v1/tenants/{id}".format(
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | TenantView | None:
    if response.status_code == 200:
        response_200 = TenantView.from_dict(response.json())

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

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Problem | TenantView]:
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
    body: OperatorPatch,
) -> Response[Problem | TenantView]:
    """Changes a tenant's name, tier, alert URL, `alert_on_manual`, `reject_unknown_event_types`,
    default `retry_policy` or quotas.

     `quotas` (`{channels, active_keys, deliveries_per_second, deliveries_per_day}`, each optional,
    `null` = back to the cluster default) applies from the tenant's next request; lowering a
    count below what the tenant holds removes nothing, it only refuses new ones. Audited as
    `tenant.quotas_changed`.

    Args:
        id (UUID):
        body (OperatorPatch): Body of `PATCH /api/v1/tenants/{id}` (operator): every field
            optional; `alert_url: null`
            removes it. A tier change moves the tenant's waiting deliveries to the new tier's queue.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | TenantView]
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
    body: OperatorPatch,
) -> Problem | TenantView | None:
    """Changes a tenant's name, tier, alert URL, `alert_on_manual`, `reject_unknown_event_types`,
    default `retry_policy` or quotas.

     `quotas` (`{channels, active_keys, deliveries_per_second, deliveries_per_day}`, each optional,
    `null` = back to the cluster default) applies from the tenant's next request; lowering a
    count below what the tenant holds removes nothing, it only refuses new ones. Audited as
    `tenant.quotas_changed`.

    Args:
        id (UUID):
        body (OperatorPatch): Body of `PATCH /api/v1/tenants/{id}` (operator): every field
            optional; `alert_url: null`
            removes it. A tier change moves the tenant's waiting deliveries to the new tier's queue.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | TenantView
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
    body: OperatorPatch,
) -> Response[Problem | TenantView]:
    """Changes a tenant's name, tier, alert URL, `alert_on_manual`, `reject_unknown_event_types`,
    default `retry_policy` or quotas.

     `quotas` (`{channels, active_keys, deliveries_per_second, deliveries_per_day}`, each optional,
    `null` = back to the cluster default) applies from the tenant's next request; lowering a
    count below what the tenant holds removes nothing, it only refuses new ones. Audited as
    `tenant.quotas_changed`.

    Args:
        id (UUID):
        body (OperatorPatch): Body of `PATCH /api/v1/tenants/{id}` (operator): every field
            optional; `alert_url: null`
            removes it. A tier change moves the tenant's waiting deliveries to the new tier's queue.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | TenantView]
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
    body: OperatorPatch,
) -> Problem | TenantView | None:
    """Changes a tenant's name, tier, alert URL, `alert_on_manual`, `reject_unknown_event_types`,
    default `retry_policy` or quotas.

     `quotas` (`{channels, active_keys, deliveries_per_second, deliveries_per_day}`, each optional,
    `null` = back to the cluster default) applies from the tenant's next request; lowering a
    count below what the tenant holds removes nothing, it only refuses new ones. Audited as
    `tenant.quotas_changed`.

    Args:
        id (UUID):
        body (OperatorPatch): Body of `PATCH /api/v1/tenants/{id}` (operator): every field
            optional; `alert_url: null`
            removes it. A tier change moves the tenant's waiting deliveries to the new tier's queue.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | TenantView
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
