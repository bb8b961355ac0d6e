// The workflow types this deployment runs: each one's graph and every field that decides how
// its steps run (pool, timeouts, heartbeat, retry, OnFailure) and are undone (compensations).

import { get, seg } from "../api.js";
import { fields, h, replace } from "../dom.js";
import { definitionLine, drawGraph, stepKind } from "../graph.js";
import { jsonView } from "../json.js";
import { signalByMatchForm } from "../signalmatch.js";

const seconds = (n) => (n === undefined || n === null ? "—" : `${n} s`);

/** A Retry block in one line: "3 retries, 0.5 s × 2 (≤ 4 s), FULL jitter; never: OutOfStock". */
export function retryText(retry) {
  if (!retry) return "defaults";
  const parts = [`${retry.MaxAttempts} ${retry.MaxAttempts === 1 ? "retry" : "retries"}`];
  if (retry.MaxAttempts) {
    let backoff = `${retry.IntervalSeconds} s × ${retry.BackoffRate}`;
    if (retry.MaxDelaySeconds) backoff += ` (≤ ${retry.MaxDelaySeconds} s)`;
    parts.push(backoff);
    if (retry.JitterStrategy && retry.JitterStrategy !== "NONE") parts.push(`${retry.JitterStrategy} jitter`);
  }
  let text = parts.join(", ");
  if (retry.NonRetryableErrors?.length) text += `; not retried: ${retry.NonRetryableErrors.join(", ")}`;
  return text;
}

function compensationText(c) {
  if (!c) return "none";
  return `${c.Agent} on ${c.Pool}; timeout ${seconds(c.TimeoutSeconds)}, heartbeat ${seconds(c.HeartbeatSeconds)}; retry: ${retryText(c.Retry)}; when ${c.When || "ATTEMPTED"}`;
}

/** A Map block in one line: "each of $.input.items, at most 20 at once; tolerates 1 failed". */
export function mapText(m) {
  if (!m) return null;
  const tolerated = [
    m.ToleratedFailurePercentage !== undefined && m.ToleratedFailurePercentage !== null ? `${m.ToleratedFailurePercentage} %` : null,
    m.ToleratedFailureCount !== undefined && m.ToleratedFailureCount !== null ? `${m.ToleratedFailureCount} failed` : null,
  ].filter(Boolean);
  return `each item of ${m.ItemsPath}, at most ${m.MaxConcurrency ?? 100} at once; ${tolerated.length ? `tolerates ${tolerated.join(" and ")}` : "no failure tolerated"}`;
}

const KINDS = {
  task: "task",
  map: "map: the agent runs once per item",
  "map-of-children": "map of child workflows: one child per item",
  child: "child workflow",
  wait: "wait",
  approval: "approval by a person",
};

function stepCard(def, st) {
  const c = st.Compensation;
  const kind = stepKind(st);
  const approval = st.Approval;
  return h(
    "section",
    { class: "step-card", "data-step": st.Name, "aria-label": `Step ${st.Name}` },
    h("h4", {}, st.Name),
    st.Comment ? h("p", { class: "muted" }, st.Comment) : null,
    fields([
      ["Kind", KINDS[kind]],
      ["Agent", st.Agent],
      ["Pool", st.Pool],
      ["Workflow", st.Workflow ? h("a", { href: `#/definitions/${seg(st.Workflow)}` }, st.Workflow) : null],
      ["Map", mapText(st.Map)],
      ["Wait", kind === "wait" ? definitionLine(st) : null],
      ["Approval", approval ? `answered within ${seconds(approval.TimeoutSeconds)}${approval.Approvers?.length ? ` by the owner or ${approval.Approvers.join(", ")}` : " by the owner"}` : null],
      ["DependsOn", (st.DependsOn || []).join(", ") || "—"],
      ["InputPath", st.InputPath],
      ["Condition", st.Condition ? h("code", {}, JSON.stringify(st.Condition)) : null],
      ["TimeoutSeconds", st.TimeoutSeconds === undefined ? null : seconds(st.TimeoutSeconds)],
      ["HeartbeatSeconds", kind === "task" || kind === "map" ? seconds(st.HeartbeatSeconds) : null],
      ["Retry", kind === "wait" || kind === "approval" ? null : retryText(st.Retry)],
      ["OnFailure", st.OnFailure || `${def.OnFailure || "COMPENSATE"} (the definition's)`],
      ["Compensation", kind === "child" ? "none (the child undoes itself)" : kind === "wait" || kind === "approval" ? null : compensationText(c)],
    ]),
  );
}

function detail(d) {
  const def = d.definition;
  return h(
    "article",
    { class: "definition", "aria-labelledby": "def-title" },
    h("h2", { id: "def-title" }, d.name),
    d.comment ? h("p", {}, d.comment) : null,
    fields([
      ["Hash", h("code", {}, d.hash)],
      ["Pools", d.pools.join(", ")],
      ["OnFailure", def.OnFailure || "COMPENSATE"],
      ["CompensationOrder", def.CompensationOrder || "REVERSE"],
      ["DispatchTimeoutSeconds", seconds(def.DispatchTimeoutSeconds)],
      ["PauseTimeoutSeconds", def.PauseTimeoutSeconds ? seconds(def.PauseTimeoutSeconds) : "none"],
    ]),
    h("h3", {}, "Graph"),
    drawGraph(def),
    h("h3", {}, "Steps"),
    h("div", { class: "step-cards" }, (def.Steps || []).map((st) => stepCard(def, st))),
    signalByMatchForm(def),
    h("h3", {}, "Input"),
    def.InputSchema ? jsonView("InputSchema", def.InputSchema, { key: "schema" }) : h("p", { class: "muted" }, "No InputSchema: any input is accepted."),
    jsonView("The whole definition (as the API serves it)", def, { key: "definition", folded: true }),
  );
}

export async function definitionsPage(ctx, { name }) {
  const { data } = await get("/definitions");
  const chosen = name || data.items[0]?.name || null;
  const list = h(
    "nav",
    { class: "def-list", "aria-label": "Definitions" },
    h(
      "ul",
      {},
      data.items.map((d) =>
        h(
          "li",
          {},
          h("a", { href: `#/definitions/${seg(d.name)}`, "aria-current": d.name === chosen ? "page" : undefined }, d.name),
          h("span", { class: "muted" }, ` ${d.steps.length} steps`),
        ),
      ),
    ),
  );
  const body = chosen ? detail((await get(`/definitions/${seg(chosen)}`)).data) : h("p", { class: "empty" }, "This deployment has no definitions.");
  if (!ctx.alive) return;
  replace(ctx.main, h("h1", { tabindex: "-1" }, "Definitions"), h("div", { class: "split" }, list, body));
}
