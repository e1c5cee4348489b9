from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.admin_channel_action_action import AdminChannelActionAction
from ...models.channel_view import ChannelView
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: UUID,
    action: AdminChannelActionAction,
    *,
    reason: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["reason"] = reason

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/admin/channels/{id}/{action}".format(
            id=quote(str(id), safe=""),
            action=quote(str(action), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ChannelView | Problem | None:
    if response.status_code == 200:
        response_200 = ChannelView.from_dict(response.json())

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

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

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
) -> Response[ChannelView | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    id: UUID,
    action: AdminChannelActionAction,
    *,
    client: AuthenticatedClient,
    reason: str | Unset = UNSET,
) -> Response[ChannelView | Problem]:
    """Forces a channel's circuit open or closed, or pauses or resumes it.

     `POST /api/v1/admin/channels/{id}/{open|close|pause|resume}?reason=`: audited as `operator`.
    Idempotent. Any other action is 404. A pause or an open holds the circuit (`operator_hold`):
    the tenant can neither pause nor resume the channel until a resume or close here (or a probe
    after an open) closes it. 409 to resume a channel that is open or half-open, not paused. A
    close also ends a `Retry-After` hold, in any state; a resume of a pause that began while the
    circuit was open returns it to `open` with a probe at once (as the tenant's).

    Args:
        id (UUID):
        action (AdminChannelActionAction): A manual action on a channel's circuit, by the
            operator.
        reason (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ChannelView | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        action=action,
        reason=reason,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: UUID,
    action: AdminChannelActionAction,
    *,
    client: AuthenticatedClient,
    reason: str | Unset = UNSET,
) -> ChannelView | Problem | None:
    """Forces a channel's circuit open or closed, or pauses or resumes it.

     `POST /api/v1/admin/channels/{id}/{open|close|pause|resume}?reason=`: audited as `operator`.
    Idempotent. Any other action is 404. A pause or an open holds the circuit (`operator_hold`):
    the tenant can neither pause nor resume the channel until a resume or close here (or a probe
    after an open) closes it. 409 to resume a channel that is open or half-open, not paused. A
    close also ends a `Retry-After` hold, in any state; a resume of a pause that began while the
    circuit was open returns it to `open` with a probe at once (as the tenant's).

    Args:
        id (UUID):
        action (AdminChannelActionAction): A manual action on a channel's circuit, by the
            operator.
        reason (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ChannelView | Problem
    """

    return sync_detailed(
        id=id,
        action=action,
        client=client,
        reason=reason,
    ).parsed


async def asyncio_detailed(
    id: UUID,
    action: AdminChannelActionAction,
    *,
    client: AuthenticatedClient,
    reason: str | Unset = UNSET,
) -> Response[ChannelView | Problem]:
    """Forces a channel's circuit open or closed, or pauses or resumes it.

     `POST /api/v1/admin/channels/{id}/{open|close|pause|resume}?reason=`: audited as `operator`.
    Idempotent. Any other action is 404. A pause or an open holds the circuit (`operator_hold`):
    the tenant can neither pause nor resume the channel until a resume or close here (or a probe
    after an open) closes it. 409 to resume a channel that is open or half-open, not paused. A
    close also ends a `Retry-After` hold, in any state; a resume of a pause that began while the
    circuit was open returns it to `open` with a probe at once (as the tenant's).

    Args:
        id (UUID):
        action (AdminChannelActionAction): A manual action on a channel's circuit, by the
            operator.
        reason (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ChannelView | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        action=action,
        reason=reason,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: UUID,
    action: AdminChannelActionAction,
    *,
    client: AuthenticatedClient,
    reason: str | Unset = UNSET,
) -> ChannelView | Problem | None:
    """Forces a channel's circuit open or closed, or pauses or resumes it.

     `POST /api/v1/admin/channels/{id}/{open|close|pause|resume}?reason=`: audited as `operator`.
    Idempotent. Any other action is 404. A pause or an open holds the circuit (`operator_hold`):
    the tenant can neither pause nor resume the channel until a resume or close here (or a probe
    after an open) closes it. 409 to resume a channel that is open or half-open, not paused. A
    close also ends a `Retry-After` hold, in any state; a resume of a pause that began while the
    circuit was open returns it to `open` with a probe at once (as the tenant's).

    Args:
        id (UUID):
        action (AdminChannelActionAction): A manual action on a channel's circuit, by the
            operator.
        reason (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ChannelView | Problem
    """

    return (
        await asyncio_detailed(
            id=id,
            action=action,
            client=client,
            reason=reason,
        )
    ).parsed
