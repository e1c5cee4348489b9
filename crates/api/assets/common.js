// Breakwater's pages (the operator page /admin and the tenant portal /portal): the helpers both
// use. Plain browser JavaScript, no build step, no dependencies; loaded before the page's own
// script (`<script src="/assets/common.js" defer>` first: deferred scripts run in order).
//
// Everything here inserts text as text (textContent), never as HTML.
"use strict";

window.Breakwater = (() => {
  /** The element with this id. */
  const $ = (id) => document.getElementById(id);

  /**
   * A new element: `el("td", {class, dataset, text, title, ...attributes}, ...children)`.
   * Children are nodes or anything else, inserted as text; null and undefined are skipped.
   */
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

  /**
   * Shows `text` in the page's `#toast` for `ms` (default 5 s, 8 s when `bad`); a bad one is red.
   */
  function toast(text, bad, ms) {
    const t = $("toast");
    t.textContent = text;
    t.classList.toggle("bad", !!bad);
    t.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { t.hidden = true; }, ms || (bad ? 8000 : 5000));
  }

  /**
   * Every row of a cursor-paged list (`{data, next_cursor}`, the API's one way to page):
   * `get(path)` is the page's API call, `path` the list's URL with its query (without `after`).
   * Stops after `maxPages` pages; `more` says whether rows were left.
   */
  async function allPages(get, path, maxPages) {
    const sep = path.includes("?") ? "&" : "?";
    let all = [];
    let after = null;
    for (let page = 0; page < maxPages; page++) {
      const r = await get(after ? `${path}${sep}after=${encodeURIComponent(after)}` : path);
      all = all.concat((r && r.data) || []);
      after = r && r.next_cursor;
      if (!after) return { all, more: false };
    }
    return { all, more: true };
  }

  return Object.freeze({ $, el, toast, allPages });
})();
