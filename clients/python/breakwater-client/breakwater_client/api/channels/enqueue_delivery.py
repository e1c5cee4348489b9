from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.accepted import Accepted
from ...models.enqueue_one import EnqueueOne
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: UUID,
    *,
    body: EnqueueOne,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/channels/{id}/deliveries".format(
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Accepted | Problem | None:
    if response.status_code == 202:
        response_202 = Accepted.from_dict(response.json())

        return response_202

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Accepted | Problem]:
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
    body: EnqueueOne,
    idempotency_key: str | Unset = UNSET,
) -> Response[Accepted | Problem]:
    """Enqueues one delivery to the channel.

     202 with the delivery id. When the tenant's event-type catalog gives `event_type` a JSON
    Schema, `payload` must match it: else 422 `schema_violation` with `errors` naming the JSON
    pointer of each failing part (the first 5). An event type not in the catalog is accepted,
    unless the tenant set `reject_unknown_event_types` (422 on `event_type`). With an `Idempotency-Key`
    already used by this tenant, 202 with the
    earlier delivery's id and nothing new enqueued. 429 `quota_exceeded` over the tenant's
    `deliveries_per_second` or `deliveries_per_day` quota.

    Args:
        id (UUID):
        idempotency_key (str | Unset):
        body (EnqueueOne): Body of `POST /api/v1/channels/{id}/deliveries`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Accepted | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: UUID,
    *,
    client: AuthenticatedClient,
    body: EnqueueOne,
    idempotency_key: str | Unset = UNSET,
) -> Accepted | Problem | None:
    """Enqueues one delivery to the channel.

     202 with the delivery id. When the tenant's event-type catalog gives `event_type` a JSON
    Schema, `payload` must match it: else 422 `schema_violation` with `errors` naming the JSON
    pointer of each failing part (the first 5). An event type not in the catalog is accepted,
    unless the tenant set `reject_unknown_event_types` (422 on `event_type`). With an `Idempotency-Key`
    already used by this tenant, 202 with the
    earlier delivery's id and nothing new enqueued. 429 `quota_exceeded` over the tenant's
    `deliveries_per_second` or `deliveries_per_day` quota.

    Args:
        id (UUID):
        idempotency_key (str | Unset):
        body (EnqueueOne): Body of `POST /api/v1/channels/{id}/deliveries`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Accepted | Problem
    """

    return sync_detailed(
        id=id,
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient,
    body: EnqueueOne,
    idempotency_key: str | Unset = UNSET,
) -> Response[Accepted | Problem]:
    """Enqueues one delivery to the channel.

     202 with the delivery id. When the tenant's event-type catalog gives `event_type` a JSON
    Schema, `payload` must match it: else 422 `schema_violation` with `errors` naming the JSON
    pointer of each failing part (the first 5). An event type not in the catalog is accepted,
    unless the tenant set `reject_unknown_event_types` (422 on `event_type`). With an `Idempotency-Key`
    already used by this tenant, 202 with the
    earlier delivery's id and nothing new enqueued. 429 `quota_exceeded` over the tenant's
    `deliveries_per_second` or `deliveries_per_day` quota.

    Args:
        id (UUID):
        idempotency_key (str | Unset):
        body (EnqueueOne): Body of `POST /api/v1/channels/{id}/deliveries`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Accepted | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: UUID,
    *,
    client: AuthenticatedClient,
    body: EnqueueOne,
    idempotency_key: str | Unset = UNSET,
) -> Accepted | Problem | None:
    """Enqueues one delivery to the channel.

     202 with the delivery id. When the tenant's event-type catalog gives `event_type` a JSON
    Schema, `payload` must match it: else 422 `schema_violation` with `errors` naming the JSON
    pointer of each failing part (the first 5). An event type not in the catalog is accepted,
    unless the tenant set `reject_unknown_event_types` (422 on `event_type`). With an `Idempotency-Key`
    already used by this tenant, 202 with the
    earlier delivery's id and nothing new enqueued. 429 `quota_exceeded` over the tenant's
    `deliveries_per_second` or `deliveries_per_day` quota.

    Args:
        id (UUID):
        idempotency_key (str | Unset):
        body (EnqueueOne): Body of `POST /api/v1/channels/{id}/deliveries`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Accepted | Problem
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
