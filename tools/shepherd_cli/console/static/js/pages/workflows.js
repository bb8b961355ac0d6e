// Workflows, newest first: filters (status, type) live in the URL, pages follow next_token,
// lookup by id or idempotency key, and a live refresh that can be switched off.

import { ApiError, get, seg } from "../api.js";
import { badge, h, replace, table, time } from "../dom.js";

export const WORKFLOW_STATUSES = ["RUNNING", "PAUSED", "COMPENSATING", "CANCELLING", "SUCCEEDED", "COMPENSATED", "CANCELLED", "FAILED"];
const PAGE_SIZE = 20;
const REFRESH_MS = 2000;
const WORKFLOW_ID = /^[A-Za-z0-9_-]{1,64}$/;

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

function selectOf(name, label, options, chosen) {
  return h(
    "label",
    {},
    label,
    h(
      "select",
      { name },
      h("option", { value: "" }, "any"),
      options.map((value) => h("option", { value, selected: value === chosen }, value)),
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

export async function workflowsPage(ctx, { query }) {
  const status = WORKFLOW_STATUSES.includes(query.status) ? query.status : "";
  const type = query.type || "";
  const limit = Math.min(100, Math.max(1, Number.parseInt(query.limit, 10) || PAGE_SIZE));
  let types = [];
  try {
    types = (await get("/definitions")).data.items.map((d) => d.name);
  } catch {
    types = type ? [type] : [];
  }
  const tokens = [null]; // tokens[i]: the next_token that fetched page i
  let pageIndex = 0;
  let lastText = "";

  const live = liveToggle((on) => on && refresh());
  const updated = h("span", { class: "muted", "aria-live": "off" });
  const problem = h("p", { class: "problem", role: "alert" });
  const rowsHost = h("div", { id: "workflow-table" });
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  const found = h("p", { class: "lookup-result", role: "status" });

  const filters = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter workflows" },
    selectOf("status", "Status ", WORKFLOW_STATUSES, status),
    selectOf("type", "Type ", types, type),
    h("button", { type: "submit" }, "Apply filters"),
  );
  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    const form = new FormData(filters);
    const params = new URLSearchParams();
    for (const key of ["status", "type"]) if (form.get(key)) params.set(key, form.get(key));
    if (query.limit) params.set("limit", String(limit));
    const qs = params.toString();
    window.location.hash = `#/workflows${qs ? `?${qs}` : ""}`;
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

  async function refresh() {
    let data;
    try {
      ({ data } = await get("/workflows", { status, type, limit, next_token: tokens[pageIndex] }));
    } catch (exc) {
      if (!ctx.alive) return;
      replace(problem, exc.describe ? exc.describe() : String(exc));
      return;
    }
    if (!ctx.alive) return;
    replace(problem);
    replace(updated, "updated ", time(new Date().toISOString()));
    tokens[pageIndex + 1] = data.next_token || undefined;
    const text = JSON.stringify(data);
    if (text !== lastText) {
      // Redraw only on change, so focus and selection survive a refresh.
      lastText = text;
      drawRows(data.items);
      drawPager(Boolean(data.next_token));
    }
  }

  function drawRows(items) {
    if (!items.length) {
      replace(rowsHost, h("p", { class: "empty" }, pageIndex ? "No more workflows." : "No workflows match."));
      return;
    }
    const rows = items.map((wf) =>
      h(
        "tr",
        { "data-workflow-id": wf.workflow_id },
        h("td", {}, h("a", { href: `#/workflows/${seg(wf.workflow_id)}`, class: "mono" }, wf.workflow_id)),
        h("td", {}, wf.type),
        h("td", {}, badge(wf.status)),
        h("td", {}, time(wf.created_at, { date: true })),
        h("td", {}, time(wf.finished_at, { date: true })),
      ),
    );
    replace(rowsHost, table(`Your workflows, newest first (page ${pageIndex + 1})`, ["Workflow", "Type", "Status", "Created", "Finished"], rows));
  }

  function drawPager(hasNext) {
    const go = (index) => () => {
      pageIndex = index;
      lastText = "";
      refresh();
    };
    const focused = pager.contains(document.activeElement) ? document.activeElement.textContent : null;
    replace(
      pager,
      h("button", { type: "button", disabled: pageIndex === 0, on: { click: go(0) } }, "First page"),
      h("button", { type: "button", disabled: pageIndex === 0, on: { click: go(pageIndex - 1) } }, "Previous page"),
      h("span", {}, `Page ${pageIndex + 1}`),
      h("button", { type: "button", disabled: !hasNext, on: { click: go(pageIndex + 1) } }, "Next page"),
    );
    // Keep the keyboard where it was: on the same button, or the first one still enabled.
    if (focused) {
      const buttons = [...pager.querySelectorAll("button:not([disabled])")];
      (buttons.find((b) => b.textContent === focused) || buttons[0])?.focus();
    }
  }

  replace(
    ctx.main,
    h("h1", { tabindex: "-1" }, "Workflows"),
    h("div", { class: "toolbar" }, filters, finder),
    found,
    h("div", { class: "toolbar" }, live.button, updated),
    problem,
    rowsHost,
    pager,
  );
  await refresh();
  ctx.every(REFRESH_MS, async () => {
    if (live.isOn()) await refresh();
  });
}
