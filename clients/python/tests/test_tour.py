"""The README's API tour through the generated Python client, against a real `breakwater serve`.

clients/check.sh starts the service (API and workers) on a fresh database; this test runs a
webhook receiver on loopback and walks the tour: create a tenant and a channel, send a message,
read its deliveries, pause and resume the channel, rotate its secret, and verify each received
request's signature with the Standard Webhooks library (PyPI `standardwebhooks`).

Environment: BREAKWATER_URL (the service's root) and BREAKWATER_OPERATOR_KEY. The server must
allow loopback targets (BREAKWATER_ALLOW_PRIVATE_TARGETS=true).
"""

from __future__ import annotations

import base64
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import pytest
from breakwater_client import AuthenticatedClient
from breakwater_client.api.channels import (
    create_channel,
    list_channels,
    pause_channel,
    resume_channel,
    rotate_channel_secret,
)
from breakwater_client.api.deliveries import get_delivery, list_channel_deliveries
from breakwater_client.api.messages import send_message
from breakwater_client.api.tenants import create_tenant
from breakwater_client.models import (
    CircuitState,
    CreateChannel,
    CreatedChannel,
    CreatedTenant,
    CreateTenant,
    DeliveryStatus,
    DeliveryView,
    MessageAccepted,
    PageChannel,
    PageDeliverySummary,
    Problem,
    RotatedSecret,
    RotateSecret,
    SendMessage,
    Tier,
)
from breakwater_client.models.channel_view import ChannelView
from breakwater_client.types import UNSET
from standardwebhooks import Webhook, WebhookVerificationError

BASE_URL = os.environ.get("BREAKWATER_URL", "")
OPERATOR_KEY = os.environ.get("BREAKWATER_OPERATOR_KEY", "")
T = TypeVar("T")


@dataclass
class Received:
    """One request the receiver got: headers (lower-case names) and the raw body."""

    headers: dict[str, str]
    body: bytes


class Receiver:
    """A webhook endpoint on loopback that answers 200 and keeps every request, in order."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                received.append(Received({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def with_id(self, webhook_id: str) -> list[Received]:
        return [r for r in list(self.received) if r.headers.get("webhook-id") == webhook_id]

    def wait_for(self, webhook_id: str, seconds: float = 15) -> Received:
        """The first request whose `webhook-id` is `webhook_id`, waiting up to `seconds`."""
        found = until(lambda: next(iter(self.with_id(webhook_id)), None), seconds)
        assert found is not None, f"the receiver got no request with webhook-id {webhook_id} in {seconds} s"
        return found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def until(probe: Callable[[], T | None], seconds: float) -> T | None:
    """Calls `probe` every 50 ms until it gives a value (not None) or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while True:
        value = probe()
        if value is not None or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def verify(received: Received, secret: str, payload: Any) -> None:
    """Checks a received request with Standard Webhooks: signed with `secret`, its body the
    envelope `{"type": "invoice.paid", "timestamp", "data": payload}` (README, "What a receiver
    gets")."""
    verified = Webhook(secret).verify(received.body, received.headers)
    assert sorted(verified) == ["data", "timestamp", "type"]
    assert verified["type"] == "invoice.paid"
    datetime.fromisoformat(verified["timestamp"])
    assert verified["data"] == payload
    assert received.headers["content-type"] == "application/json"


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def tenant() -> Iterator[AuthenticatedClient]:
    assert BASE_URL and OPERATOR_KEY, "set BREAKWATER_URL and BREAKWATER_OPERATOR_KEY (clients/check.sh does)"
    with AuthenticatedClient(base_url=BASE_URL, token=OPERATOR_KEY) as operator:
        created = create_tenant.sync_detailed(
            client=operator, body=CreateTenant(name=f"py-client-{uuid.uuid4().hex[:8]}", tier=Tier.DEFAULT)
        )
    assert created.status_code == 201, created.content
    assert isinstance(created.parsed, CreatedTenant)
    assert created.parsed.api_key.startswith("bw_")
    assert created.parsed.alert_secret.startswith("whsec_")
    with AuthenticatedClient(base_url=BASE_URL, token=created.parsed.api_key) as client:
        yield client


def send(client: AuthenticatedClient, channel_id: uuid.UUID, payload: Any, key: str | None = None) -> MessageAccepted:
    """Sends `payload` as an `invoice.paid` message; asserts one delivery, to the channel."""
    sent = send_message.sync_detailed(
        client=client,
        body=SendMessage(event_type="invoice.paid", payload=payload),
        idempotency_key=UNSET if key is None else key,
    )
    assert sent.status_code == 202, sent.content
    assert isinstance(sent.parsed, MessageAccepted)
    assert [d.channel_id for d in sent.parsed.deliveries] == [channel_id]
    return sent.parsed


def read_delivery(client: AuthenticatedClient, delivery_id: uuid.UUID) -> DeliveryView:
    got = get_delivery.sync_detailed(delivery_id, client=client)
    assert got.status_code == 200, got.content
    assert isinstance(got.parsed, DeliveryView)
    return got.parsed


def test_api_tour(tenant: AuthenticatedClient, receiver: Receiver) -> None:
    # Create a channel pointing at the receiver; its signing secret is shown once.
    created = create_channel.sync_detailed(client=tenant, body=CreateChannel(url=receiver.url, name="orders"))
    assert created.status_code == 201, created.content
    channel = created.parsed
    assert isinstance(channel, CreatedChannel)
    assert channel.url == receiver.url
    assert channel.name == "orders"
    assert channel.signing_secret.startswith("whsec_")
    secret = channel.signing_secret

    listed = list_channels.sync_detailed(client=tenant, limit=10)
    assert isinstance(listed.parsed, PageChannel), listed.content
    assert [c.id for c in listed.parsed.data] == [channel.id]

    # Send a message; the receiver gets it, signed; the same Idempotency-Key again is a replay.
    payload = {"order": 42, "paid": True}
    message = send(tenant, channel.id, payload, key="order-42-paid")
    assert message.idempotent_replay is False
    again = send(tenant, channel.id, payload, key="order-42-paid")
    assert again.idempotent_replay is True
    assert again.id == message.id
    delivery_id = message.deliveries[0].delivery_id

    received = receiver.wait_for(str(message.id))
    verify(received, secret, payload)
    # A changed body, or another secret, does not verify.
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(received.body.replace(b"42", b"43"), received.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + base64.b64encode(b"another secret!!").decode()).verify(received.body, received.headers)

    # Read its deliveries: the one delivery, delivered at the first attempt with a 200.
    delivery = until(
        lambda: (d if (d := read_delivery(tenant, delivery_id)).status == DeliveryStatus.DELIVERED else None), 15
    )
    assert delivery is not None, "the delivery was not marked delivered"
    assert delivery.channel_id == channel.id
    assert delivery.event_type == "invoice.paid"
    assert delivery.payload == payload
    assert delivery.attempts == 1
    assert delivery.attempt_log[0].status_code == 200
    assert delivery.attempt_log[0].outcome.value == "success"

    page = list_channel_deliveries.sync_detailed(channel.id, client=tenant, status=DeliveryStatus.DELIVERED, limit=50)
    assert isinstance(page.parsed, PageDeliverySummary), page.content
    assert [d.id for d in page.parsed.data] == [delivery_id]
    assert page.parsed.next_cursor is None

    # No such delivery (or another tenant's): a typed problem+json 404.
    missing = get_delivery.sync_detailed(uuid.UUID("00000000-0000-4000-8000-000000000000"), client=tenant)
    assert missing.status_code == 404
    assert isinstance(missing.parsed, Problem)
    assert missing.parsed.status == 404
    assert missing.parsed.code

    # Pause: a message sent meanwhile is parked, not sent; resume releases it.
    paused = pause_channel.sync_detailed(channel.id, client=tenant, reason="python client tour")
    assert isinstance(paused.parsed, ChannelView), paused.content
    assert paused.parsed.circuit.state == CircuitState.PAUSED

    parked_payload = {"order": 43}
    parked = send(tenant, channel.id, parked_payload)
    parked_id = parked.deliveries[0].delivery_id
    assert (
        until(lambda: read_delivery(tenant, parked_id).status == DeliveryStatus.PAUSED or None, 10) is not None
    ), "a delivery to a paused channel is parked (status paused)"
    assert receiver.with_id(str(parked.id)) == []

    resumed = resume_channel.sync_detailed(channel.id, client=tenant)
    assert isinstance(resumed.parsed, ChannelView), resumed.content
    assert resumed.parsed.circuit.state == CircuitState.CLOSED
    verify(receiver.wait_for(str(parked.id)), secret, parked_payload)

    # Rotate the secret with no grace period: later requests verify with the new one only.
    rotated = rotate_channel_secret.sync_detailed(channel.id, client=tenant, body=RotateSecret(grace_ms=0))
    assert isinstance(rotated.parsed, RotatedSecret), rotated.content
    assert rotated.parsed.channel_id == channel.id
    assert rotated.parsed.signing_secret != secret
    assert rotated.parsed.previous_secret_expires_at in (None, UNSET)
    old_secret, secret = secret, rotated.parsed.signing_secret

    rotated_payload = {"order": 44, "rotated": True}
    after_rotation = send(tenant, channel.id, rotated_payload)
    received = receiver.wait_for(str(after_rotation.id))
    verify(received, secret, rotated_payload)
    with pytest.raises(WebhookVerificationError):
        Webhook(old_secret).verify(received.body, received.headers)
