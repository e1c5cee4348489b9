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
  const { $, el, toast, allPages } = window.Breakwater; // common.js
  // Rows per page of the channel list, and most pages read (the API's cursor paging). A
  // `?page_size=N` on the page's URL (1-1000) sets the page size, for tests.
  const PAGE_SIZE = (() => {
    const n = Number(new URLSearchParams(location.search).get("page_size"));
    return Number.isInteger(n) && n >= 1 && n <= 1000 ? n : 1000;
  })();
  const MAX_PAGES = 20;

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
  let catalog = []; // the tenant's event types: { name, description, example, deprecated, ... }
  let storedHeaders = {}; // the open channel's headers as read: name -> { value, sensitive }
  let current = null; // the channel open in the channel view (its id)
  let selectedDelivery = null;
  let timer = null;

  // ---- helpers ----------------------------------------------------------------------------
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
    const { all, more } = await allPages((path) => api("GET", path), `/api/v1/channels?limit=${PAGE_SIZE}`, MAX_PAGES);
    channels = all;
    $("channels-more").hidden = !more;
    $("channels-more").textContent = more ? `Showing the first ${all.length} endpoints.` : "";
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
    await loadCatalog().catch(fail);
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
      fillEventTypes(c.event_types);
      $("edit-rate-limit").value = c.rate_limit || "";
      $("edit-max-in-flight").value = c.max_in_flight == null ? "" : c.max_in_flight;
      fillHeaders(c.headers || {});
      fillAuth(c.auth);
      $("edit-filter").value = c.filter == null ? "" : compactJson(c.filter);
      $("filter-test-result").hidden = true;
    }
    return c;
  }

  // ---- the event-type catalog -------------------------------------------------------------
  // GET /api/v1/event-types, paged. A failure leaves the catalog empty: the page still works
  // with typed names.
  async function loadCatalog() {
    const { all } = await allPages((path) => api("GET", path), "/api/v1/event-types?limit=1000", MAX_PAGES);
    catalog = all;
    $("catalog-names").replaceChildren(...catalog.map((t) => el("option", { value: t.name })));
    const pick = $("test-catalog");
    const chosen = pick.value;
    pick.replaceChildren(el("option", { value: "" }, "(type your own)"),
      ...catalog.map((t) => el("option", { value: t.name },
        `${t.name}${t.example == null ? " (no example)" : ""}${t.deprecated ? " (deprecated)" : ""}`)));
    if (catalog.some((t) => t.name === chosen)) pick.value = chosen;
  }

  // The choices of the event-type picker: every catalog name and, for each dotted prefix, its
  // wildcard (`invoice.*`), in name order.
  function typeChoices() {
    const names = new Set();
    for (const t of catalog) {
      names.add(t.name);
      const dot = t.name.lastIndexOf(".");
      if (dot > 0) names.add(`${t.name.slice(0, dot)}.*`);
    }
    return [...names].sort();
  }

  function fillEventTypes(types) {
    const chosen = new Set(types || []);
    const choices = typeChoices();
    const deprecated = new Set(catalog.filter((t) => t.deprecated).map((t) => t.name));
    $("edit-types").replaceChildren(...choices.map((name) => {
      const box = el("input", { type: "checkbox", value: name, class: "type-choice" });
      box.checked = chosen.has(name);
      return el("label", { class: "check", title: name.endsWith(".*") ? `every type under ${name.slice(0, -1)}` : "" },
        box, el("span", { class: deprecated.has(name) ? "deprecated" : "", text: name }));
    }));
    $("edit-types").hidden = choices.length === 0;
    $("edit-event-types").value = [...chosen].filter((n) => !choices.includes(n)).join(", ");
  }

  // null (every type) when nothing is ticked or typed.
  function eventTypesChosen() {
    const ticked = [...document.querySelectorAll("#edit-types input.type-choice:checked")].map((b) => b.value);
    const typed = eventTypesIn($("edit-event-types")) || [];
    const all = [...new Set([...ticked, ...typed])];
    return all.length ? all : null;
  }

  // ---- custom headers ---------------------------------------------------------------------
  // A sensitive header's value is never put in the page: its row shows "set", and an empty
  // value keeps the stored one (`{"sensitive": true}` in the PATCH).
  function headerRow(name, view) {
    const stored = !!(view && view.sensitive);
    const value = el("input", {
      type: stored ? "password" : "text", class: "header-value", spellcheck: "false",
      autocomplete: "new-password", placeholder: stored ? "set: leave empty to keep" : "value",
    });
    if (view && !view.sensitive) value.value = view.value;
    const sensitive = el("input", { type: "checkbox", class: "header-sensitive" });
    sensitive.checked = stored;
    sensitive.addEventListener("change", () => { value.type = sensitive.checked ? "password" : "text"; });
    const nameInput = el("input", { type: "text", class: "header-name", spellcheck: "false", placeholder: "X-Header-Name" });
    nameInput.value = name || "";
    return el("div", { class: "header-row", dataset: { stored: stored ? "sensitive" : "" } },
      nameInput,
      el("span", { class: "header-value-cell" }, value, stored ? el("span", { class: "set", text: "set" }) : null),
      el("label", { class: "check" }, sensitive, "sensitive"),
      el("button", { type: "button", class: "quiet remove-header", title: "Remove this header" }, "Remove"));
  }

  function fillHeaders(headers) {
    storedHeaders = headers;
    $("edit-headers").replaceChildren(...Object.entries(headers).map(([n, v]) => headerRow(n, v)));
  }

  // The `headers` of a PATCH (all of them, replacing the stored ones); throws on a row that
  // cannot be sent.
  function headersChosen() {
    const out = {};
    for (const row of document.querySelectorAll("#edit-headers .header-row")) {
      const name = row.querySelector(".header-name").value.trim();
      const value = row.querySelector(".header-value").value;
      const sensitive = row.querySelector(".header-sensitive").checked;
      if (!name) {
        if (value) throw new Error("A header has a value but no name.");
        continue;
      }
      if (!sensitive) out[name] = value;
      else if (value) out[name] = { value, sensitive: true };
      else if (storedHeaders[name] && storedHeaders[name].sensitive) out[name] = { sensitive: true };
      else throw new Error(`Header ${name}: a sensitive header needs a value.`);
    }
    return out;
  }

  // ---- endpoint authentication ------------------------------------------------------------
  let storedAuth = null; // the auth as read: secrets masked, never shown

  function showAuthFields() {
    const type = $("auth-type").value;
    for (const box of document.querySelectorAll("#edit-auth-field .auth-fields")) {
      box.hidden = box.dataset.auth !== type;
    }
    // "set" only beside the stored secret of the stored type (and, for OAuth2, the same token URL).
    for (const mark of document.querySelectorAll("#edit-auth-field [data-secret-set]")) {
      mark.hidden = !(storedAuth && storedAuth.type === mark.dataset.secretSet && mark.dataset.secretSet === type
        && (type !== "oauth2_client_credentials" || $("auth-token-url").value.trim() === storedAuth.token_url));
    }
  }

  function fillAuth(auth) {
    storedAuth = auth || null;
    const a = auth || {};
    $("auth-type").value = a.type || "";
    $("auth-username").value = a.username || "";
    $("auth-token-url").value = a.token_url || "";
    $("auth-client-id").value = a.client_id || "";
    $("auth-scope").value = a.scope || "";
    for (const id of ["auth-password", "auth-token", "auth-client-secret"]) {
      $(id).value = "";
      $(id).placeholder = "";
    }
    const secretInput = { basic: "auth-password", bearer: "auth-token", oauth2_client_credentials: "auth-client-secret" }[a.type];
    if (secretInput) $(secretInput).placeholder = "set: leave empty to keep";
    showAuthFields();
  }

  // The `auth` of a PATCH: null for none; a secret left empty is left out (the API keeps it).
  function authChosen() {
    const type = $("auth-type").value;
    const secret = (id) => ($(id).value ? $(id).value : undefined);
    switch (type) {
      case "": return null;
      case "basic": return { type, username: $("auth-username").value, password: secret("auth-password") };
      case "bearer": return { type, token: secret("auth-token") };
      default: return {
        type,
        token_url: $("auth-token-url").value.trim(),
        client_id: $("auth-client-id").value,
        client_secret: secret("auth-client-secret"),
        scope: $("auth-scope").value.trim() || undefined,
      };
    }
  }

  // ---- the payload filter -----------------------------------------------------------------
  // JSON on one line when short, indented otherwise.
  function compactJson(v) {
    const line = JSON.stringify(v);
    return line.length <= 100 ? line : JSON.stringify(v, null, 2);
  }

  // The filter field as JSON (null when empty); throws with the parser's reason.
  function filterChosen() {
    const text = $("edit-filter").value.trim();
    if (!text) return null;
    try { return JSON.parse(text); } catch (e) { throw new Error(`The filter is not JSON: ${e.message}`); }
  }

  function clearSecrets() {
    for (const input of document.querySelectorAll("#edit-form input[type=password]")) input.value = "";
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
      let body;
      try {
        body = {
          url: $("edit-url").value.trim(),
          name: $("edit-name").value.trim() || null,
          event_types: eventTypesChosen(),
          rate_limit: $("edit-rate-limit").value.trim() || null,
          max_in_flight: numberIn($("edit-max-in-flight")),
          headers: headersChosen(),
          auth: authChosen(),
          filter: filterChosen(),
        };
      } catch (e) {
        toast(e.message, true);
        return;
      }
      api("PATCH", `/api/v1/channels/${current}`, body)
        .then(() => { clearSecrets(); toast("Saved."); return loadChannel(true); })
        .catch(fail);
    });
    $("add-header").addEventListener("click", () => {
      $("edit-headers").append(headerRow("", null));
    });
    $("edit-headers").addEventListener("click", (ev) => {
      const remove = ev.target.closest(".remove-header");
      if (remove) remove.closest(".header-row").remove();
    });
    $("auth-type").addEventListener("change", showAuthFields);
    $("auth-token-url").addEventListener("input", showAuthFields);
    $("filter-test-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const out = $("filter-test-result");
      let payload;
      try { payload = JSON.parse($("filter-test-payload").value); } catch (e) {
        toast(`The sample payload is not JSON: ${e.message}`, true);
        return;
      }
      const body = { payload };
      const type = $("filter-test-event-type").value.trim();
      if (type) body.event_type = type;
      api("POST", `/api/v1/channels/${current}/filter/test`, body).then((r) => {
        out.hidden = false;
        out.dataset.matches = String(r.matches);
        out.textContent = !r.has_filter
          ? "This endpoint has no saved filter: every message matches."
          : r.matches
            ? "Matches: this message would be delivered to this endpoint."
            : `Does not match: this message would not be delivered${r.error ? ` (${r.error})` : ""}.`;
      }).catch((e) => {
        out.hidden = false;
        out.dataset.matches = "error";
        out.textContent = e instanceof ApiError ? `Refused (${e.status}): ${e.message}` : String(e);
      });
    });
    $("test-catalog").addEventListener("change", () => {
      const t = catalog.find((x) => x.name === $("test-catalog").value);
      if (!t) return;
      $("test-event-type").value = t.name;
      $("test-payload").value = t.example == null ? "{}" : JSON.stringify(t.example, null, 2);
      $("filter-test-event-type").value = t.name;
      if (t.example != null) $("filter-test-payload").value = JSON.stringify(t.example, null, 2);
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
    await loadCatalog().catch(fail);
    timer = setInterval(refresh, POLL_MS);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
