// Agent pools: paused or running, and each queue's backlog; pause and resume, each confirmed.

import { get, post, seg } from "../api.js";
import { confirmAction, showOutcome } from "../confirm.js";
import { badge, h, redraw, replace, table, time } from "../dom.js";
import { liveToggle } from "./workflows.js";

const REFRESH_MS = 2000;

export async function poolsPage(ctx) {
  const live = liveToggle((on) => on && refresh());
  const host = h("div", { id: "pools" });
  const outcome = h("p", { class: "outcome", id: "action-outcome", role: "status" });
  const problem = h("p", { class: "problem", role: "alert" });
  const updated = h("span", { class: "muted" });
  let lastText = "";

  async function act(pool) {
    const action = pool.paused ? "resume" : "pause";
    const explain = pool.paused
      ? "Its agents claim work again and its backlog drains."
      : "Its agents claim nothing until it is resumed: tasks stay queued, nothing fails, no retry budget is spent. Attempts already running finish.";
    const result = await confirmAction({
      title: `${pool.paused ? "Resume" : "Pause"} pool ${pool.name}?`,
      body: h("p", {}, explain),
      confirmLabel: pool.paused ? "Resume pool" : "Pause pool",
      danger: !pool.paused,
      act: () => post(`/pools/${seg(pool.name)}/${action}`),
    });
    if (!result) return;
    showOutcome(outcome, `${pool.paused ? "Resume" : "Pause"} ${pool.name}`, result);
    await refresh(true);
  }

  function draw(items) {
    const num = (b, key) => h("td", { class: "num" }, b ? String(b[key]) : "?");
    const rows = items.map((pool) =>
      h(
        "tr",
        { "data-pool": pool.name },
        h("th", { scope: "row" }, pool.name),
        h("td", {}, badge(pool.paused ? "PAUSED" : "RUNNING")),
        h("td", {}, time(pool.paused ? pool.paused_at : pool.resumed_at, { date: true })),
        h("td", {}, pool.by || ""),
        num(pool.backlog, "visible"),
        num(pool.backlog, "in_flight"),
        num(pool.backlog, "delayed"),
        h(
          "td",
          {},
          h(
            "button",
            { type: "button", class: pool.paused ? "" : "danger", dataset: { key: `pool:${pool.name}` }, on: { click: () => act(pool) } },
            pool.paused ? `Resume ${pool.name}` : `Pause ${pool.name}`,
          ),
        ),
      ),
    );
    redraw(host, table("Agent pools: backlog is the pool queue's messages (approximate, as SQS counts them).", ["Pool", "State", "Since", "By", "Visible", "In flight", "Delayed", "Action"], rows));
  }

  async function refresh(force = false) {
    let data;
    try {
      ({ data } = await get("/pools"));
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
      draw(data.items);
    }
  }

  replace(ctx.main, h("h1", { tabindex: "-1" }, "Pools"), h("div", { class: "toolbar" }, live.button, updated), problem, outcome, host);
  await refresh(true);
  ctx.every(REFRESH_MS, async () => {
    if (live.isOn()) await refresh();
  });
}
