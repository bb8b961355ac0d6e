// Schedules: every schedule of the current definitions, its expression and zone, its next
// firings, whether an operator paused it; pause and resume, each confirmed (issue 25.4).

import { get, post, seg } from "../api.js";
import { confirmAction, showOutcome } from "../confirm.js";
import { ago, badge, h, redraw, relative, replace, table, time, zoned } from "../dom.js";
import { liveToggle } from "./workflows.js";

const REFRESH_MS = 5000;

export async function schedulesPage(ctx) {
  const live = liveToggle((on) => on && refresh());
  const host = h("div", { id: "schedules" });
  const outcome = h("p", { class: "outcome", id: "action-outcome", role: "status" });
  const problem = h("p", { class: "problem", role: "alert" });
  const updated = h("span", { class: "muted" });
  let lastText = "";

  async function act(schedule) {
    const action = schedule.paused ? "resume" : "pause";
    const explain = schedule.paused
      ? "Its next firings start workflows again. Firings it missed while paused start nothing."
      : "Its firings start nothing until it is resumed. Workflows it already started go on.";
    const result = await confirmAction({
      title: `${schedule.paused ? "Resume" : "Pause"} schedule ${schedule.name}?`,
      body: h("p", {}, explain),
      confirmLabel: schedule.paused ? "Resume schedule" : "Pause schedule",
      danger: !schedule.paused,
      act: () => post(`/schedules/${seg(schedule.name)}/${action}`),
    });
    if (!result) return;
    showOutcome(outcome, `${schedule.paused ? "Resume" : "Pause"} ${schedule.name}`, result);
    await refresh(true);
  }

  function nextCell(schedule) {
    if (!schedule.enabled) return h("td", { class: "next" }, "disabled in its definition");
    if (schedule.paused) return h("td", { class: "next" }, "paused: fires nothing");
    if (!schedule.next.length) {
      // A rate counts from when its schedule was created, which the API does not know: its
      // period bounds the next firing.
      const rate = /^rate\((\d+) (\w+)\)$/.exec(schedule.expression);
      if (!rate) return h("td", { class: "next" }, schedule.expression.startsWith("rate(") ? "every period from its deploy" : "never again");
      const period = `${rate[1]} ${rate[2]}`;
      return h("td", { class: "next", "data-within": period }, `every period from its deploy: the next within ${period}`);
    }
    // Each firing in the schedule's own zone, named (its expression is read in that zone).
    const [first, ...rest] = schedule.next;
    return h(
      "td",
      { class: "next" },
      zoned(first, schedule.timezone),
      h("span", { class: "muted" }, ` (${relative(Date.parse(first))})`),
      rest.length ? h("span", { class: "muted" }, "; then ", ...rest.flatMap((t, i) => [i ? ", " : "", zoned(t, schedule.timezone)])) : "",
    );
  }

  function draw(items, operator) {
    const rows = items.map((s) =>
      h(
        "tr",
        { "data-schedule": s.name },
        h("th", { scope: "row" }, s.name),
        h("td", {}, h("a", { href: `#/definitions/${encodeURIComponent(s.workflow_type)}` }, s.workflow_type)),
        h("td", {}, h("code", {}, s.expression)),
        h("td", {}, s.timezone),
        h("td", {}, badge(!s.enabled ? "DISABLED" : s.paused ? "PAUSED" : "RUNNING"), s.at ? h("span", { class: "muted" }, " since ", ago(s.at), s.by ? ` by ${s.by}` : "") : ""),
        nextCell(s),
        h(
          "td",
          {},
          // Only an operator may pause or resume one (the API refuses anyone else).
          s.enabled && operator
            ? h(
                "button",
                { type: "button", class: s.paused ? "" : "danger", dataset: { key: `schedule:${s.name}` }, on: { click: () => act(s) } },
                s.paused ? `Resume ${s.name}` : `Pause ${s.name}`,
              )
            : "",
        ),
      ),
    );
    if (!rows.length) {
      redraw(host, h("p", { class: "empty" }, "No definition has a schedule (Schedules: in a definition; see docs/definitions.md)."));
      return;
    }
    const headers = ["Schedule", "Workflow type", "Expression", "Time zone", "State", "Next firings"];
    redraw(
      host,
      operator ? null : h("p", { class: "note", id: "not-operator" }, "Only an operator of this deployment may pause or resume a schedule; you are not one, so none is offered."),
      table(
        "Schedules: each starts its workflow type on a clock (EventBridge Scheduler deployed, the local stack's own clock locally); each firing is shown in its schedule's time zone.",
        operator ? [...headers, "Action"] : headers,
        operator ? rows : rows.map((row) => (row.lastElementChild.remove(), row)),
      ),
    );
  }

  async function refresh(force = false) {
    let data;
    try {
      ({ data } = await get("/schedules"));
    } catch (exc) {
      replace(problem, exc.describe ? exc.describe() : String(exc));
      return;
    }
    if (!ctx.alive) return;
    replace(problem);
    replace(updated, "updated ", time(new Date().toISOString()));
    const text = JSON.stringify(data);
    if (force || text !== lastText) {
      lastText = text;
      draw(data.items, Boolean(data.operator));
    }
  }

  replace(ctx.main, h("h1", { tabindex: "-1" }, "Schedules"), h("div", { class: "toolbar" }, live.button, updated), problem, outcome, host);
  await refresh(true);
  ctx.every(REFRESH_MS, async () => {
    if (live.isOn()) await refresh();
  });
}
