// Agent pools: paused or running, each queue's backlog, its rate limit and circuit breaker;
// pause and resume, and forcing a circuit open, closed or back to its breaker, each confirmed.

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

  const CIRCUIT_ACTIONS = {
    open: ["Open", "Force it open: the pool claims nothing (as a pause) until it is closed or given back to its breaker.", true],
    close: ["Close", "Force it closed: the pool claims work whatever its failures, until it is opened or given back to its breaker.", false],
    auto: ["Automatic", "Give it back to its breaker: it opens and closes on the pool's failures again.", false],
  };

  async function circuitAct(pool, action) {
    const [label, explain, danger] = CIRCUIT_ACTIONS[action];
    const result = await confirmAction({
      title: `${label} the circuit of pool ${pool.name}?`,
      body: h("p", {}, explain),
      confirmLabel: `${label} circuit`,
      danger,
      act: () => post(`/pools/${seg(pool.name)}/circuit`, { action }),
    });
    if (!result) return;
    showOutcome(outcome, `${label} the circuit of ${pool.name}`, result);
    await refresh(true);
  }

  const heldByCircuit = (pool) => pool.paused && pool.circuit && pool.circuit.state !== "closed";

  function rateText(pool) {
    const r = pool.rate_limit;
    return r ? `${r.per_second}/s, burst ${r.burst}` : "none";
  }

  function circuitCell(pool) {
    const c = pool.circuit;
    if (!c) return h("td", { class: "circuit" }, "none");
    const state = c.state.toUpperCase();
    const last = (c.history || []).slice(-5).reverse();
    return h(
      "td",
      { class: "circuit", dataset: { circuit: c.state, mode: c.mode } },
      h("span", { class: `badge circuit-${c.state}` }, state),
      c.mode !== "auto" ? h("span", { class: "muted" }, ` forced ${c.mode}`) : "",
      c.since ? h("span", {}, " since ", time(c.since, { date: true })) : "",
      last.length
        ? h(
            "details",
            { class: "circuit-history" },
            h("summary", {}, `last ${last.length} change${last.length > 1 ? "s" : ""}`),
            h("ul", {}, ...last.map((t) => h("li", {}, time(t.at, { date: true }), ` ${t.from} → ${t.to}: ${t.why}`))),
          )
        : "",
    );
  }

  function circuitButtons(pool) {
    if (!pool.circuit) return [];
    return Object.keys(CIRCUIT_ACTIONS)
      .filter((action) => action !== (pool.circuit.mode === "closed" ? "close" : pool.circuit.mode))
      .map((action) =>
        h(
          "button",
          { type: "button", class: action === "open" ? "danger" : "secondary", dataset: { key: `circuit:${pool.name}:${action}` }, on: { click: () => circuitAct(pool, action) } },
          `${CIRCUIT_ACTIONS[action][0]} circuit of ${pool.name}`,
        ),
      );
  }

  function draw(items, operator) {
    const num = (b, key) => h("td", { class: "num" }, b ? String(b[key]) : "?");
    const rows = items.map((pool) =>
      h(
        "tr",
        { "data-pool": pool.name },
        h("th", { scope: "row" }, pool.name),
        h("td", {}, badge(pool.paused ? "PAUSED" : "RUNNING"), heldByCircuit(pool) ? h("span", { class: "muted" }, " by its circuit") : ""),
        h("td", {}, time(pool.paused ? pool.paused_at : pool.resumed_at, { date: true })),
        h("td", {}, pool.by || ""),
        num(pool.backlog, "visible"),
        num(pool.backlog, "in_flight"),
        num(pool.backlog, "delayed"),
        h("td", { class: "rate" }, rateText(pool)),
        circuitCell(pool),
        operator
          ? h(
          "td",
          { class: "actions" },
          // A pool its open circuit holds is released by closing the circuit, not by a resume.
          heldByCircuit(pool)
            ? ""
            : h(
                "button",
                { type: "button", class: pool.paused ? "" : "danger", dataset: { key: `pool:${pool.name}` }, on: { click: () => act(pool) } },
                pool.paused ? `Resume ${pool.name}` : `Pause ${pool.name}`,
              ),
          ...circuitButtons(pool),
        )
          : null,
      ),
    );
    const headers = ["Pool", "State", "Since", "By", "Visible", "In flight", "Delayed", "Rate limit", "Circuit"];
    redraw(
      host,
      operator ? null : h("p", { class: "note", id: "not-operator" }, "Only an operator of this deployment may pause or resume a pool or force its circuit; you are not one, so none is offered."),
      items.some((pool) => pool.circuit)
        ? null
        : h(
            "p",
            { class: "note", id: "no-circuit" },
            "No pool has a circuit breaker: give one a CircuitBreaker in the construct's pool_settings, or locally in a pool-policies.json beside pyproject.toml (or shepherd local --pool-policies FILE).",
          ),
      table("Agent pools: backlog is the pool queue's messages (approximate, as SQS counts them); an open circuit holds the pool's tasks as a pause does.", operator ? [...headers, "Actions"] : headers, rows),
    );
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
      draw(data.items, Boolean(data.operator));
    }
  }

  replace(ctx.main, h("h1", { tabindex: "-1" }, "Pools"), h("div", { class: "toolbar" }, live.button, updated), problem, outcome, host);
  await refresh(true);
  ctx.every(REFRESH_MS, async () => {
    if (live.isOn()) await refresh();
  });
}
