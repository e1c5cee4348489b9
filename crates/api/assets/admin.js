// Breakwater operator page. Plain browser JavaScript, no build step, no dependencies.
//
// The operator key lives in this tab's sessionStorage and travels only as an Authorization
// header to the operator API; it is never put in a URL.
//
// Behind the cells router (deploy/cells/, docs/cells.md) `GET /api/v1/cells` lists the cells:
// the page then shows one cell at a time (the picker in the header; every call names it in the
// Breakwater-Cell header) and a card with every cell's queues. Without it (a node answers 404),
// the page is as it was: one database, no cell. Everything a tenant can name (tenant
// and channel names) is inserted as text (textContent), never as HTML.
"use strict";

(() => {
  const KEY_STORE = "breakwater.operatorKey";
  const CELL_STORE = "breakwater.cell";
  const POLL_MS = 2000;
  const POLL_HIDDEN_MS = 10000;
  const MAX_CHANNEL_PAGES = 10; // of 1000 channels each
  const STATE_ORDER = { open: 0, half_open: 1, paused: 2, closed: 3 };
  const ACTIONS = [
    {
      action: "pause", label: "Pause", from: ["closed", "open", "half_open"],
      title: "Pause channel",
      text: "Its backlog is parked and nothing is sent to it until it is resumed. It is never probed while paused.",
    },
    {
      action: "resume", label: "Resume", from: ["paused"],
      title: "Resume channel",
      text: "Its circuit closes and its parked backlog is released at once.",
    },
    {
      action: "open", label: "Force open", from: ["closed", "half_open", "paused"],
      title: "Force the circuit open",
      text: "Its backlog is parked; a probe tests the endpoint after the cooldown.",
    },
    {
      action: "close", label: "Force close", from: ["open", "half_open", "paused"],
      title: "Force the circuit closed",
      text: "Its parked backlog is released at once and deliveries flow again.",
    },
  ];

  const HOST_ACTIONS = [
    {
      action: "open", label: "Force open", from: ["closed", "half_open"],
      title: "Force the host circuit open",
      text: "Every channel on this host, of every tenant, is parked; a probe tests the host after the cooldown.",
    },
    {
      action: "close", label: "Force close", from: ["open", "half_open"],
      title: "Force the host circuit closed",
      text: "Every channel on this host is released at once (each channel's own circuit still applies).",
    },
  ];

  const { $, el, toast, allPages } = window.Breakwater; // common.js
  let key = sessionStorage.getItem(KEY_STORE);
  let cells = []; // cell ids from GET /api/v1/cells; empty without cells
  let cell = sessionStorage.getItem(CELL_STORE); // the cell shown
  let timer = null;
  let skewMs = 0; // server clock minus this browser's clock, from the Date header
  let lastOkAt = 0;
  let channels = [];
  let channelById = new Map();
  let prevStates = new Map();
  let pending = null; // { channel, spec } or { host, spec } while the confirmation dialog is open
  let hosts = [];
  let prevHostStates = new Map();

  // ---- helpers ------------------------------------------------------------------------------

  function serverNow() {
    return Date.now() + skewMs;
  }

  function fmtDuration(ms) {
    if (!isFinite(ms)) return "–";
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return `${s} s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m} min ${s % 60} s`;
    const h = Math.floor(m / 60);
    if (h < 24) return `${h} h ${m % 60} min`;
    return `${Math.floor(h / 24)} d ${h % 24} h`;
  }

  function fmtTime(iso) {
    const d = new Date(iso);
    return d.toLocaleTimeString([], { hour12: false });
  }

  function stateBadge(state) {
    return el("span", { class: "state", dataset: { state }, text: state.replace("_", "-") });
  }

  function channelLabel(c) {
    return c.name || "unnamed";
  }

  function host(url) {
    try {
      return new URL(url).host; // never the path or query: a URL may carry a token
    } catch {
      return "";
    }
  }

  class Unauthorized extends Error {}

  // An operator API call on the cell shown, or on `onCell`.
  async function api(path, init, onCell) {
    const headers = { Authorization: `Bearer ${key}`, Accept: "application/json" };
    const target = onCell || cell;
    if (target) headers["Breakwater-Cell"] = target;
    const resp = await fetch(path, {
      cache: "no-store",
      credentials: "omit",
      ...init,
      headers,
    });
    const date = resp.headers.get("Date");
    if (date) skewMs = new Date(date).getTime() - Date.now();
    let body = null;
    try { body = await resp.json(); } catch { /* empty or not JSON */ }
    if (resp.status === 401) throw new Unauthorized("The operator key was rejected.");
    if (resp.status === 403) throw new Unauthorized("That is a tenant key: this page needs the operator key.");
    if (!resp.ok) {
      const detail = body && (body.detail || body.title);
      throw new Error(detail ? `${resp.status}: ${detail}` : `HTTP ${resp.status}`);
    }
    return body;
  }

  // ---- cells --------------------------------------------------------------------------------

  // Reads the cells (no key needed: the router answers it); fills the picker when there are.
  async function loadCells() {
    try {
      const resp = await fetch("/api/v1/cells", {
        cache: "no-store", credentials: "omit", headers: { Accept: "application/json" },
      });
      const body = resp.ok ? await resp.json() : null;
      cells = ((body && body.cells) || []).map((c) => c.id);
    } catch {
      cells = [];
    }
    if (!cells.length) {
      cell = null;
      return;
    }
    if (!cells.includes(cell)) cell = cells[0];
    sessionStorage.setItem(CELL_STORE, cell);
    $("cell").replaceChildren(...cells.map((id) => el("option", { value: id, text: id })));
    $("cell").value = cell;
    $("cell-picker").hidden = false;
  }

  function showCell(id) {
    if (!cells.includes(id) || id === cell) return;
    cell = id;
    sessionStorage.setItem(CELL_STORE, cell);
    $("cell").value = cell;
    prevStates = new Map();
    prevHostStates = new Map();
    refresh();
  }

  // Every cell's queues (a cell that does not answer says so), for the cells card.
  async function cellSummaries() {
    if (cells.length < 2) return null;
    return Promise.all(cells.map((id) => api("/api/v1/admin/queues", undefined, id).then(
      (q) => ({ id, queues: q.data }),
      (e) => {
        if (e instanceof Unauthorized) throw e;
        return { id, error: e.message };
      })));
  }

  function renderCells(rows) {
    $("cells-card").hidden = !rows;
    if (!rows) return;
    const sum = (qs, f) => qs.reduce((n, q) => n + q[f], 0);
    const trs = rows.map((r) => {
      const show = el("button", { type: "button", text: "Show", title: `Show cell ${r.id}` });
      show.disabled = r.id === cell;
      show.addEventListener("click", () => showCell(r.id));
      const tr = el("tr", { dataset: { cell: r.id }, class: r.id === cell ? "current" : "" },
        el("td", { text: r.id }));
      if (r.error) {
        tr.append(el("td", { colspan: "3", class: "error", text: r.error }));
      } else {
        tr.append(
          el("td", { class: "num", text: sum(r.queues, "available") }),
          el("td", { class: "num", text: sum(r.queues, "executing") }),
          el("td", { class: "num", text: sum(r.queues, "parked") }));
      }
      tr.append(el("td", { class: "actions" }, show));
      return tr;
    });
    $("cells").tBodies[0].replaceChildren(...trs);
  }

  // ---- sign in / out ------------------------------------------------------------------------

  function showLogin(message) {
    $("board").hidden = true;
    $("forget").hidden = true;
    $("login").hidden = false;
    $("login-error").hidden = !message;
    $("login-error").textContent = message || "";
    setLive(false, "not connected");
    $("key-input").focus();
  }

  function signOut(message) {
    key = null;
    sessionStorage.removeItem(KEY_STORE);
    clearTimeout(timer);
    timer = null;
    showLogin(message);
  }

  async function signIn(candidate) {
    key = candidate;
    try {
      await api("/api/v1/admin/queues");
    } catch (e) {
      key = null;
      showLogin(e instanceof Unauthorized ? e.message : `Cannot reach the API: ${e.message}`);
      return;
    }
    sessionStorage.setItem(KEY_STORE, candidate);
    start();
  }

  function start() {
    $("login").hidden = true;
    $("board").hidden = false;
    $("forget").hidden = false;
    refresh();
  }

  // ---- polling ------------------------------------------------------------------------------

  function setLive(on, text) {
    const l = $("live");
    l.classList.toggle("on", on);
    l.classList.toggle("off", !on);
    l.textContent = text;
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refresh, document.hidden ? POLL_HIDDEN_MS : POLL_MS);
  }

  async function listChannels() {
    return allPages(api, "/api/v1/admin/channels?limit=1000", MAX_CHANNEL_PAGES);
  }

  async function refresh() {
    if (!key) return;
    try {
      const [queues, list, audit, hostPage, cellRows] = await Promise.all([
        api("/api/v1/admin/queues"),
        listChannels(),
        api("/api/v1/admin/audit?limit=100"),
        api("/api/v1/admin/hosts?limit=1000"),
        cellSummaries(),
      ]);
      renderCells(cellRows);
      hosts = hostPage.data;
      channels = list.all;
      channelById = new Map(channels.map((c) => [c.id, c]));
      renderQueues(queues.data);
      renderChannels(list.more);
      renderHosts();
      renderTransitions(audit.data);
      lastOkAt = Date.now();
      $("banner").hidden = true;
      const where = cell ? `cell ${cell} · ` : "";
      setLive(true, `${where}live · ${new Date().toLocaleTimeString([], { hour12: false })}`);
    } catch (e) {
      if (e instanceof Unauthorized) {
        signOut(e.message);
        return;
      }
      const since = lastOkAt ? ` (last update ${fmtDuration(Date.now() - lastOkAt)} ago)` : "";
      $("banner").textContent = `Cannot refresh: ${e.message}${since}. Retrying…`;
      $("banner").hidden = false;
      setLive(false, "reconnecting");
    }
    schedule();
  }

  // ---- rendering ----------------------------------------------------------------------------

  function renderQueues(rows) {
    const body = $("queues").tBodies[0];
    let parked = 0;
    const trs = rows.map((q) => {
      if (q.queue.startsWith("deliveries")) parked += q.parked;
      return el("tr", { dataset: { queue: q.queue } },
        el("td", { text: q.queue }),
        el("td", { class: "num", text: q.available, dataset: { col: "depth" } }),
        el("td", { class: "num", text: q.executing, dataset: { col: "in-flight" } }),
        el("td", { class: "num", text: q.scheduled }),
        el("td", { class: "num", text: q.parked }),
        el("td", { class: "num", text: q.available ? fmtDuration(q.oldest_available_ms) : "–" }));
    });
    body.replaceChildren(...trs);
    $("n-parked").textContent = parked;
  }

  function visibleChannels() {
    const state = $("filter-state").value;
    const text = $("filter-text").value.trim().toLowerCase();
    return channels
      .filter((c) => !state || c.circuit_state === state)
      .filter((c) => !text || [c.tenant_name, c.name || "", c.id, host(c.url)]
        .some((s) => s.toLowerCase().includes(text)))
      .sort((a, b) =>
        (STATE_ORDER[a.circuit_state] ?? 9) - (STATE_ORDER[b.circuit_state] ?? 9)
        || a.tenant_name.localeCompare(b.tenant_name)
        || channelLabel(a).localeCompare(channelLabel(b)));
  }

  function nextProbe(c) {
    if (c.circuit_state === "half_open") return "probing";
    if (c.circuit_state !== "open" || !c.next_probe_at) return "–";
    const ms = new Date(c.next_probe_at).getTime() - serverNow();
    return ms <= 0 ? "due" : `in ${fmtDuration(ms)}`;
  }

  function renderChannels(more) {
    const counts = { closed: 0, open: 0, half_open: 0, paused: 0 };
    for (const c of channels) counts[c.circuit_state] = (counts[c.circuit_state] || 0) + 1;
    for (const [s, n] of Object.entries(counts)) {
      const e = $(`n-${s}`);
      if (e) e.textContent = n;
    }
    const rows = visibleChannels().map((c) => {
      const prev = prevStates.get(c.id);
      const tr = el("tr", {
        dataset: { channelId: c.id, state: c.circuit_state },
        class: prev && prev !== c.circuit_state ? "changed" : "",
      });
      const buttons = actionButtons(ACTIONS, c.circuit_state, (spec) => askConfirm(c.id, spec));
      tr.append(
        el("td", { text: c.tenant_name }),
        el("td", { text: c.tier }),
        el("td", { title: c.id }, channelLabel(c), " ",
          el("span", { class: "id", text: `…${c.id.slice(-8)} ${host(c.url)}` })),
        el("td", { class: "state-cell" }, stateBadge(c.circuit_state)),
        sinceCell(c.circuit_changed_at),
        el("td", { class: "num", text: c.consecutive_failures }),
        el("td", { class: "num", text: c.parked }),
        el("td", { text: c.rate_limit || "–" }),
        el("td", { class: "probe", text: nextProbe(c) }),
        el("td", { class: "actions" }, ...buttons),
      );
      return tr;
    });
    prevStates = new Map(channels.map((c) => [c.id, c.circuit_state]));
    fillTable("channels", rows);
    $("channels-more").hidden = !more;
    $("channels-more").textContent = more
      ? `Showing the first ${channels.length} channels; filter by state or tenant to see others.`
      : "";
  }

  // How long ago `iso` (a server timestamp) was, by the server's clock.
  function sinceText(iso) {
    return fmtDuration(serverNow() - new Date(iso).getTime());
  }

  // A "since" cell: the time since `iso`, kept current by the ticker (td.since).
  function sinceCell(iso) {
    return el("td", { class: "num since", dataset: { since: iso }, text: sinceText(iso) });
  }

  // Replaces the rows of table `id` and shows its `<id>-empty` note when there are none.
  function fillTable(id, rows) {
    $(id).tBodies[0].replaceChildren(...rows);
    $(`${id}-empty`).hidden = rows.length > 0;
  }

  function hostProbe(h) {
    if (h.state === "half_open") return "probing";
    if (h.state !== "open" || !h.next_probe_at) return "–";
    const ms = new Date(h.next_probe_at).getTime() - serverNow();
    return ms <= 0 ? "due" : `in ${fmtDuration(ms)}`;
  }

  function renderHosts() {
    const rows = hosts
      .slice()
      .sort((a, b) => (STATE_ORDER[a.state] ?? 9) - (STATE_ORDER[b.state] ?? 9)
        || a.host_key.localeCompare(b.host_key))
      .map((h) => {
        const prev = prevHostStates.get(h.host_key);
        const tr = el("tr", {
          dataset: { hostKey: h.host_key, state: h.state },
          class: prev && prev !== h.state ? "changed" : "",
        });
        const buttons = actionButtons(HOST_ACTIONS, h.state,
          (spec) => askConfirmHost(h.host_key, spec));
        tr.append(
          el("td", { text: h.host_key }),
          el("td", { class: "state-cell" }, stateBadge(h.state)),
          sinceCell(h.changed_at),
          el("td", { class: "num", text: h.channels }),
          el("td", { class: "num", text: h.parked }),
          el("td", { class: "num", text: `${h.in_flight} / ${h.cap ?? "none"}` }),
          el("td", { class: "probe", text: hostProbe(h) }),
          el("td", { class: "actions" }, ...buttons),
        );
        return tr;
      });
    prevHostStates = new Map(hosts.map((h) => [h.host_key, h.state]));
    fillTable("hosts", rows);
  }

  function renderTransitions(entries) {
    const items = entries
      .filter((r) => r.to_state)
      .slice(0, 15)
      .map((r) => {
        const c = channelById.get(r.channel_id);
        const hostKey = r.details && r.details.host_key;
        const who = hostKey && r.action.startsWith("host.") ? `host ${hostKey}`
          : c ? `${c.tenant_name} / ${channelLabel(c)}` : (r.channel_id || "–");
        return el("li", { dataset: { channelId: r.channel_id || "" } },
          el("span", { class: "at", text: fmtTime(r.at), title: r.at }),
          el("span", { text: who }),
          stateBadge(r.from_state || "?"), " → ", stateBadge(r.to_state),
          el("span", { class: "who", text: r.actor }),
          el("span", { class: "why", text: r.reason || "", title: r.reason || "" }));
      });
    $("transitions").replaceChildren(...items);
    $("transitions-empty").hidden = items.length > 0;
  }

  // Time in state and next probe move every second, between polls.
  function tick() {
    for (const td of document.querySelectorAll("#channels td.since, #hosts td.since")) {
      td.textContent = sinceText(td.dataset.since);
    }
    for (const tr of document.querySelectorAll("#channels tr[data-channel-id]")) {
      const c = channelById.get(tr.dataset.channelId);
      const td = tr.querySelector("td.probe");
      if (c && td) td.textContent = nextProbe(c);
    }
  }

  // ---- actions ------------------------------------------------------------------------------

  // The action buttons of a row: one per spec (an ACTIONS or HOST_ACTIONS entry), enabled only
  // in the states it moves from; a click calls `ask(spec)` (the confirmation dialog).
  function actionButtons(specs, state, ask) {
    return specs.map((spec) => {
      const b = el("button", {
        type: "button", dataset: { action: spec.action }, text: spec.label,
        title: `${spec.title} (asks for confirmation)`,
      });
      b.disabled = !spec.from.includes(state);
      b.addEventListener("click", () => ask(spec));
      return b;
    });
  }

  function askConfirm(channelId, spec) {
    const c = channelById.get(channelId);
    if (!c) return;
    pending = { channel: c, spec };
    showConfirm(spec,
      `${channelLabel(c)} (tenant ${c.tenant_name}, now ${c.circuit_state.replace("_", "-")}).`);
  }

  function askConfirmHost(hostKey, spec) {
    const h = hosts.find((x) => x.host_key === hostKey);
    if (!h) return;
    pending = { host: h, spec };
    showConfirm(spec,
      `Host ${h.host_key} (${h.channels} channels, now ${h.state.replace("_", "-")}).`);
  }

  // Opens the confirmation dialog of `spec` (an ACTIONS or HOST_ACTIONS entry) on `what`, a
  // sentence naming the channel or host and its state.
  function showConfirm(spec, what) {
    $("confirm-title").textContent = `${spec.title}?`;
    $("confirm-text").textContent = `${what} ${spec.text}`;
    $("confirm-ok").textContent = spec.label;
    $("confirm-ok").dataset.action = spec.action;
    $("confirm-reason").value = "";
    $("confirm").showModal();
    $("confirm-reason").focus();
  }

  async function confirmed() {
    const p = pending;
    pending = null;
    $("confirm").close();
    if (!p) return;
    const reason = $("confirm-reason").value.trim();
    const q = reason ? `?reason=${encodeURIComponent(reason)}` : "";
    try {
      if (p.host) {
        await api(`/api/v1/admin/hosts/${encodeURIComponent(p.host.host_key)}/${p.spec.action}${q}`,
          { method: "POST" });
        toast(`Host ${p.host.host_key}: ${p.spec.label.toLowerCase()} done.`);
        refresh();
        return;
      }
      await api(`/api/v1/admin/channels/${encodeURIComponent(p.channel.id)}/${p.spec.action}${q}`,
        { method: "POST" });
      toast(`${channelLabel(p.channel)} (${p.channel.tenant_name}): ${p.spec.label.toLowerCase()} done.`);
    } catch (e) {
      if (e instanceof Unauthorized) {
        signOut(e.message);
        return;
      }
      toast(`${p.spec.label} failed: ${e.message}`, true);
    }
    refresh();
  }

  // ---- wiring -------------------------------------------------------------------------------

  document.addEventListener("DOMContentLoaded", () => {
    $("login-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const v = $("key-input").value.trim();
      $("key-input").value = "";
      if (v) signIn(v);
    });
    $("forget").addEventListener("click", () => signOut("Key forgotten."));
    $("confirm-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      confirmed();
    });
    $("confirm-cancel").addEventListener("click", () => {
      pending = null;
      $("confirm").close();
    });
    $("filter-state").addEventListener("change", () => renderChannels(false));
    $("filter-text").addEventListener("input", () => renderChannels(false));
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden && key) refresh();
    });
    $("cell").addEventListener("change", () => showCell($("cell").value));
    setInterval(tick, 1000);
    loadCells().then(() => {
      if (key) start();
      else showLogin("");
    });
  });
})();
