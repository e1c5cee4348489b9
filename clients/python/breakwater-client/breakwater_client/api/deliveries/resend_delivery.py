from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.delivery_view import DeliveryView
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    id: UUID,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/deliveries/{id}/resend".format(
            id=quote(str(id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> DeliveryView | Problem | None:
    if response.status_code == 202:
        response_202 = DeliveryView.from_dict(response.json())

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
) -> Response[DeliveryView | Problem]:
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
) -> Response[DeliveryView | Problem]:
    """Resends one final delivery.

     A new attempt series of a `delivered`, `dead` or `cancelled` delivery whose payload still
    exists: it goes back to `pending` (or `paused`, parked, when its channel's circuit is open or
    paused: it is sent when the channel resumes or its probe closes the circuit) with a fresh set
    of attempts. It keeps its id, attempt log and `webhook-id` (the delivery id, or its
    message's id): Standard Webhooks has `webhook-id` identify the message, so a receiver that
    deduplicates by it sees the message it already has (README, "Resend and recover"). 202 with
    the delivery; 409 `not_final` for a delivery still on its way, `payload_purged` once its
    payload was purged, `conflict` when its channel was deleted. Audited as `delivery.resent`.

    Args:
        id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[DeliveryView | Problem]
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
) -> DeliveryView | Problem | None:
    """Resends one final delivery.

     A new attempt series of a `delivered`, `dead` or `cancelled` delivery whose payload still
    exists: it goes back to `pending` (or `paused`, parked, when its channel's circuit is open or
    paused: it is sent when the channel resumes or its probe closes the circuit) with a fresh set
    of attempts. It keeps its id, attempt log and `webhook-id` (the delivery id, or its
    message's id): Standard Webhooks has `webhook-id` identify the message, so a receiver that
    deduplicates by it sees the message it already has (README, "Resend and recover"). 202 with
    the delivery; 409 `not_final` for a delivery still on its way, `payload_purged` once its
    payload was purged, `conflict` when its channel was deleted. Audited as `delivery.resent`.

    Args:
        id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        DeliveryView | Problem
    """

    return sync_detailed(
        id=id,
        client=client,
    ).parsed


async def asyncio_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[DeliveryView | Problem]:
    """Resends one final delivery.

     A new attempt series of a `delivered`, `dead` or `cancelled` delivery whose payload still
    exists: it goes back to `pending` (or `paused`, parked, when its channel's circuit is open or
    paused: it is sent when the channel resumes or its probe closes the circuit) with a fresh set
    of attempts. It keeps its id, attempt log and `webhook-id` (the delivery id, or its
    message's id): Standard Webhooks has `webhook-id` identify the message, so a receiver that
    deduplicates by it sees the message it already has (README, "Resend and recover"). 202 with
    the delivery; 409 `not_final` for a delivery still on its way, `payload_purged` once its
    payload was purged, `conflict` when its channel was deleted. Audited as `delivery.resent`.

    Args:
        id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[DeliveryView | Problem]
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
) -> DeliveryView | Problem | None:
    """Resends one final delivery.

     A new attempt series of a `delivered`, `dead` or `cancelled` delivery whose payload still
    exists: it goes back to `pending` (or `paused`, parked, when its channel's circuit is open or
    paused: it is sent when the channel resumes or its probe closes the circuit) with a fresh set
    of attempts. It keeps its id, attempt log and `webhook-id` (the delivery id, or its
    message's id): Standard Webhooks has `webhook-id` identify the message, so a receiver that
    deduplicates by it sees the message it already has (README, "Resend and recover"). 202 with
    the delivery; 409 `not_final` for a delivery still on its way, `payload_purged` once its
    payload was purged, `conflict` when its channel was deleted. Audited as `delivery.resent`.

    Args:
        id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        DeliveryView | Problem
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
        )
    ).parsed
