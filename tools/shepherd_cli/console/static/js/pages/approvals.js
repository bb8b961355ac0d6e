// Pending approvals: the Approval steps waiting for the caller's answer across workflows,
// newest first (GET /approvals), each approved or rejected here behind a confirmation.

import { get } from "../api.js";
import { answerButtons } from "../approvals.js";
import { showOutcome } from "../confirm.js";
import { ago, h, redraw, replace, table, time } from "../dom.js";
import { liveToggle } from "./workflows.js";

const REFRESH_MS = 5000;
const PAGE = 50;

export async function approvalsPage(ctx) {
  const live = liveToggle((on) => on && refresh());
  const host = h("div", { id: "approvals" });
  const outcome = h("p", { class: "outcome", id: "action-outcome", role: "status" });
  const problem = h("p", { class: "problem", role: "alert" });
  const updated = h("span", { class: "muted" });
  const tokens = [null]; // the token of each page shown so far: page n is read with tokens[n]
  let page = 0;
  let next = null;
  let lastText = "";

  async function answered(result, label) {
    showOutcome(outcome, label, result);
    await refresh(true);
  }

  function draw(items) {
    const rows = items.map((a) =>
      h(
        "tr",
        { "data-approval": `${a.workflow_id}:${a.step}` },
        h("th", { scope: "row" }, h("a", { href: `#/workflows/${encodeURIComponent(a.workflow_id)}` }, h("code", {}, a.workflow_id))),
        h("td", {}, a.step),
        h("td", {}, a.type),
        h("td", {}, time(a.requested_at, { date: true })),
        h("td", { class: "due" }, ago(a.due_at)),
        h("td", { class: "actions" }, ...answerButtons(a.workflow_id, a.step, answered)),
      ),
    );
    const pager = h(
      "div",
      { class: "pager" },
      h("button", { type: "button", class: "secondary", disabled: page === 0, on: { click: () => go(page - 1) } }, "Previous page"),
      h("span", { class: "muted" }, ` page ${page + 1} `),
      h("button", { type: "button", class: "secondary", disabled: !next, on: { click: () => go(page + 1) } }, "Next page"),
    );
    redraw(
      host,
      rows.length
        ? table("Approval steps waiting for your answer, newest first (an answer given a moment ago may still be listed: answering it again is refused).", ["Workflow", "Step", "Type", "Requested", "Times out", "Answer"], rows)
        : h("p", { class: "empty" }, page ? "No more approvals." : "No approval is waiting for you."),
      pager,
    );
  }

  async function go(target) {
    if (target > page) tokens[target] = next;
    page = target;
    await refresh(true);
  }

  async function refresh(force = false) {
    let data;
    try {
      ({ data } = await get("/approvals", { limit: PAGE, next_token: tokens[page] }));
    } catch (exc) {
      replace(problem, exc.describe ? exc.describe() : String(exc));
      return;
    }
    if (!ctx.alive) return;
    replace(problem);
    replace(updated, "updated ", time(new Date().toISOString()));
    next = data.next_token || null;
    const text = JSON.stringify(data);
    if (force || text !== lastText) {
      lastText = text;
      draw(data.items);
    }
  }

  replace(ctx.main, h("h1", { tabindex: "-1" }, "Pending approvals"), h("div", { class: "toolbar" }, live.button, updated), problem, outcome, host);
  await refresh(true);
  ctx.every(REFRESH_MS, async () => {
    if (live.isOn()) await refresh();
  });
}
