// The README's API tour through the generated TypeScript client, against a real
// `breakwater serve` (API and workers; clients/check.sh starts one on a fresh database) and a
// receiver this test runs on loopback: create a tenant and a channel, send a message, read its
// deliveries, pause and resume the channel, rotate its secret, and verify each received request's
// signature with the Standard Webhooks library (npm `standardwebhooks`).
//
// Environment: BREAKWATER_URL (the service's root) and BREAKWATER_OPERATOR_KEY. The server
// must allow loopback targets (BREAKWATER_ALLOW_PRIVATE_TARGETS=true).
import assert from "node:assert/strict";
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { createBreakwaterClient, type BreakwaterClient, type Schemas } from "../src/index.js";

const baseUrl = process.env.BREAKWATER_URL;
const operatorKey = process.env.BREAKWATER_OPERATOR_KEY;
if (!baseUrl || !operatorKey) {
  throw new Error("set BREAKWATER_URL and BREAKWATER_OPERATOR_KEY (clients/check.sh does)");
}

/** One request the receiver got: its headers (lower-case names) and raw body. */
interface Received {
  headers: Record<string, string>;
  body: string;
}

/** A webhook endpoint on loopback that answers 200 and keeps every request, in order. */
class Receiver {
  readonly received: Received[] = [];
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === "string") headers[name] = value;
      }
      this.received.push({ headers, body: Buffer.concat(chunks).toString("utf8") });
      res.writeHead(200).end();
    });
  });

  async start(): Promise<string> {
    this.server.listen(0, "127.0.0.1");
    await once(this.server, "listening");
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}/hooks`;
  }

  /** The first request whose `webhook-id` is `id`, waiting up to `ms` for it. */
  async waitFor(id: string, ms = 15_000): Promise<Received> {
    const found = await until(() => this.received.find((r) => r.headers["webhook-id"] === id), ms);
    assert.ok(found, `the receiver got no request with webhook-id ${id} within ${ms} ms`);
    return found;
  }

  close(): void {
    this.server.close();
    this.server.closeAllConnections();
  }
}

/** Polls `probe` every 50 ms until it gives a value (not undefined) or `ms` pass. */
async function until<T>(probe: () => T | undefined | Promise<T | undefined>, ms: number): Promise<T | undefined> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const receiver = new Receiver();
let receiverUrl = "";
let tenant: BreakwaterClient;
let channelId = "";
let signingSecret = "";

before(async () => {
  receiverUrl = await receiver.start();
  const operator = createBreakwaterClient({ baseUrl, key: operatorKey });
  const created = await operator.POST("/api/v1/tenants", {
    body: { name: `ts-client-${Date.now()}`, tier: "default" },
  });
  assert.equal(created.response.status, 201, JSON.stringify(created.error));
  assert.ok(created.data);
  assert.match(created.data.api_key, /^bw_/);
  assert.match(created.data.alert_secret, /^whsec_/);
  tenant = createBreakwaterClient({ baseUrl, key: created.data.api_key });
});

after(() => receiver.close());

/** Sends `payload` as a message of type `eventType`; asserts one delivery to the channel. */
async function sendMessage(eventType: string, payload: unknown, idempotencyKey?: string) {
  const sent = await tenant.POST("/api/v1/messages", {
    params: { header: idempotencyKey === undefined ? {} : { "Idempotency-Key": idempotencyKey } },
    body: { event_type: eventType, payload },
  });
  assert.equal(sent.response.status, 202, JSON.stringify(sent.error));
  assert.ok(sent.data);
  assert.equal(sent.data.deliveries.length, 1);
  assert.equal(sent.data.deliveries[0]?.channel_id, channelId);
  return sent.data;
}

/**
 * Checks a received request with Standard Webhooks: signed with `secret`, its body the envelope
 * `{type: "invoice.paid", timestamp, data: payload}` (README, "What a receiver gets").
 */
function verify(received: Received, secret: string, payload: unknown): void {
  const verified = new Webhook(secret).verify(received.body, received.headers) as Record<string, unknown>;
  assert.deepEqual(Object.keys(verified).sort(), ["data", "timestamp", "type"]);
  assert.equal(verified.type, "invoice.paid");
  assert.ok(!Number.isNaN(Date.parse(String(verified.timestamp))), `timestamp ${String(verified.timestamp)}`);
  assert.deepEqual(verified.data, payload);
  assert.equal(received.headers["content-type"], "application/json");
}

test("the API tour through the TypeScript client", async (t) => {
  await t.test("create a channel pointing at the receiver", async () => {
    const created = await tenant.POST("/api/v1/channels", { body: { url: receiverUrl, name: "orders" } });
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    assert.ok(created.data);
    assert.equal(created.data.url, receiverUrl);
    assert.equal(created.data.name, "orders");
    assert.match(created.data.signing_secret, /^whsec_/);
    channelId = created.data.id;
    signingSecret = created.data.signing_secret;

    const listed = await tenant.GET("/api/v1/channels", { params: { query: { limit: 10 } } });
    assert.equal(listed.response.status, 200);
    assert.deepEqual(
      listed.data?.data.map((c: Schemas["Channel"]) => c.id),
      [channelId],
    );
  });

  let deliveryId = "";
  await t.test("send a message; the receiver gets it signed", async () => {
    const payload = { order: 42, paid: true };
    const message = await sendMessage("invoice.paid", payload, "order-42-paid");
    assert.equal(message.idempotent_replay, false);
    deliveryId = message.deliveries[0]!.delivery_id;

    // The same Idempotency-Key again: the first message, nothing new enqueued.
    const again = await sendMessage("invoice.paid", payload, "order-42-paid");
    assert.equal(again.idempotent_replay, true);
    assert.equal(again.id, message.id);

    const received = await receiver.waitFor(message.id);
    verify(received, signingSecret, payload);
    // A changed body, or another secret, does not verify.
    assert.throws(
      () => new Webhook(signingSecret).verify(received.body.replace("42", "43"), received.headers),
      WebhookVerificationError,
    );
    assert.throws(
      () => new Webhook("whsec_" + Buffer.from("another secret!!").toString("base64")).verify(received.body, received.headers),
      WebhookVerificationError,
    );
  });

  await t.test("read its deliveries", async () => {
    const delivery = await until(async () => {
      const got = await tenant.GET("/api/v1/deliveries/{id}", { params: { path: { id: deliveryId } } });
      assert.equal(got.response.status, 200, JSON.stringify(got.error));
      return got.data?.status === "delivered" ? got.data : undefined;
    }, 15_000);
    assert.ok(delivery, "the delivery was not marked delivered");
    assert.equal(delivery.channel_id, channelId);
    assert.equal(delivery.event_type, "invoice.paid");
    assert.equal(delivery.attempts, 1);
    assert.equal(delivery.attempt_log[0]?.status_code, 200);
    assert.equal(delivery.attempt_log[0]?.outcome, "success");

    const page = await tenant.GET("/api/v1/channels/{id}/deliveries", {
      params: { path: { id: channelId }, query: { status: "delivered", limit: 50 } },
    });
    assert.equal(page.response.status, 200, JSON.stringify(page.error));
    assert.deepEqual(
      page.data?.data.map((d: Schemas["DeliverySummary"]) => d.id),
      [deliveryId],
    );
    assert.equal(page.data?.next_cursor, null);

    // Another tenant's id, or no such id: a typed problem+json 404.
    const missing = await tenant.GET("/api/v1/deliveries/{id}", {
      params: { path: { id: "00000000-0000-4000-8000-000000000000" } },
    });
    assert.equal(missing.response.status, 404);
    assert.equal(missing.error?.status, 404);
    assert.equal(typeof missing.error?.code, "string");
  });

  await t.test("pause, send while paused, resume", async () => {
    const paused = await tenant.POST("/api/v1/channels/{id}/pause", {
      params: { path: { id: channelId }, query: { reason: "ts client tour" } },
    });
    assert.equal(paused.response.status, 200, JSON.stringify(paused.error));
    assert.equal(paused.data?.circuit.state, "paused");

    const payload = { order: 43 };
    const message = await sendMessage("invoice.paid", payload);
    const parked = await until(async () => {
      const got = await tenant.GET("/api/v1/deliveries/{id}", {
        params: { path: { id: message.deliveries[0]!.delivery_id } },
      });
      return got.data?.status === "paused" ? got.data : undefined;
    }, 10_000);
    assert.ok(parked, "a delivery to a paused channel is parked (status paused)");
    assert.equal(receiver.received.filter((r) => r.headers["webhook-id"] === message.id).length, 0);

    const resumed = await tenant.POST("/api/v1/channels/{id}/resume", { params: { path: { id: channelId } } });
    assert.equal(resumed.response.status, 200, JSON.stringify(resumed.error));
    assert.equal(resumed.data?.circuit.state, "closed");
    verify(await receiver.waitFor(message.id), signingSecret, payload);
  });

  await t.test("rotate the secret: later requests are signed with the new one", async () => {
    const rotated = await tenant.POST("/api/v1/channels/{id}/secret/rotate", {
      params: { path: { id: channelId } },
      body: { grace_ms: 0 },
    });
    assert.equal(rotated.response.status, 200, JSON.stringify(rotated.error));
    assert.ok(rotated.data);
    assert.equal(rotated.data.channel_id, channelId);
    assert.notEqual(rotated.data.signing_secret, signingSecret);
    assert.equal(rotated.data.previous_secret_expires_at ?? null, null);
    const oldSecret = signingSecret;
    signingSecret = rotated.data.signing_secret;

    const payload = { order: 44, rotated: true };
    const message = await sendMessage("invoice.paid", payload);
    const received = await receiver.waitFor(message.id);
    verify(received, signingSecret, payload);
    // No grace period: the old secret no longer signs.
    assert.throws(() => new Webhook(oldSecret).verify(received.body, received.headers), WebhookVerificationError);
  });
});
