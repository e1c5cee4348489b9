from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.rotate_secret import RotateSecret
from ...models.rotated_secret import RotatedSecret
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: UUID,
    *,
    body: RotateSecret | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/channels/{id}/secret/rotate".format(
            id=quote(str(id), safe=""),
        ),
    }

    if not isinstance(body, Unset):
        _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | RotatedSecret | None:
    if response.status_code == 200:
        response_200 = RotatedSecret.from_dict(response.json())

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
) -> Response[Problem | RotatedSecret]:
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
    body: RotateSecret | Unset = UNSET,
) -> Response[Problem | RotatedSecret]:
    """Rotates the channel's signing secret, with a grace period for the old one.

     `POST /api/v1/channels/{id}/secret/rotate {grace_ms?}`: a fresh signing secret, shown once in
    the answer (200 `{channel_id, signing_secret, previous_secret_expires_at}`). For the grace
    period every request carries `webhook-signature: v1,<new> v1,<old>`, so a receiver holding
    either secret verifies; after it only `v1,<new>`. Audited as `channel.secret_rotated` (the
    grace period, never a secret). 404 for another tenant's channel; 422 for a `grace_ms` out of
    range. See [`channels::rotate_secret`].

    Args:
        id (UUID):
        body (RotateSecret | Unset): Body of `POST /api/v1/channels/{id}/secret/rotate` (optional:
            no body, or `{}`, is the
            default grace period).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RotatedSecret]
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
    body: RotateSecret | Unset = UNSET,
) -> Problem | RotatedSecret | None:
    """Rotates the channel's signing secret, with a grace period for the old one.

     `POST /api/v1/channels/{id}/secret/rotate {grace_ms?}`: a fresh signing secret, shown once in
    the answer (200 `{channel_id, signing_secret, previous_secret_expires_at}`). For the grace
    period every request carries `webhook-signature: v1,<new> v1,<old>`, so a receiver holding
    either secret verifies; after it only `v1,<new>`. Audited as `channel.secret_rotated` (the
    grace period, never a secret). 404 for another tenant's channel; 422 for a `grace_ms` out of
    range. See [`channels::rotate_secret`].

    Args:
        id (UUID):
        body (RotateSecret | Unset): Body of `POST /api/v1/channels/{id}/secret/rotate` (optional:
            no body, or `{}`, is the
            default grace period).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RotatedSecret
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
    body: RotateSecret | Unset = UNSET,
) -> Response[Problem | RotatedSecret]:
    """Rotates the channel's signing secret, with a grace period for the old one.

     `POST /api/v1/channels/{id}/secret/rotate {grace_ms?}`: a fresh signing secret, shown once in
    the answer (200 `{channel_id, signing_secret, previous_secret_expires_at}`). For the grace
    period every request carries `webhook-signature: v1,<new> v1,<old>`, so a receiver holding
    either secret verifies; after it only `v1,<new>`. Audited as `channel.secret_rotated` (the
    grace period, never a secret). 404 for another tenant's channel; 422 for a `grace_ms` out of
    range. See [`channels::rotate_secret`].

    Args:
        id (UUID):
        body (RotateSecret | Unset): Body of `POST /api/v1/channels/{id}/secret/rotate` (optional:
            no body, or `{}`, is the
            default grace period).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RotatedSecret]
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
    body: RotateSecret | Unset = UNSET,
) -> Problem | RotatedSecret | None:
    """Rotates the channel's signing secret, with a grace period for the old one.

     `POST /api/v1/channels/{id}/secret/rotate {grace_ms?}`: a fresh signing secret, shown once in
    the answer (200 `{channel_id, signing_secret, previous_secret_expires_at}`). For the grace
    period every request carries `webhook-signature: v1,<new> v1,<old>`, so a receiver holding
    either secret verifies; after it only `v1,<new>`. Audited as `channel.secret_rotated` (the
    grace period, never a secret). 404 for another tenant's channel; 422 for a `grace_ms` out of
    range. See [`channels::rotate_secret`].

    Args:
        id (UUID):
        body (RotateSecret | Unset): Body of `POST /api/v1/channels/{id}/secret/rotate` (optional:
            no body, or `{}`, is the
            default grace period).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RotatedSecret
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
