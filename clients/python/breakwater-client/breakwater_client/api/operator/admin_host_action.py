from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.admin_host_action_action import AdminHostActionAction
from ...models.host_circuit import HostCircuit
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    host: str,
    action: AdminHostActionAction,
    *,
    reason: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["reason"] = reason

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/admin/hosts/{host}/{action}".format(
            host=quote(str(host), safe=""),
            action=quote(str(action), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> HostCircuit | Problem | None:
    if response.status_code == 200:
        response_200 = HostCircuit.from_dict(response.json())

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
) -> Response[HostCircuit | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    host: str,
    action: AdminHostActionAction,
    *,
    client: AuthenticatedClient,
    reason: str | Unset = UNSET,
) -> Response[HostCircuit | Problem]:
    """Forces a host circuit open or closed.

     `POST /api/v1/admin/hosts/{host}/{open|close}?reason=`: audited as `operator`, alerted to
    every tenant with channels on the host. Idempotent: a host already there changes nothing and
    audits nothing. Any other action is 404.

    Args:
        host (str):
        action (AdminHostActionAction): A manual action on a host circuit.
        reason (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[HostCircuit | Problem]
    """

    kwargs = _get_kwargs(
        host=host,
        action=action,
        reason=reason,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    host: str,
    action: AdminHostActionAction,
    *,
    client: AuthenticatedClient,
    reason: str | Unset = UNSET,
) -> HostCircuit | Problem | None:
    """Forces a host circuit open or closed.

     `POST /api/v1/admin/hosts/{host}/{open|close}?reason=`: audited as `operator`, alerted to
    every tenant with channels on the host. Idempotent: a host already there changes nothing and
    audits nothing. Any other action is 404.

    Args:
        host (str):
        action (AdminHostActionAction): A manual action on a host circuit.
        reason (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        HostCircuit | Problem
    """

    return sync_detailed(
        host=host,
        action=action,
        client=client,
        reason=reason,
    ).parsed


async def asyncio_detailed(
    host: str,
    action: AdminHostActionAction,
    *,
    client: AuthenticatedClient,
    reason: str | Unset = UNSET,
) -> Response[HostCircuit | Problem]:
    """Forces a host circuit open or closed.

     `POST /api/v1/admin/hosts/{host}/{open|close}?reason=`: audited as `operator`, alerted to
    every tenant with channels on the host. Idempotent: a host already there changes nothing and
    audits nothing. Any other action is 404.

    Args:
        host (str):
        action (AdminHostActionAction): A manual action on a host circuit.
        reason (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[HostCircuit | Problem]
    """

    kwargs = _get_kwargs(
        host=host,
        action=action,
        reason=reason,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    host: str,
    action: AdminHostActionAction,
    *,
    client: AuthenticatedClient,
    reason: str | Unset = UNSET,
) -> HostCircuit | Problem | None:
    """Forces a host circuit open or closed.

     `POST /api/v1/admin/hosts/{host}/{open|close}?reason=`: audited as `operator`, alerted to
    every tenant with channels on the host. Idempotent: a host already there changes nothing and
    audits nothing. Any other action is 404.

    Args:
        host (str):
        action (AdminHostActionAction): A manual action on a host circuit.
        reason (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        HostCircuit | Problem
    """

    return (
        await asyncio_detailed(
            host=host,
            action=action,
            client=client,
            reason=reason,
        )
    ).parsed
