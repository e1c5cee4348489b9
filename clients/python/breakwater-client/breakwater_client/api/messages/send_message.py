from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.message_accepted import MessageAccepted
from ...models.problem import Problem
from ...models.send_message import SendMessage
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: SendMessage,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/messages",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> MessageAccepted | Problem | None:
    if response.status_code == 202:
        response_202 = MessageAccepted.from_dict(response.json())

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
) -> Response[MessageAccepted | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: SendMessage,
    idempotency_key: str | Unset = UNSET,
) -> Response[MessageAccepted | Problem]:
    """Sends one event to every channel that subscribes to its type.

     `POST /api/v1/messages` (tenant key; optional `Idempotency-Key` header, up to 200 visible
    ASCII characters, unique per tenant among messages): 202 with the message id and one delivery
    per channel whose `event_types` filter matches (channels without a filter get every type)
    and whose payload `filter` (JSON Logic over `{event_type, payload}`), if any, is truthy,
    limited to `channels` when given. No subscribed channel: 202 with no deliveries. Errors: 422
    `schema_violation` when the tenant's event-type catalog gives the type a JSON Schema that
    `payload` fails (`errors` names the JSON pointer of each failing part, the first 5), 422 on
    `event_type` for a type not in the catalog when the tenant sets
    `reject_unknown_event_types`, 422 for a bad field or a `channels` id that is not one of the tenant's
    channels (field
    `channels`; the same for another tenant's id as for a missing one), 422 on `payload` when
    the channels' filters take longer than 500 ms in all to evaluate on it (nothing is sent),
    413 for a payload over
    `api.max_payload_bytes`, 409 for an idempotency key reused with another request. One
    transaction, a bounded number of statements whatever the number of channels; it counts as
    one request against the tenant's ingress limit, and as one delivery per channel against its
    `deliveries_per_second` and `deliveries_per_day` quotas: a fan-out over either is refused
    whole (429 `quota_exceeded`, no delivery created). Not audited: like an enqueue, the message and
    its deliveries are their own record.

    Args:
        idempotency_key (str | Unset):
        body (SendMessage): Body of `POST /api/v1/messages`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MessageAccepted | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: SendMessage,
    idempotency_key: str | Unset = UNSET,
) -> MessageAccepted | Problem | None:
    """Sends one event to every channel that subscribes to its type.

     `POST /api/v1/messages` (tenant key; optional `Idempotency-Key` header, up to 200 visible
    ASCII characters, unique per tenant among messages): 202 with the message id and one delivery
    per channel whose `event_types` filter matches (channels without a filter get every type)
    and whose payload `filter` (JSON Logic over `{event_type, payload}`), if any, is truthy,
    limited to `channels` when given. No subscribed channel: 202 with no deliveries. Errors: 422
    `schema_violation` when the tenant's event-type catalog gives the type a JSON Schema that
    `payload` fails (`errors` names the JSON pointer of each failing part, the first 5), 422 on
    `event_type` for a type not in the catalog when the tenant sets
    `reject_unknown_event_types`, 422 for a bad field or a `channels` id that is not one of the tenant's
    channels (field
    `channels`; the same for another tenant's id as for a missing one), 422 on `payload` when
    the channels' filters take longer than 500 ms in all to evaluate on it (nothing is sent),
    413 for a payload over
    `api.max_payload_bytes`, 409 for an idempotency key reused with another request. One
    transaction, a bounded number of statements whatever the number of channels; it counts as
    one request against the tenant's ingress limit, and as one delivery per channel against its
    `deliveries_per_second` and `deliveries_per_day` quotas: a fan-out over either is refused
    whole (429 `quota_exceeded`, no delivery created). Not audited: like an enqueue, the message and
    its deliveries are their own record.

    Args:
        idempotency_key (str | Unset):
        body (SendMessage): Body of `POST /api/v1/messages`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MessageAccepted | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: SendMessage,
    idempotency_key: str | Unset = UNSET,
) -> Response[MessageAccepted | Problem]:
    """Sends one event to every channel that subscribes to its type.

     `POST /api/v1/messages` (tenant key; optional `Idempotency-Key` header, up to 200 visible
    ASCII characters, unique per tenant among messages): 202 with the message id and one delivery
    per channel whose `event_types` filter matches (channels without a filter get every type)
    and whose payload `filter` (JSON Logic over `{event_type, payload}`), if any, is truthy,
    limited to `channels` when given. No subscribed channel: 202 with no deliveries. Errors: 422
    `schema_violation` when the tenant's event-type catalog gives the type a JSON Schema that
    `payload` fails (`errors` names the JSON pointer of each failing part, the first 5), 422 on
    `event_type` for a type not in the catalog when the tenant sets
    `reject_unknown_event_types`, 422 for a bad field or a `channels` id that is not one of the tenant's
    channels (field
    `channels`; the same for another tenant's id as for a missing one), 422 on `payload` when
    the channels' filters take longer than 500 ms in all to evaluate on it (nothing is sent),
    413 for a payload over
    `api.max_payload_bytes`, 409 for an idempotency key reused with another request. One
    transaction, a bounded number of statements whatever the number of channels; it counts as
    one request against the tenant's ingress limit, and as one delivery per channel against its
    `deliveries_per_second` and `deliveries_per_day` quotas: a fan-out over either is refused
    whole (429 `quota_exceeded`, no delivery created). Not audited: like an enqueue, the message and
    its deliveries are their own record.

    Args:
        idempotency_key (str | Unset):
        body (SendMessage): Body of `POST /api/v1/messages`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MessageAccepted | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: SendMessage,
    idempotency_key: str | Unset = UNSET,
) -> MessageAccepted | Problem | None:
    """Sends one event to every channel that subscribes to its type.

     `POST /api/v1/messages` (tenant key; optional `Idempotency-Key` header, up to 200 visible
    ASCII characters, unique per tenant among messages): 202 with the message id and one delivery
    per channel whose `event_types` filter matches (channels without a filter get every type)
    and whose payload `filter` (JSON Logic over `{event_type, payload}`), if any, is truthy,
    limited to `channels` when given. No subscribed channel: 202 with no deliveries. Errors: 422
    `schema_violation` when the tenant's event-type catalog gives the type a JSON Schema that
    `payload` fails (`errors` names the JSON pointer of each failing part, the first 5), 422 on
    `event_type` for a type not in the catalog when the tenant sets
    `reject_unknown_event_types`, 422 for a bad field or a `channels` id that is not one of the tenant's
    channels (field
    `channels`; the same for another tenant's id as for a missing one), 422 on `payload` when
    the channels' filters take longer than 500 ms in all to evaluate on it (nothing is sent),
    413 for a payload over
    `api.max_payload_bytes`, 409 for an idempotency key reused with another request. One
    transaction, a bounded number of statements whatever the number of channels; it counts as
    one request against the tenant's ingress limit, and as one delivery per channel against its
    `deliveries_per_second` and `deliveries_per_day` quotas: a fan-out over either is refused
    whole (429 `quota_exceeded`, no delivery created). Not audited: like an enqueue, the message and
    its deliveries are their own record.

    Args:
        idempotency_key (str | Unset):
        body (SendMessage): Body of `POST /api/v1/messages`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MessageAccepted | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
