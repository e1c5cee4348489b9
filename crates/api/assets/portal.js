// Breakwater tenant portal. Plain browser JavaScript, no build step, no dependencies.
//
// The page is opened with a portal session's link, `/portal#token=bwp_…`. The token is read from
// the fragment (which browsers never send to a server), kept in this tab's sessionStorage, and
// removed from the address bar at once (history.replaceState), so it is not in the history, a
// bookmark or a shared screenshot of the URL. It travels only as an Authorization header to the
// tenant API, which answers as the session's scope allows (a `read` session: every write 403).
// Everything the tenant or a receiver controls (names, URLs, errors, response excerpts) is
// inserted as text (textContent), never as HTML.
"use strict";

(() => {
  const TOKEN_STORE = "breakwater.portalToken";
  const POLL_MS = 2000;
  const $ = (id) => document.getElementById(id);

  // ---- the token --------------------------------------------------------------------------
  let token = null;
  {
    const hash = new URLSearchParams(location.hash.replace(/^#/, ""));
    const fromUrl = hash.get("token");
    if (fromUrl) {
      sessionStorage.setItem(TOKEN_STORE, fromUrl);
      history.replaceState(null, "", location.pathname + location.search);
    }
    token = sessionStorage.getItem(TOKEN_STORE);
    // A new link opened in the same tab changes only the fragment (no page load): take its
    // token and start again.
    window.addEventListener("hashchange", () => {
      const next = new URLSearchParams(location.hash.replace(/^#/, "")).get("token");
      if (!next) return;
      sessionStorage.setItem(TOKEN_STORE, next);
      history.replaceState(null, "", location.pathname + location.search);
      location.reload();
    });
  }

  let session = null; // { id, scope, expires_at }
  let channels = [];
  let current = null; // the channel open in the channel view (its id)
  let selectedDelivery = null;
  let timer = null;

  // ---- helpers ----------------------------------------------------------------------------
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === "class") e.className = v;
      else if (k === "dataset") Object.assign(e.dataset, v);
      else if (k === "text") e.textContent = v;
      else if (k === "title") e.title = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c != null) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function toast(text, bad) {
    const t = $("toast");
    t.textContent = text;
    t.classList.toggle("bad", !!bad);
    t.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { t.hidden = true; }, bad ? 8000 : 4000);
  }

  class ApiError extends Error {
    constructor(status, body) {
      super((body && (body.detail || body.title)) || `HTTP ${status}`);
      this.status = status;
      this.body = body;
    }
  }

  async function api(method, path, body) {
    const init = { method, headers: { Authorization: `Bearer ${token}` }, referrerPolicy: "no-referrer" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = typeof body === "string" ? body : JSON.stringify(body);
    }
    const r = await fetch(path, init);
    const text = await r.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
    if (r.status === 401) {
      ended("Your session has ended", "This portal link has expired or was revoked. Ask for a new one.");
      throw new ApiError(401, json);
    }
    if (!r.ok) throw new ApiError(r.status, json);
    return json;
  }
  // For tests and debugging: the same call the page makes.
  window.__portal = { api, fail: (e) => fail(e) };

  function fail(e) {
    toast(e instanceof ApiError ? `Refused (${e.status}): ${e.message}` : String(e), true);
  }

  function ended(title, text) {
    sessionStorage.removeItem(TOKEN_STORE);
    clearInterval(timer);
    $("app").hidden = true;
    $("readonly").hidden = true;
    $("nosession-title").textContent = title;
    $("nosession-text").textContent = text;
    $("nosession").hidden = false;
  }

  function ago(iso) {
    if (!iso) return "";
    const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
    if (Math.abs(s) < 60) return s >= 0 ? `${s}s ago` : `in ${-s}s`;
    const m = Math.round(s / 60);
    if (Math.abs(m) < 60) return m >= 0 ? `${m} min ago` : `in ${-m} min`;
    const h = Math.round(m / 60);
    return h >= 0 ? `${h} h ago` : `in ${-h} h`;
  }
  const when = (iso) => (iso ? new Date(iso).toLocaleString() : "");

  const STATE_WORDS = {
    closed: "Delivering",
    open: "Stopped: the endpoint keeps failing",
    half_open: "Testing the endpoint again",
    paused: "Paused",
  };

  // The circuit in plain words: what it is doing, why, and what happens next.
  function circuitText(c) {
    const circuit = c.circuit || {};
    const state = c.circuit_state || circuit.state;
    const parked = circuit.parked != null ? `${circuit.parked} deliveries are waiting.` : "";
    const failure = c.last_failure_reason
      ? `The last failure (${ago(c.last_failure_at)}): ${c.last_failure_reason}.`
      : "";
    const probe = c.next_probe_at ? `The next test delivery is due ${ago(c.next_probe_at)} (${when(c.next_probe_at)}).` : "";
    switch (state) {
      case "closed":
        return `Deliveries are flowing.${c.consecutive_failures ? ` ${c.consecutive_failures} failures in a row so far.` : ""} ${failure}`;
      case "open":
        return `Sending stopped because the endpoint failed ${circuit.failure_threshold || "too many"} times in a row; deliveries wait instead of failing. ${failure} ${probe} ${parked}`;
      case "half_open":
        return `A test delivery is checking whether the endpoint works again; if it does, the waiting deliveries are sent. ${failure} ${parked}`;
      case "paused":
        return `Paused${c.operator_hold ? " by the service operator" : ""}: nothing is sent until it is resumed; deliveries wait. ${parked}`;
      default:
        return "";
    }
  }

  function eventTypesIn(input) {
    const v = input.value.trim();
    if (!v) return null;
    return v.split(/[\s,]+/).filter(Boolean);
  }
  function numberIn(input) {
    const v = input.value.trim();
    return v ? Number(v) : null;
  }

  // ---- the channel list -------------------------------------------------------------------
  async function loadChannels() {
    const page = await api("GET", "/api/v1/channels?limit=1000");
    channels = page.data || [];
    const tbody = $("channels").querySelector("tbody");
    tbody.replaceChildren(...channels.map((c) => {
      const state = c.circuit_state;
      return el("tr", { dataset: { channelId: c.id } },
        el("td", {}, el("a", { href: "#", class: "open-channel", dataset: { channelId: c.id } }, c.name || "(unnamed)"),
          el("br"), el("span", { class: "id", text: c.id })),
        el("td", { class: "wrap", text: c.url }),
        el("td", {}, el("span", { class: "state", dataset: { state }, text: STATE_WORDS[state] || state })),
        el("td", { class: "wrap", text: c.event_types ? c.event_types.join(", ") : "all" }),
        el("td", { text: c.rate_limit || "none" }),
        el("td", {}, el("button", { type: "button", class: "quiet open-channel", dataset: { channelId: c.id } }, "Open")));
    }));
    $("channels-empty").hidden = channels.length > 0;
  }

  // ---- one channel ------------------------------------------------------------------------
  async function openChannel(id) {
    current = id;
    selectedDelivery = null;
    $("attempts").hidden = true;
    $("rotated").hidden = true;
    $("test-result").hidden = true;
    $("channels-view").hidden = true;
    $("channel-view").hidden = false;
    await loadChannel(true);
    await loadDeliveries();
  }

  function closeChannel() {
    current = null;
    $("channel-view").hidden = true;
    $("channels-view").hidden = false;
    loadChannels().catch(fail);
  }

  async function loadChannel(fillForm) {
    const c = await api("GET", `/api/v1/channels/${current}`);
    const state = c.circuit_state;
    $("ch-title").textContent = c.name || c.url;
    $("channel-view").dataset.channelId = c.id;
    const pill = $("ch-state");
    pill.dataset.state = state;
    pill.textContent = STATE_WORDS[state] || state;
    $("ch-state-text").textContent = circuitText(c).replace(/\s+/g, " ").trim();
    const facts = [
      `Endpoint: ${c.url}`,
      `In this state since ${when(c.circuit && c.circuit.since)}`,
      c.circuit ? `In flight now: ${c.concurrency ? c.concurrency.in_flight : 0}; waiting: ${c.circuit.parked}` : null,
      c.retry_after_until ? `The endpoint asked us to wait until ${when(c.retry_after_until)}` : null,
    ].filter(Boolean);
    $("ch-facts").replaceChildren(...facts.map((f) => el("li", { text: f })));
    const writable = session && session.scope === "manage";
    $("pause").disabled = !writable || state === "paused";
    $("resume").disabled = !writable || state !== "paused";
    $("secret-grace").textContent = c.previous_secret_expires_at && Date.parse(c.previous_secret_expires_at) > Date.now()
      ? `The previous secret still signs too, until ${when(c.previous_secret_expires_at)}.`
      : "";
    if (fillForm) {
      $("edit-url").value = c.url;
      $("edit-name").value = c.name || "";
      $("edit-event-types").value = c.event_types ? c.event_types.join(", ") : "";
      $("edit-rate-limit").value = c.rate_limit || "";
      $("edit-max-in-flight").value = c.max_in_flight == null ? "" : c.max_in_flight;
    }
    return c;
  }

  function deliveryQuery() {
    const q = new URLSearchParams({ limit: "50" });
    if ($("f-status").value) q.set("status", $("f-status").value);
    if ($("f-event-type").value.trim()) q.set("event_type", $("f-event-type").value.trim());
    for (const [field, input] of [["since", $("f-since")], ["until", $("f-until")]]) {
      if (input.value) q.set(field, new Date(input.value).toISOString());
    }
    return q.toString();
  }

  async function loadDeliveries() {
    const page = await api("GET", `/api/v1/channels/${current}/deliveries?${deliveryQuery()}`);
    const rows = page.data || [];
    const writable = session && session.scope === "manage";
    const tbody = $("deliveries").querySelector("tbody");
    tbody.replaceChildren(...rows.map((d) => el("tr", {
      dataset: { deliveryId: d.id, status: d.status },
      class: d.id === selectedDelivery ? "selected" : "",
    },
      el("td", { title: d.created_at, text: when(d.created_at) }),
      el("td", { text: d.event_type }),
      el("td", {}, el("span", { class: "status-pill", dataset: { status: d.status }, text: d.status })),
      el("td", { class: "num", text: d.attempts }),
      el("td", { class: "wrap", text: d.last_error || "" }),
      el("td", {},
        el("button", { type: "button", class: "quiet show-attempts", dataset: { deliveryId: d.id } }, "Attempts"),
        d.status === "dead" && writable
          ? el("button", { type: "button", class: "replay", dataset: { action: "replay", deliveryId: d.id } }, "Replay")
          : null))));
    $("deliveries-empty").hidden = rows.length > 0;
  }

  async function showAttempts(id) {
    selectedDelivery = id;
    const d = await api("GET", `/api/v1/deliveries/${id}`);
    $("attempts-title").textContent = `Delivery ${d.id} · ${d.event_type} · ${d.status}`;
    const tbody = $("attempts").querySelector("tbody");
    tbody.replaceChildren(...(d.attempt_log || []).map((a) => el("tr", {},
      el("td", { text: a.attempt }),
      el("td", { text: when(a.started_at) }),
      el("td", { text: a.status_code != null ? `HTTP ${a.status_code}` : `${a.error_kind || "error"}: ${a.error || ""}` }),
      el("td", { class: "num", text: `${a.duration_ms} ms` }),
      el("td", { class: "excerpt", text: a.response_excerpt || "" }))));
    if (!(d.attempt_log || []).length) tbody.append(el("tr", {}, el("td", { colspan: "5", class: "muted", text: "No attempt yet." })));
    $("attempts").hidden = false;
    for (const tr of $("deliveries").querySelectorAll("tbody tr")) {
      tr.classList.toggle("selected", tr.dataset.deliveryId === id);
    }
  }

  // The result of a test send, followed until it is final.
  async function followTest(id) {
    const out = $("test-result");
    out.hidden = false;
    for (let i = 0; i < 60; i++) {
      const d = await api("GET", `/api/v1/deliveries/${id}`);
      const last = (d.attempt_log || []).slice(-1)[0];
      const detail = last
        ? (last.status_code != null ? `HTTP ${last.status_code} in ${last.duration_ms} ms` : `${last.error_kind || "error"}: ${last.error || ""}`)
        : "";
      out.dataset.status = d.status;
      out.dataset.deliveryId = d.id;
      out.textContent = `Test delivery ${d.id}: ${d.status}${detail ? ` (${detail})` : ""}`;
      if (["delivered", "dead", "cancelled"].includes(d.status)) break;
      await new Promise((r) => setTimeout(r, 1000));
    }
    if (current) loadDeliveries().catch(fail);
  }

  // ---- actions ----------------------------------------------------------------------------
  function bind() {
    document.addEventListener("click", (ev) => {
      const open = ev.target.closest(".open-channel");
      if (open) { ev.preventDefault(); openChannel(open.dataset.channelId).catch(fail); return; }
      const attempts = ev.target.closest(".show-attempts");
      if (attempts) { showAttempts(attempts.dataset.deliveryId).catch(fail); return; }
      const replay = ev.target.closest("button.replay");
      if (replay) {
        api("POST", `/api/v1/deliveries/${replay.dataset.deliveryId}/replay`)
          .then(() => { toast("Sent again."); return loadDeliveries(); })
          .catch(fail);
      }
    });
    $("back").addEventListener("click", closeChannel);
    $("new-channel").addEventListener("click", () => {
      $("create-card").hidden = false;
      $("created-secret").hidden = true;
      $("create-url").focus();
    });
    $("create-cancel").addEventListener("click", () => { $("create-card").hidden = true; });
    $("create-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const body = { url: $("create-url").value.trim() };
      if ($("create-name").value.trim()) body.name = $("create-name").value.trim();
      const types = eventTypesIn($("create-event-types"));
      if (types) body.event_types = types;
      if ($("create-rate-limit").value.trim()) body.rate_limit = $("create-rate-limit").value.trim();
      const mif = numberIn($("create-max-in-flight"));
      if (mif != null) body.max_in_flight = mif;
      api("POST", "/api/v1/channels", body).then((c) => {
        $("create-form").reset();
        $("created-secret-value").textContent = c.signing_secret;
        $("created-secret").hidden = false;
        toast(`Endpoint ${c.name || c.url} created.`);
        return loadChannels();
      }).catch(fail);
    });
    $("edit-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const body = {
        url: $("edit-url").value.trim(),
        name: $("edit-name").value.trim() || null,
        event_types: eventTypesIn($("edit-event-types")),
        rate_limit: $("edit-rate-limit").value.trim() || null,
        max_in_flight: numberIn($("edit-max-in-flight")),
      };
      api("PATCH", `/api/v1/channels/${current}`, body)
        .then(() => { toast("Saved."); return loadChannel(true); })
        .catch(fail);
    });
    for (const action of ["pause", "resume"]) {
      $(action).addEventListener("click", () => {
        api("POST", `/api/v1/channels/${current}/${action}`)
          .then(() => { toast(action === "pause" ? "Paused." : "Resumed."); return loadChannel(false); })
          .catch(fail);
      });
    }
    $("delete-channel").addEventListener("click", () => {
      if (!confirm("Delete this endpoint? Its waiting deliveries are cancelled.")) return;
      api("DELETE", `/api/v1/channels/${current}`)
        .then(() => { toast("Deleted."); closeChannel(); })
        .catch(fail);
    });
    $("test-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      let payload;
      try { payload = JSON.parse($("test-payload").value); } catch (e) {
        toast(`The payload is not JSON: ${e.message}`, true);
        return;
      }
      const body = { event_type: $("test-event-type").value.trim(), payload };
      api("POST", `/api/v1/channels/${current}/deliveries`, body)
        .then((d) => followTest(d.id))
        .catch((e) => {
          const out = $("test-result");
          out.hidden = false;
          out.dataset.status = "error";
          out.textContent = e instanceof ApiError ? `Refused (${e.status}): ${e.message}` : String(e);
        });
    });
    $("filter-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      loadDeliveries().catch(fail);
    });
    $("replay-dead").addEventListener("click", () => {
      api("POST", `/api/v1/channels/${current}/replay`, {})
        .then((r) => { toast(`${r.replayed} dead deliveries sent again.`); return loadDeliveries(); })
        .catch(fail);
    });
    $("rotate-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      api("POST", `/api/v1/channels/${current}/secret/rotate`, { grace_ms: Number($("rotate-grace").value) })
        .then((r) => {
          $("rotated-secret").textContent = r.signing_secret;
          $("rotated").hidden = false;
          return loadChannel(false);
        })
        .catch(fail);
    });
  }

  async function refresh() {
    try {
      if (current) {
        await loadChannel(false);
        await loadDeliveries();
        if (selectedDelivery && !$("attempts").hidden) await showAttempts(selectedDelivery);
      } else {
        await loadChannels();
      }
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) console.warn(e);
    }
  }

  async function start() {
    bind();
    if (!token) {
      ended("No portal session", "Open this page with the link your platform gives you.");
      return;
    }
    try {
      session = await api("GET", "/api/v1/portal/session");
      const tenant = await api("GET", "/api/v1/tenant");
      $("tenant-name").textContent = tenant.name;
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) fail(e);
      return;
    }
    document.body.dataset.scope = session.scope;
    $("scope").textContent = session.scope === "read" ? "read-only" : "manage";
    $("scope").hidden = false;
    $("expires").textContent = `session ends ${when(session.expires_at)}`;
    $("readonly").hidden = session.scope !== "read";
    if (session.scope === "read") {
      for (const b of document.querySelectorAll("button.write")) b.disabled = true;
    }
    $("app").hidden = false;
    await loadChannels().catch(fail);
    timer = setInterval(refresh, POLL_MS);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
