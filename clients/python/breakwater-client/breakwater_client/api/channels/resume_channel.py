from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.channel_view import ChannelView
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: UUID,
    *,
    reason: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["reason"] = reason

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/channels/{id}/resume".format(
            id=quote(str(id), safe=""),
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
) -> Response[ChannelView | Problem]:
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
    reason: str | Unset = UNSET,
) -> Response[ChannelView | Problem]:
    """Resumes a paused channel: closes its circuit and releases every parked delivery; or, when
    the pause began while the circuit was open or half-open, returns it to `open` with its probe
    due at once (a pause and a resume never close a breaker without a probe).

     One UPDATE releases the whole backlog. Idempotent (a repeated resume of a closed channel
    changes nothing). 200 with the channel; 409 while an operator holds the channel's circuit
    (`operator_hold`), and for a channel that is not paused but open or half-open (the circuit
    breaker's: a probe closes it), which includes a repeated resume of one that went back to
    open.

    Args:
        id (UUID):
        reason (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ChannelView | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        reason=reason,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: UUID,
    *,
    client: AuthenticatedClient,
    reason: str | Unset = UNSET,
) -> ChannelView | Problem | None:
    """Resumes a paused channel: closes its circuit and releases every parked delivery; or, when
    the pause began while the circuit was open or half-open, returns it to `open` with its probe
    due at once (a pause and a resume never close a breaker without a probe).

     One UPDATE releases the whole backlog. Idempotent (a repeated resume of a closed channel
    changes nothing). 200 with the channel; 409 while an operator holds the channel's circuit
    (`operator_hold`), and for a channel that is not paused but open or half-open (the circuit
    breaker's: a probe closes it), which includes a repeated resume of one that went back to
    open.

    Args:
        id (UUID):
        reason (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ChannelView | Problem
    """

    return sync_detailed(
        id=id,
        client=client,
        reason=reason,
    ).parsed


async def asyncio_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient,
    reason: str | Unset = UNSET,
) -> Response[ChannelView | Problem]:
    """Resumes a paused channel: closes its circuit and releases every parked delivery; or, when
    the pause began while the circuit was open or half-open, returns it to `open` with its probe
    due at once (a pause and a resume never close a breaker without a probe).

     One UPDATE releases the whole backlog. Idempotent (a repeated resume of a closed channel
    changes nothing). 200 with the channel; 409 while an operator holds the channel's circuit
    (`operator_hold`), and for a channel that is not paused but open or half-open (the circuit
    breaker's: a probe closes it), which includes a repeated resume of one that went back to
    open.

    Args:
        id (UUID):
        reason (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ChannelView | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        reason=reason,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: UUID,
    *,
    client: AuthenticatedClient,
    reason: str | Unset = UNSET,
) -> ChannelView | Problem | None:
    """Resumes a paused channel: closes its circuit and releases every parked delivery; or, when
    the pause began while the circuit was open or half-open, returns it to `open` with its probe
    due at once (a pause and a resume never close a breaker without a probe).

     One UPDATE releases the whole backlog. Idempotent (a repeated resume of a closed channel
    changes nothing). 200 with the channel; 409 while an operator holds the channel's circuit
    (`operator_hold`), and for a channel that is not paused but open or half-open (the circuit
    breaker's: a probe closes it), which includes a repeated resume of one that went back to
    open.

    Args:
        id (UUID):
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
            client=client,
            reason=reason,
        )
    ).parsed
