// A map step (issue 24) on its workflow's page: its progress as a bar of its items' counts
// (said in words too), and a table of its items paged through
// GET /workflows/{id}/steps/{step}/items, a page at a time, never the whole map.
//
// The table's page lives in the workflow page's URL (`?items=<step>&status=&page=&at=<token>`):
// a page or filter change is a navigation, so the previous page's requests die with its
// context and a live refresh never draws another page's rows (as the workflows list, issue 29).
// A filtered read of the API scans at most 1,000 items and may come back short, even empty,
// with a next_token: a page follows those tokens until it is full (or MAX_READS reads), and
// never says "no items" while a token remains.

import { get, seg } from "./api.js";
import { badge, duration, h, redraw, replace, table, time } from "./dom.js";
import { jsonView, refLink } from "./json.js";

export const ITEM_STATUSES = ["PENDING", "QUEUED", "RUNNING", "WAITING", "SUCCEEDED", "FAILED", "CANCELLED"];
export const ITEMS_PAGE = 25;
const MAX_READS = 5; // reads of up to 1,000 items each, per filtered page and refresh
const REFRESH_MS = 2000;
const LINKS_REFRESH_MS = 60_000; // presigned links expire after 5 minutes
const SHORT_OUTPUT = 160;

// The bar's parts, in order, with their words.
const PARTS = [
  ["succeeded", "succeeded"],
  ["failed", "failed"],
  ["cancelled", "cancelled"],
  ["running", "in flight"],
  ["pending", "not started"],
];

const plural = (n, one, many = `${one}s`) => `${n.toLocaleString()} ${n === 1 ? one : many}`;

/** A map's counts in words: "40 of 120 items succeeded, 2 failed, 10 in flight, 68 not started". */
export function mapWords(m) {
  const parts = PARTS.filter(([key]) => key !== "succeeded" && m[key] > 0).map(([key, words]) => `${m[key].toLocaleString()} ${words}`);
  const undone = m.compensated ? `; ${m.compensated.toLocaleString()} undone` : "";
  return `${m.succeeded.toLocaleString()} of ${plural(m.total, "item")} succeeded${parts.length ? `, ${parts.join(", ")}` : ""}${undone}`;
}

/** A map's progress: a bar with a part per status (a progressbar to assistive technology, its
    value the items that ended, its text every count in words) and the counts in words. */
export function mapProgress(m, { id } = {}) {
  const ended = m.succeeded + m.failed + m.cancelled;
  const words = mapWords(m);
  const bar = h(
    "div",
    {
      class: "map-bar",
      role: "progressbar",
      "aria-valuemin": "0",
      "aria-valuemax": String(m.total),
      "aria-valuenow": String(ended),
      "aria-valuetext": `${words}; map ${m.status}`,
      "aria-label": "Items",
      id,
    },
    PARTS.filter(([key]) => m[key] > 0).map(([key, label]) => {
      const part = h("span", { class: `map-part part-${key}`, "data-part": key, "data-count": String(m[key]), title: `${m[key].toLocaleString()} ${label}` });
      // Through the CSSOM: the console's CSP allows no inline style attribute.
      part.style.width = `${((100 * m[key]) / Math.max(1, m.total)).toFixed(3)}%`;
      return part;
    }),
  );
  const legendItems = PARTS.map(([key, label]) =>
    h("li", { "data-count-of": key }, h("span", { class: `swatch part-${key}`, "aria-hidden": "true" }), `${m[key].toLocaleString()} ${label}`),
  );
  return h(
    "div",
    { class: "map-progress", "data-total": String(m.total), "data-status": m.status },
    bar,
    h("p", { class: "map-words" }, `${words}. `, h("span", { class: "muted" }, `The map is ${m.status}; at most ${m.max_concurrency.toLocaleString()} in flight.`)),
    h("ul", { class: "legend map-legend", "aria-hidden": "true" }, legendItems, m.compensated ? h("li", {}, `${m.compensated.toLocaleString()} undone`) : null),
  );
}

/** The workflow page's URL showing `step`'s items (page 1 carries no token). */
export function itemsHash(workflowId, step, { status = "", page = 1, token = null } = {}) {
  const params = new URLSearchParams();
  params.set("items", step);
  if (status) params.set("status", status);
  if (page > 1 && token) {
    params.set("page", String(page));
    params.set("at", token);
  }
  return `#/workflows/${seg(workflowId)}?${params.toString()}`;
}

/** The tokens of the item pages seen under one filter (for "Previous page"), per tab. */
function tokenTrail(workflowId, step, status) {
  const key = `shepherd-items:${workflowId}:${step}:${status}`;
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

/** A table cell's view of an item's output: short JSON as text, a longer one folded, a large
    one its download link (the API gives a large output as `output_ref`). */
function outputCell(item, key) {
  if (item.output_ref) return refLink(item.output_ref);
  if (item.output === null || item.output === undefined) return h("span", { class: "muted" }, "—");
  const text = JSON.stringify(item.output);
  if (text.length <= SHORT_OUTPUT) return h("code", { class: "item-output" }, text);
  return h(
    "details",
    { class: "item-output", dataset: { key: `${key}:output` } },
    h("summary", {}, h("code", {}, `${text.slice(0, 60)}…`), ` (${text.length.toLocaleString()} characters)`),
    jsonView("Output", item.output, { key: `${key}:output-json` }),
  );
}

function childrenCell(item) {
  const ids = item.children || [];
  if (!ids.length) return h("span", { class: "muted" }, "—");
  const current = ids[ids.length - 1];
  return h(
    "span",
    { class: "item-children" },
    h("a", { href: `#/workflows/${seg(current)}`, class: "mono", "data-child": current }, current),
    ids.length > 1
      ? h("span", { class: "muted" }, " (earlier: ", ids.slice(0, -1).map((id, i) => [i ? ", " : "", h("a", { href: `#/workflows/${seg(id)}`, class: "mono", "data-child": id }, `attempt ${i + 1}`)]), ")")
      : null,
  );
}

function errorCell(error) {
  if (!error) return "";
  return [h("strong", {}, error.type || "Error"), `: ${error.message || ""}`];
}

/**
 * One map step's section: progress, a status filter, the item table and its pager.
 * `state`: the URL's {status, page, at} when the URL names this step, else page 1 unfiltered.
 * `live()`: whether live refresh is on. `children`: whether its items are child workflows.
 * update(stepView, finished) draws the progress and starts or stops the table's reads.
 */
export function mapSection(ctx, { workflowId, step, state, live, children }) {
  const status = ITEM_STATUSES.includes(state.status) ? state.status : "";
  const pageNumber = Math.max(1, Number.parseInt(state.page, 10) || 1);
  const token = pageNumber > 1 ? state.at || null : null;
  const trail = tokenTrail(workflowId, step, status);
  const anchor = `map-${step}`;
  const heading = h("h3", { id: `${anchor}-title`, tabindex: "-1" }, "Items of ", h("span", { class: "step-name" }, step));
  const progressHost = h("div", { class: "map-progress-host" });
  const problem = h("p", { class: "problem", role: "alert" });
  const note = h("p", { class: "muted items-note", role: "status" });
  const rowsHost = h("div", { class: "items-table", "aria-busy": "true", "data-items": step }, h("p", { class: "muted loading" }, "Reading the items…"));
  const pager = h("nav", { class: "pager", "aria-label": `Pages of the items of ${step}` });

  const select = h(
    "select",
    { name: "status", id: `${anchor}-status` },
    h("option", { value: "" }, "any"),
    ITEM_STATUSES.map((s) => h("option", { value: s, selected: s === status }, s)),
  );
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": `Filter the items of ${step}` },
    h("label", { for: `${anchor}-status` }, "Status "),
    select,
    h("button", { type: "submit" }, "Show items"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    window.location.hash = itemsHash(workflowId, step, { status: select.value });
  });

  let stepView = null;
  let finished = false;
  let started = false;
  let generation = 0;
  let lastText = "";
  let progressText = "";
  let readAt = 0;
  let links = false;
  let lastReads = 1;

  async function load() {
    if (!stepView?.map) return;
    const mine = ++generation;
    const began = Date.now();
    const items = [];
    let next = token;
    let reads = 0;
    let total = stepView.map.total;
    try {
      do {
        const { data } = await get(`/workflows/${seg(workflowId)}/steps/${seg(step)}/items`, { status, limit: ITEMS_PAGE - items.length, next_token: next });
        if (!ctx.alive || mine !== generation) return;
        items.push(...data.items);
        next = data.next_token || null;
        total = data.total;
        reads += 1;
      } while (status && next && items.length < ITEMS_PAGE && reads < MAX_READS);
    } catch (exc) {
      if (!ctx.alive || mine !== generation) return;
      rowsHost.setAttribute("aria-busy", "false");
      replace(problem, `The items could not be read: ${exc.describe ? exc.describe() : exc}`);
      return;
    }
    readAt = began;
    lastReads = reads;
    replace(problem);
    if (next) trail.set(pageNumber + 1, next);
    const text = JSON.stringify([items, next, total]);
    if (text !== lastText) {
      lastText = text;
      links = /"url":"https?:/.test(text);
      drawRows(items, next, reads, total);
      drawPager(next);
    }
    rowsHost.setAttribute("aria-busy", "false");
  }

  function drawRows(items, next, reads, total) {
    const what = status ? `${status} items` : "items";
    if (!items.length) {
      // Never "none" while the API says more remain: a filtered read scans 1,000 items.
      replace(
        rowsHost,
        next
          ? h("p", { class: "empty items-searching", "data-more": "true" }, `No ${what} among the ${(reads * 1000).toLocaleString()} items from this page's start; more items remain: `, h("a", { href: itemsHash(workflowId, step, { status, page: pageNumber + 1, token: next }), "data-page": "Search on" }, "search on"), ".")
          : h("p", { class: "empty", "data-more": "false" }, pageNumber > 1 ? `No more ${what}.` : `No ${what} in this map of ${plural(total, "item")}.`),
      );
      replace(note);
      return;
    }
    const rows = items.map((item) =>
      h(
        "tr",
        { "data-index": String(item.index), "data-status": item.status, class: "item-row" },
        h("th", { scope: "row", class: "num" }, item.index.toLocaleString()),
        h("td", {}, badge(item.status)),
        h("td", { class: "num" }, item.attempt ? String(item.attempt) : "—"),
        h("td", { class: "num" }, String(item.attempts_total || 0)),
        h("td", {}, time(item.started_at)),
        h("td", {}, time(item.finished_at)),
        h("td", { class: "num" }, item.started_at ? duration(item.started_at, item.finished_at) : "—"),
        h("td", { class: "error-text" }, errorCell(item.error)),
        children ? h("td", {}, childrenCell(item)) : h("td", { class: "item-output-cell" }, outputCell(item, `item:${step}:${item.index}`)),
      ),
    );
    const headers = ["Item", "Status", "Attempt", "Attempts ended", "Started", "Finished", "Duration", "Error", children ? "Child workflow" : "Output"];
    const first = items[0].index.toLocaleString();
    const last = items[items.length - 1].index.toLocaleString();
    redraw(
      rowsHost,
      table(`${status ? `${status} items` : "Items"} ${first} to ${last} of ${plural(total, "item")}, by index (page ${pageNumber})`, headers, rows),
    );
    replace(note, items.length < ITEMS_PAGE && next ? `This page holds the ${what} among ${(reads * 1000).toLocaleString()} items from its start; more items remain on the next page.` : "");
  }

  function drawPager(next) {
    const previous = pageNumber === 2 ? itemsHash(workflowId, step, { status }) : itemsHash(workflowId, step, { status, page: pageNumber - 1, token: trail.get(pageNumber - 1) });
    const link = (label, to, enabled) =>
      enabled ? h("a", { href: to, class: "button-link", role: "button", "data-page": label }, label) : h("button", { type: "button", disabled: true }, label);
    replace(
      pager,
      link("First page", itemsHash(workflowId, step, { status }), pageNumber > 1),
      link("Previous page", previous, pageNumber > 1 && (pageNumber === 2 || Boolean(trail.get(pageNumber - 1)))),
      h("span", { class: "page-number" }, `Page ${pageNumber}`),
      link("Next page", next ? itemsHash(workflowId, step, { status, page: pageNumber + 1, token: next }) : "", Boolean(next)),
    );
  }

  let phase = "";
  function update(view, isFinished) {
    stepView = view;
    finished = isFinished;
    const text = JSON.stringify(view?.map || null);
    if (text !== progressText) {
      progressText = text;
      redraw(
        progressHost,
        view?.map ? mapProgress(view.map, { id: `${anchor}-bar` }) : h("p", { class: "muted", "data-unopened": "" }, "The map has not opened yet: its items are chosen when the step starts."),
      );
    }
    if (!view?.map) {
      rowsHost.setAttribute("aria-busy", "false");
      replace(rowsHost);
      return;
    }
    // The first read, and one more whenever the map or the workflow ends (the last rows).
    const now = `${view.map.status}:${isFinished}`;
    if (now !== phase) {
      phase = now;
      started = true;
      load();
    }
  }

  // While the map runs, the page is read again every 2 s per read it takes (a filtered page
  // may take up to MAX_READS reads of 1,000 items: it is read again less often).
  ctx.every(REFRESH_MS, async () => {
    if (!started || !live()) return;
    const running = stepView?.map?.status === "RUNNING" || !finished;
    const every = running ? REFRESH_MS * Math.max(1, lastReads) : LINKS_REFRESH_MS;
    if ((running || links) && Date.now() - readAt >= every - 100) await load();
  });

  const node = h(
    "section",
    { class: "map-items", id: anchor, "aria-labelledby": `${anchor}-title`, "data-map": step },
    heading,
    progressHost,
    h("div", { class: "toolbar" }, form),
    problem,
    rowsHost,
    note,
    pager,
  );
  return { node, update, heading, loaded: () => started };
}
