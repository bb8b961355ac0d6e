// Workflows: every filter (status, type, time range, sort) and the page itself live in the URL,
// so Back returns to the page it left and a link shares exactly what was seen. A page change is
// a navigation: the previous page's requests die with its context, so a live refresh can never
// draw the previous page's rows under the new page number (issue 29: the paging race).

import { ApiError, get, post, seg } from "../api.js";
import { confirmAction } from "../confirm.js";
import { ago, badge, duration, h, redraw, replace, s, table } from "../dom.js";

export const WORKFLOW_STATUSES = ["RUNNING", "PAUSED", "COMPENSATING", "CANCELLING", "SUCCEEDED", "COMPENSATED", "CANCELLED", "FAILED"];
const PAGE_SIZE = 20;
const REFRESH_MS = 2000;
// Counts are dearer (one query per status and shard, docs/architecture.md): fetched at most
// every 30 s per set of filters, shared by every page of that list, never awaited by a page.
const COUNTS_MS = 30_000;
const WORKFLOW_ID = /^[A-Za-z0-9_-]{1,64}$/;
const RANGES = { "": "any time", "1h": "last hour", "1d": "last day", "7d": "last week", custom: "custom…" };
const RANGE_MS = { "1h": 3_600_000, "1d": 86_400_000, "7d": 604_800_000 };
// The chart of a time range: its buckets (5 min over an hour, an hour over a day, 6 h over a
// week, 24 over a custom range), from GET /workflows/series (128 index queries a read, at most
// 10,000 keys a series: docs/architecture.md), fetched as the counts are, at most every 30 s.
const SERIES_BUCKETS = { "1h": 12, "1d": 24, "7d": 28, custom: 24 };
const FILTER_KEYS = ["status", "type", "tag", "range", "created_after", "created_before", "sort", "limit"];
// The bulk actions: the API route and the statuses each applies to (docs/api.md).
const BULK = {
  cancel: { label: "Cancel", route: "cancel", from: ["RUNNING", "PAUSED"], danger: true },
  retry: { label: "Retry", route: "retry", from: ["FAILED"], danger: false },
  resume: { label: "Resume", route: "resume", from: ["PAUSED"], danger: false },
};

/** Live refresh on/off, remembered for the session. */
export function liveToggle(onChange) {
  const stored = window.sessionStorage.getItem("shepherd-live");
  let on = stored === null ? true : stored === "on";
  const button = h("button", { type: "button", class: "toggle", "aria-pressed": String(on) });
  const paint = () => {
    button.setAttribute("aria-pressed", String(on));
    replace(button, `Live refresh: ${on ? "on" : "off"}`);
  };
  button.addEventListener("click", () => {
    on = !on;
    window.sessionStorage.setItem("shepherd-live", on ? "on" : "off");
    paint();
    onChange?.(on);
  });
  paint();
  return { button, isOn: () => on };
}

function selectOf(name, label, options, chosen, anyLabel = "any") {
  const entries = Array.isArray(options) ? options.map((v) => [v, v]) : Object.entries(options);
  return h(
    "label",
    {},
    label,
    h(
      "select",
      { name },
      anyLabel === null ? null : h("option", { value: "" }, anyLabel),
      entries.filter(([value]) => value !== "" || anyLabel === null).map(([value, text]) => h("option", { value, selected: value === chosen }, text)),
    ),
  );
}

async function lookup(text) {
  const q = text.trim();
  if (!q) return null;
  if (WORKFLOW_ID.test(q)) {
    try {
      await get(`/workflows/${seg(q)}`);
      return q;
    } catch (exc) {
      if (!(exc instanceof ApiError) || exc.status !== 404) throw exc;
    }
  }
  if (q.length > 128) return null;
  const { data } = await get("/workflows", { idempotency_key: q });
  return data.items[0]?.workflow_id || null;
}

/** A `datetime-local` value (the browser's zone) as an ISO instant, or "". */
function localToIso(value) {
  if (!value) return "";
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? "" : d.toISOString();
}

function isoToLocal(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** The list's URL for these filters at one page (page 1 carries no token). */
function listHash(filters, page = 1, token = null) {
  const params = new URLSearchParams();
  for (const key of FILTER_KEYS) if (filters[key]) params.set(key, filters[key]);
  if (page > 1 && token) {
    params.set("page", String(page));
    params.set("at", token);
  }
  const qs = params.toString();
  return `#/workflows${qs ? `?${qs}` : ""}`;
}

/** The tokens of the pages seen under one set of filters (for "Previous page"), per tab. */
function tokenTrail(filters) {
  const key = `shepherd-pages:${listHash(filters)}`;
  const read = () => {
    try {
      return JSON.parse(window.sessionStorage.getItem(key) || "{}");
    } catch {
      return {};
    }
  };
  return {
    get: (page) => read()[page] || null,
    set: (page, token) => {
      const trail = read();
      trail[page] = token;
      window.sessionStorage.setItem(key, JSON.stringify(trail));
    },
  };
}

/** Starts, successes and failures of every time (no range chosen) as three bars (from the
    counts: no extra request), every bar labelled with its number. */
function chart(data) {
  const of = (status) => data.counts.find((c) => c.status === status)?.count || 0;
  const bars = [
    ["Started", data.total, "st-RUNNING"],
    ["Succeeded", of("SUCCEEDED"), "st-SUCCEEDED"],
    ["Failed or undone", of("FAILED") + of("COMPENSATED"), "st-FAILED"],
  ];
  const most = Math.max(1, ...bars.map(([, n]) => n));
  const width = 260;
  const row = 22;
  return [
    h("figcaption", {}, "Of every time (choose a time range to see them over time)"),
    s(
      "svg",
      { viewBox: `0 0 ${width} ${bars.length * row}`, width, height: bars.length * row, role: "img", "aria-label": bars.map(([label, n]) => `${label} ${n}`).join(", ") },
      bars.map(([label, n, tone], i) =>
        s(
          "g",
          { class: `bar ${tone}`, "data-bar": label, "data-count": String(n), transform: `translate(0 ${i * row})` },
          s("text", { x: 0, y: 15, class: "bar-label" }, label),
          s("rect", { x: 110, y: 3, height: 15, width: Math.max(2, Math.round((n / most) * 100)), rx: 2 }),
          s("text", { x: 116 + Math.max(2, Math.round((n / most) * 100)), y: 15, class: "bar-label" }, n.toLocaleString()),
        ),
      ),
    ),
  ];
}

const pad2 = (n) => String(n).padStart(2, "0");

/** A bucket's start in the browser's clock: "14:05", or "Mar 3 14:00" over more than a day. */
function bucketTime(iso, withDay) {
  const d = new Date(iso);
  const clock = `${pad2(d.getHours())}:${pad2(d.getMinutes())}`;
  return withDay ? `${d.toLocaleDateString(undefined, { month: "short", day: "numeric" })} ${clock}` : clock;
}

/** "5 min", "1 h", "6 h", "1 d 2 h": a bucket's width in words. */
function widthText(seconds) {
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  if (seconds < 86_400) return `${+(seconds / 3600).toFixed(1)} h`;
  return `${+(seconds / 86_400).toFixed(1)} d`;
}

/**
 * Starts, successes and failures per time bucket as a small SVG bar chart (issue 29.8): one bar
 * per bucket, as tall as the workflows started in it, split into those that have since
 * succeeded, failed or been undone, and the rest. Said in words too: the SVG's label sums it
 * up, every bar has a title, and a table below gives every bucket's numbers.
 */
function seriesChart(data) {
  const buckets = data.buckets;
  const withDay = Date.parse(data.created_before) - Date.parse(data.created_after) > 86_400_000;
  const failedOf = (b) => b.failed + b.compensated;
  const plus = (b) => (b.capped ? "+" : "");
  const total = (key) => buckets.reduce((n, b) => n + (typeof key === "function" ? key(b) : b[key]), 0);
  const started = total("started");
  const succeeded = total("succeeded");
  const failed = total(failedOf);
  const busiest = buckets.reduce((best, b) => (b.started > (best?.started ?? -1) ? b : best), null);
  const most = Math.max(1, ...buckets.map((b) => b.started));
  const per = widthText(data.bucket_seconds);
  const [W, H, left, top, bottom] = [480, 150, 34, 8, 22];
  const plotH = H - top - bottom;
  const step = (W - left - 4) / Math.max(1, buckets.length);
  const barW = Math.max(2, step - 2);
  const y = (n) => top + plotH - (n / most) * plotH;
  const summary =
    `${started.toLocaleString()}${data.capped ? "+" : ""} started, ${succeeded.toLocaleString()} succeeded, ${failed.toLocaleString()} failed or undone, ` +
    `per ${per} from ${bucketTime(data.created_after, withDay)} to ${bucketTime(data.created_before, withDay)}` +
    (busiest && busiest.started ? `; the most starts (${busiest.started}) at ${bucketTime(busiest.start, withDay)}` : "");
  const bars = buckets.map((b, i) => {
    const x = left + i * step + 1;
    const parts = [
      ["seg st-SUCCEEDED", b.succeeded],
      ["seg st-FAILED", failedOf(b)],
      ["seg seg-other", Math.max(0, b.started - b.succeeded - failedOf(b))],
    ];
    let base = 0;
    const rects = [];
    for (const [cls, n] of parts) {
      if (n > 0) rects.push(s("rect", { class: cls, x: x.toFixed(1), y: y(base + n).toFixed(1), width: barW.toFixed(1), height: Math.max(1, y(base) - y(base + n)).toFixed(1) }));
      base += n;
    }
    return s(
      "g",
      { class: "series-bar", "data-start": b.start, "data-started": String(b.started), "data-succeeded": String(b.succeeded), "data-failed": String(failedOf(b)), "data-capped": String(b.capped) },
      s("title", {}, `${bucketTime(b.start, withDay)}: ${b.started}${plus(b)} started, ${b.succeeded} succeeded, ${failedOf(b)} failed or undone`),
      // The whole bucket's height answers a hover, even where its bar is short or empty.
      s("rect", { class: "hit", x: x.toFixed(1), y: top, width: barW.toFixed(1), height: plotH }),
      rects,
    );
  });
  const last = buckets[buckets.length - 1];
  const rows = buckets.map((b) =>
    h(
      "tr",
      { "data-start": b.start },
      h("th", { scope: "row" }, h("time", { datetime: b.start, title: `${b.start} – ${b.end}` }, bucketTime(b.start, withDay))),
      h("td", { class: "num" }, `${b.started.toLocaleString()}${plus(b)}`),
      h("td", { class: "num" }, `${b.succeeded.toLocaleString()}${plus(b)}`),
      h("td", { class: "num" }, `${failedOf(b).toLocaleString()}${plus(b)}`),
    ),
  );
  return [
    h("figcaption", { id: "series-caption" }, `Started, succeeded and failed per ${per}, by when each workflow started`),
    s(
      "svg",
      { class: "series", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": summary, "data-buckets": String(buckets.length) },
      s("line", { class: "axis", x1: left, x2: W - 2, y1: top + plotH + 0.5, y2: top + plotH + 0.5 }),
      s("line", { class: "grid", x1: left, x2: W - 2, y1: top + 0.5, y2: top + 0.5 }),
      s("text", { class: "tick", x: left - 4, y: top + 4, "text-anchor": "end" }, most.toLocaleString()),
      s("text", { class: "tick", x: left - 4, y: top + plotH, "text-anchor": "end" }, "0"),
      bars,
      s("text", { class: "tick", x: left, y: H - 6 }, bucketTime(buckets[0].start, withDay)),
      s("text", { class: "tick", x: W - 2, y: H - 6, "text-anchor": "end" }, bucketTime(last.end, withDay)),
    ),
    h(
      "ul",
      { class: "legend" },
      h("li", {}, h("span", { class: "swatch st-SUCCEEDED" }), "Succeeded"),
      h("li", {}, h("span", { class: "swatch st-FAILED" }), "Failed or undone"),
      h("li", {}, h("span", { class: "swatch seg-other" }), "Not finished, paused or cancelled"),
    ),
    h("p", { class: "series-total", id: "series-total" }, summary, "."),
    data.capped ? h("p", { class: "muted", id: "series-capped" }, "Buckets marked + are “at least”: the read stops at 10,000 workflows a series, newest first.") : null,
    h(
      "details",
      { class: "series-table", dataset: { key: "series-table" } },
      h("summary", {}, "Every bucket as a table"),
      table(`Per ${per}, by start time`, ["From", "Started", "Succeeded", "Failed or undone"], rows),
    ),
  ];
}

/** How long a workflow ran (or has been running). */
function ran(wf) {
  return duration(wf.created_at, wf.finished_at || null);
}

function errorText(error) {
  if (!error) return "";
  return `${error.type || "Error"}: ${error.message || ""}`;
}

export async function workflowsPage(ctx, { query }) {
  const filters = {
    status: WORKFLOW_STATUSES.includes(query.status) ? query.status : "",
    type: query.type || "",
    range: query.range in RANGES ? query.range : "",
    created_after: query.created_after || "",
    created_before: query.created_before || "",
    sort: query.sort === "oldest" ? "oldest" : "",
    limit: query.limit || "",
    // A tag `key:value` (issue 37.5): listed through the tag's own index, not with a status
    // or a type (the API refuses the pair), so those are left out of its query.
    tag: query.tag || "",
  };
  const limit = Math.min(100, Math.max(1, Number.parseInt(filters.limit, 10) || PAGE_SIZE));
  const pageNumber = Math.max(1, Number.parseInt(query.page, 10) || 1);
  const token = pageNumber > 1 ? query.at || null : null;
  const trail = tokenTrail(filters);
  let types = [];
  let typesProblem = null; // an API that did not answer: said at once, not after the list too
  try {
    types = (await get("/definitions")).data.items.map((d) => d.name);
  } catch (exc) {
    types = filters.type ? [filters.type] : [];
    if (exc instanceof ApiError && (exc.status === 0 || exc.status >= 500)) typesProblem = exc;
  }
  let lastText = "";
  let generation = 0; // a reply older than the newest request is dropped, never drawn
  let counting = false;
  let charting = false;
  let shown = [];
  const selected = new Set();

  const live = liveToggle((on) => on && refresh());
  const updated = h("span", { class: "muted", "aria-live": "off" });
  const problem = h("p", { class: "problem", role: "alert" });
  const rowsHost = h("div", { id: "workflow-table", "aria-busy": "true" }, h("p", { class: "muted loading" }, "Loading workflows…"));
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  const found = h("p", { class: "lookup-result", role: "status" });
  const countsHost = h("nav", { class: "counts", id: "status-counts", "aria-label": "Workflows per status" }, h("span", { class: "muted" }, "Counting…"));
  const bulkHost = h("div", { class: "bulk toolbar", id: "bulk-actions" });
  const chartHost = h("figure", { class: "mini-chart", id: "range-chart" }, filters.created_after ? h("figcaption", { class: "muted loading" }, "Reading the chart of this range…") : null);
  const bulkOutcome = h("p", { class: "outcome", role: "status", id: "bulk-outcome", hidden: true });

  // ------------------------------------------------------------------------ filters form
  const after = h("input", { type: "datetime-local", name: "created_after", value: isoToLocal(filters.created_after) });
  const before = h("input", { type: "datetime-local", name: "created_before", value: isoToLocal(filters.created_before) });
  const custom = h("span", { class: "custom-range", hidden: filters.range !== "custom" }, h("label", {}, "From ", after), h("label", {}, "To ", before));
  const rangeSelect = selectOf("range", "Created ", RANGES, filters.range, null);
  rangeSelect.querySelector("select").addEventListener("change", (event) => {
    custom.hidden = event.target.value !== "custom";
  });
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter workflows" },
    selectOf("status", "Status ", WORKFLOW_STATUSES, filters.status),
    selectOf("type", "Type ", types, filters.type),
    rangeSelect,
    custom,
    selectOf("sort", "Order ", { "": "newest first", oldest: "oldest first" }, filters.sort, null),
    h("label", {}, "Tag ", h("input", { name: "tag", type: "search", size: 18, placeholder: "key:value", value: filters.tag, title: "Your workflows started with this tag (not with a status or a type)" })),
    h("button", { type: "submit", class: "primary" }, "Apply filters"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const range = data.get("range") || "";
    const next = { status: data.get("status") || "", type: data.get("type") || "", tag: (data.get("tag") || "").trim(), range, sort: data.get("sort") || "", limit: filters.limit };
    // A relative range is fixed when applied: the page's token is signed with its bounds,
    // so every page of this list shows the same window.
    if (RANGE_MS[range]) next.created_after = new Date(Date.now() - RANGE_MS[range]).toISOString();
    if (range === "custom") {
      next.created_after = localToIso(after.value);
      next.created_before = localToIso(before.value);
    }
    window.location.hash = listHash(next);
  });

  const input = h("input", { name: "q", type: "search", autocomplete: "off", spellcheck: "false", size: 36, placeholder: "workflow id or idempotency key" });
  const finder = h("form", { class: "lookup", role: "search", "aria-label": "Find a workflow" }, h("label", {}, "Find ", input), h("button", { type: "submit" }, "Find"));
  finder.addEventListener("submit", async (event) => {
    event.preventDefault();
    replace(found, "Looking…");
    try {
      const id = await lookup(input.value);
      if (id) window.location.hash = `#/workflows/${seg(id)}`;
      else replace(found, "None of your workflows has that id or idempotency key.");
    } catch (exc) {
      replace(found, exc.describe ? exc.describe() : String(exc));
    }
  });

  // ---------------------------------------------------------------------- data and drawing
  const apiQuery = () => ({
    status: filters.tag ? undefined : filters.status,
    type: filters.tag ? undefined : filters.type,
    tag: filters.tag || undefined,
    created_after: filters.created_after,
    created_before: filters.created_before,
    sort: filters.sort || undefined,
    limit,
  });

  async function refresh() {
    const mine = ++generation;
    let data;
    try {
      ({ data } = await get("/workflows", { ...apiQuery(), next_token: token }));
    } catch (exc) {
      if (!ctx.alive || mine !== generation) return;
      rowsHost.setAttribute("aria-busy", "false");
      replace(problem, exc.describe ? exc.describe() : String(exc));
      return;
    }
    if (!ctx.alive || mine !== generation) return;
    replace(problem);
    replace(updated, "updated ", ago(new Date().toISOString()));
    if (data.next_token) trail.set(pageNumber + 1, data.next_token);
    const text = JSON.stringify(data);
    if (text !== lastText) {
      // Redraw only on change, so focus and selection survive a refresh.
      lastText = text;
      shown = data.items;
      drawRows(data.items);
      drawPager(data.next_token || null);
    }
    rowsHost.setAttribute("aria-busy", "false");
    refreshCounts();
    refreshSeries();
  }

  async function refreshCounts() {
    const key = `shepherd-counts:${listHash({ ...filters, status: "" })}`;
    let cached = null;
    try {
      cached = JSON.parse(window.sessionStorage.getItem(key) || "null");
    } catch {
      cached = null;
    }
    if (cached && Date.now() - cached.at < COUNTS_MS) {
      drawCounts(cached.data);
      return;
    }
    if (counting) return;
    counting = true;
    let data;
    try {
      ({ data } = await get("/workflows/counts", { type: filters.type, created_after: filters.created_after, created_before: filters.created_before }));
    } catch (exc) {
      if (ctx.alive) replace(countsHost, h("span", { class: "problem" }, `counts unavailable: ${exc.describe ? exc.describe() : exc}`));
      return;
    } finally {
      counting = false;
    }
    window.sessionStorage.setItem(key, JSON.stringify({ at: Date.now(), data }));
    if (ctx.alive) drawCounts(data);
  }

  // The chart of a time range, from GET /workflows/series: cached per filters, at most every
  // 30 s (the same cadence as the counts), never awaited by a page.
  async function refreshSeries() {
    if (!filters.created_after) return;
    const key = `shepherd-series:${listHash({ ...filters, status: "" })}`;
    let cached = null;
    try {
      cached = JSON.parse(window.sessionStorage.getItem(key) || "null");
    } catch {
      cached = null;
    }
    if (cached && Date.now() - cached.at < COUNTS_MS) {
      drawSeries(cached.data);
      return;
    }
    if (charting) return;
    charting = true;
    let data;
    try {
      ({ data } = await get("/workflows/series", {
        type: filters.type,
        created_after: filters.created_after,
        created_before: filters.created_before,
        buckets: SERIES_BUCKETS[filters.range] || SERIES_BUCKETS.custom,
      }));
    } catch (exc) {
      if (ctx.alive) replace(chartHost, h("figcaption", {}, "Over time"), h("p", { class: "problem" }, `chart unavailable: ${exc.describe ? exc.describe() : exc}`));
      return;
    } finally {
      charting = false;
    }
    window.sessionStorage.setItem(key, JSON.stringify({ at: Date.now(), data }));
    if (ctx.alive) drawSeries(data);
  }

  let seriesText = "";
  function drawSeries(data) {
    const text = JSON.stringify(data);
    if (text === seriesText) return; // unchanged: the table's fold and focus stay as they are
    seriesText = text;
    redraw(chartHost, seriesChart(data));
  }

  function drawCounts(data) {
    const chip = (status, count, capped) => {
      const label = `${status} ${count.toLocaleString()}${capped ? "+" : ""}`;
      const to = listHash({ ...filters, status });
      return h("a", { href: to, class: `count-chip badge st-${status}`, "data-status": status, "aria-current": filters.status === status ? "true" : null }, label);
    };
    replace(
      countsHost,
      h("a", { href: listHash({ ...filters, status: "" }), class: "count-chip", "data-status": "ALL", "aria-current": filters.status ? null : "true" }, `All ${data.total.toLocaleString()}${data.capped ? "+" : ""}`),
      data.counts.filter((c) => c.count > 0 || c.status === filters.status).map((c) => chip(c.status, c.count, c.capped)),
    );
    countsHost.dataset.total = String(data.total);
    if (!filters.created_after) replace(chartHost, chart(data));
  }

  function drawRows(items) {
    if (!items.length) {
      replace(rowsHost, h("p", { class: "empty" }, pageNumber > 1 ? "No more workflows." : "No workflows match."));
      drawBulk();
      return;
    }
    const rows = [];
    for (const wf of items) {
      const id = wf.workflow_id;
      const box = h("input", { type: "checkbox", "aria-label": `Select ${id}`, checked: selected.has(id), "data-key": `sel-${id}` });
      box.addEventListener("change", () => {
        if (box.checked) selected.add(id);
        else selected.delete(id);
        drawBulk();
      });
      const detailId = `row-detail-${id}`;
      const expander = wf.error
        ? h("button", { type: "button", class: "expander", "aria-expanded": "false", "aria-controls": detailId, "data-key": `exp-${id}` }, "Show error")
        : null;
      rows.push(
        h(
          "tr",
          { "data-workflow-id": id, class: "wf-row" },
          h("td", {}, box),
          h(
            "td",
            {},
            h("a", { href: `#/workflows/${seg(id)}`, class: "mono" }, id),
            wf.tags ? h("div", { class: "muted tags" }, Object.entries(wf.tags).map(([k, v]) => `${k}:${v}`).join(" ")) : null,
          ),
          h("td", {}, wf.type),
          h("td", {}, badge(wf.status), wf.error?.operator_needed ? h("span", { class: "operator-needed" }, " operator needed") : null),
          h("td", { class: "step-name" }, wf.error?.step || h("span", { class: "muted" }, "—")),
          h("td", { class: "error-text" }, wf.error ? h("span", { class: "error-summary" }, errorText(wf.error)) : h("span", { class: "muted" }, "—"), expander ? " " : null, expander),
          h("td", {}, ago(wf.created_at)),
          h("td", {}, ran(wf)),
          h("td", { class: "mono" }, wf.idempotency_key || h("span", { class: "muted" }, "—")),
        ),
      );
      if (expander) {
        const detail = h(
          "tr",
          { id: detailId, class: "row-detail", hidden: true },
          h("td", { colspan: "9" }, h("pre", { class: "error-full" }, [errorText(wf.error), wf.error.step ? `\nstep: ${wf.error.step}` : ""].join("")), h("a", { href: `#/workflows/${seg(id)}` }, "Open the workflow")),
        );
        expander.addEventListener("click", () => {
          const open = detail.hidden;
          detail.hidden = !open;
          expander.setAttribute("aria-expanded", String(open));
          replace(expander, open ? "Hide error" : "Show error");
        });
        rows.push(detail);
      }
    }
    const order = filters.sort === "oldest" ? "oldest first" : "newest first";
    replace(rowsHost, table(`Your workflows, ${order} (page ${pageNumber})`, ["", "Workflow", "Type", "Status", "Step", "Error", "Created", "Duration", "Idempotency key"], rows));
    drawBulk();
  }

  function drawBulk() {
    const chosen = shown.filter((wf) => selected.has(wf.workflow_id));
    const buttons = Object.entries(BULK).map(([name, action]) => {
      const apply = chosen.filter((wf) => action.from.includes(wf.status));
      return h("button", { type: "button", class: action.danger ? "danger" : "", disabled: apply.length === 0, "data-bulk": name, on: { click: () => bulk(name, apply) } }, `${action.label} selected (${apply.length})`);
    });
    replace(bulkHost, h("span", { class: "muted" }, `${chosen.length} selected`), buttons);
  }

  async function bulk(name, targets) {
    const action = BULK[name];
    const outcome = await confirmAction({
      title: `${action.label} ${targets.length} workflow${targets.length === 1 ? "" : "s"}?`,
      body: [
        h("p", {}, `These will be sent ${action.label.toLowerCase()} (only those now ${action.from.join(" or ")}):`),
        h("ul", { class: "bulk-list" }, targets.map((wf) => h("li", {}, h("span", { class: "mono" }, wf.workflow_id), ` ${wf.type} — ${wf.status}`))),
      ],
      confirmLabel: `${action.label} ${targets.length}`,
      danger: action.danger,
      act: async () => {
        const results = [];
        for (const wf of targets) {
          try {
            await post(`/workflows/${seg(wf.workflow_id)}/${action.route}`, undefined);
            results.push([wf.workflow_id, true, "done"]);
          } catch (exc) {
            results.push([wf.workflow_id, false, exc.describe ? exc.describe() : String(exc)]);
          }
        }
        return results;
      },
    });
    if (!outcome || !ctx.alive) return;
    const results = outcome.reply || [];
    const ok = results.filter((r) => r[1]).length;
    bulkOutcome.hidden = false;
    replace(bulkOutcome, `${action.label}: ${ok} of ${results.length} accepted`, h("ul", {}, results.filter((r) => !r[1]).map(([id, , message]) => h("li", {}, h("span", { class: "mono" }, id), ` refused — ${message}`))));
    selected.clear();
    lastText = "";
    window.sessionStorage.removeItem(`shepherd-counts:${listHash({ ...filters, status: "" })}`);
    window.sessionStorage.removeItem(`shepherd-series:${listHash({ ...filters, status: "" })}`);
    await refresh();
  }

  function drawPager(nextToken) {
    const previous = pageNumber === 2 ? listHash(filters) : listHash(filters, pageNumber - 1, trail.get(pageNumber - 1));
    const link = (label, to, enabled) =>
      enabled ? h("a", { href: to, class: "button-link", role: "button" }, label) : h("button", { type: "button", disabled: true }, label);
    replace(
      pager,
      link("First page", listHash(filters), pageNumber > 1),
      link("Previous page", previous, pageNumber > 1),
      h("span", {}, `Page ${pageNumber}`),
      link("Next page", nextToken ? listHash(filters, pageNumber + 1, nextToken) : "", Boolean(nextToken)),
    );
  }

  replace(
    ctx.main,
    h("h1", { tabindex: "-1" }, "Workflows"),
    h("div", { class: "overview" }, countsHost, chartHost),
    h("div", { class: "toolbar" }, form),
    h("div", { class: "toolbar" }, finder),
    found,
    h("div", { class: "toolbar" }, live.button, updated),
    problem,
    bulkHost,
    bulkOutcome,
    rowsHost,
    pager,
  );
  if (typesProblem) replace(problem, typesProblem.describe());
  await refresh();
  ctx.every(REFRESH_MS, async () => {
    if (live.isOn()) await refresh();
  });
}
