// One workflow: its DAG with every step's and compensation's status, a timeline of every
// attempt, its data as collapsible JSON, the events it announced (its history, as published),
// and the operator's actions. Refreshes itself while the workflow is not finished.

import { answerButtons, awaitsAnswer } from "../approvals.js";
import { ApiError, get, post, seg } from "../api.js";
import { confirmAction, showOutcome } from "../confirm.js";
import { ago, badge, due, duration, fields, h, redraw, replace, table, time } from "../dom.js";
import { STEP_STATUSES, drawGraph, legend, stepKind } from "../graph.js";
import { jsonView } from "../json.js";
import { itemsHash, mapProgress, mapSection } from "../mapitems.js";
import { liveToggle } from "./workflows.js";

export const TERMINAL = new Set(["SUCCEEDED", "COMPENSATED", "CANCELLED", "FAILED"]);
const REFRESH_MS = 1000;
const MESSAGE_CHARS = 100; // an attempt's message as the API keeps it (limits.MAX_HISTORY_MESSAGE)
const HISTORY_PAGES = 5; // up to 500 events on the page; the API pages the rest
const PATH_PAGES = 5; // a state machine's first 500 states on the page; the API pages the rest
// A finished workflow's page re-reads its view this often while it shows large-payload links:
// each read presigns them anew (they expire after 5 minutes), so a link is never stale.
const LINKS_REFRESH_MS = 60_000;
const HISTORY_CATCH_UP_MS = 120_000; // then the page reads the history every HISTORY_SLOW_MS
const HISTORY_SLOW_MS = 10_000;
const END_SLACK_MS = 1000; // an end's event may carry a time a moment before the view's
const TERMINAL_EVENTS = new Set(["WorkflowSucceeded", "WorkflowCompensated", "WorkflowCancelled", "WorkflowFailed"]);
const IN_FLIGHT = new Set(["QUEUED", "RUNNING", "WAITING"]);

const ACTIONS = [
  {
    name: "cancel",
    label: "Cancel…",
    when: ["RUNNING", "PAUSED"],
    danger: true,
    explain: "Stop dispatching; let running attempts end; compensate every step that may have acted, in reverse; end CANCELLED.",
  },
  {
    name: "retry",
    label: "Retry…",
    when: ["FAILED"],
    explain: "Redrive this FAILED workflow: its failed compensations (or the work the supervisor gave up on) are queued again with a fresh retry budget.",
  },
  {
    name: "pause",
    label: "Pause…",
    when: ["RUNNING"],
    explain: "Dispatch nothing new. Attempts already running finish and are recorded; the workflow waits in PAUSED for resume, compensate or cancel.",
  },
  {
    name: "resume",
    label: "Resume…",
    when: ["PAUSED"],
    explain: "Queue every FAILED step again with a fresh retry budget and dispatch what is ready. Optionally give one step a replacement input.",
  },
  {
    name: "compensate",
    label: "Compensate…",
    when: ["RUNNING", "PAUSED"],
    danger: true,
    explain: "Give up: unwind as a failure would, ending COMPENSATED (or FAILED if a compensation fails for good).",
  },
];

const OUTCOMES = {
  ok: ["succeeded", "SUCCEEDED"],
  error: ["failed", "FAILED"],
  timeout: ["timed out", "FAILED"],
  heartbeat_timeout: ["no heartbeat", "FAILED"],
  input_replaced: ["input replaced", "PAUSED"],
  queued: ["queued", "QUEUED"],
  running: ["running", "RUNNING"],
  waiting: ["waiting for callback", "WAITING"],
};

const kindLabel = (kind, name) => (kind === "step" ? name : `undo ${name}`);

/** One published event's detail in words: the step and attempt, who paused and why, an
 * approval's answer, the error, and who did it (an operator action's `by`). */
export function eventText(d) {
  const parts = [];
  if (d.step) parts.push(`${d.kind === "compensation" ? "undo " : ""}${d.step}${d.attempt ? ` attempt ${d.attempt}` : ""}`);
  if (d.verdict) parts.push(`${d.verdict}${d.comment ? `: “${d.comment}”` : ""}`);
  if (d.pause) parts.push(`${d.pause.reason || "paused"}${d.pause.step ? ` at ${d.pause.step}` : ""}${d.pause.by ? ` by ${d.pause.by}` : ""}`);
  if (d.next_attempt) parts.push(`next attempt ${d.next_attempt} in ${d.delay_ms} ms`);
  if (d.error) parts.push(`${d.error.type || "Error"}: ${d.error.message || ""}`);
  if (!parts.length && d.status) parts.push(d.status);
  if (d.by) parts.push(`by ${d.by}`);
  return parts.join(" — ");
}

// What the supervisor does when a deadline of each reason passes (docs/architecture.md, the
// deadline rule); the API says why (`next_deadline.why`), the page says what happens.
const DEADLINE_ACTIONS = {
  timeout: "times out the attempt",
  heartbeat: "times out the attempt (no heartbeat)",
  dispatch: "sends the task again (nobody claimed it)",
  backoff: "sends the retry",
  "approval timeout": "fails the step with ApprovalTimedOut",
  wake: "ends the wait",
};

/** The action a deadline's reason stands for: "sends the task again …", "item 3: times out
 * the attempt", "fails the step: signal go did not come"; null when no deadline runs. */
export function deadlineAction(why) {
  const item = /^item (\d+) (.*)$/.exec(why);
  if (item) {
    if (item[2] === "ended: to count") return `counts item ${item[1]}'s end`;
    const inner = deadlineAction(item[2]);
    return inner && `item ${item[1]}: ${inner}`;
  }
  const signal = /^signal (.+) timeout$/.exec(why);
  if (signal) return `fails the step: signal ${signal[1]} did not come`;
  return DEADLINE_ACTIONS[why] || null;
}

/** When the supervisor acts on a live unit and what it will do, as a countdown that says
 * when it is overdue (issues 29.3, 35.5); the reason in small print. */
export function deadlineText(deadline) {
  if (!deadline) return null;
  const action = deadline.at ? deadlineAction(deadline.why) : null;
  if (!action) return h("span", { class: "deadline", "data-why": deadline.why }, deadline.why, deadline.at ? [" ", due(deadline.at)] : null);
  return h(
    "span",
    { class: "deadline", "data-why": deadline.why },
    h("span", { class: "deadline-action" }, action),
    " ",
    due(deadline.at),
    h("span", { class: "muted deadline-why" }, ` (${deadline.why})`),
  );
}

// Full error texts fetched through the API, by workflow, kind, step and attempt: fetched once,
// kept across redraws (a live page redraws often).
const fullErrors = new Map();

/** A unit's full error (message uncut, traceback as text), fetched through the API. */
function tracebackView(workflowId, kind, name, attempt) {
  const key = `${workflowId}:${kind}:${name}:${attempt}`;
  const host = h("div", { class: "traceback-host", "data-traceback": `${kind}:${name}` });
  const paint = (entry) => {
    if (entry.error) replace(host, h("p", { class: "problem" }, `The full error could not be read: ${entry.error}`));
    else if (entry.text) {
      const t = entry.text;
      replace(
        host,
        h("p", { class: "error-line" }, h("strong", {}, t.type), `: ${t.message}`),
        t.traceback ? h("pre", { class: "traceback", tabindex: "0", "aria-label": `Traceback of ${kindLabel(kind, name)}` }, t.traceback) : h("p", { class: "muted" }, "No traceback was recorded."),
        t.truncated ? h("p", { class: "muted" }, "The traceback was cut at 1 MiB.") : null,
      );
    } else replace(host, h("p", { class: "muted loading" }, "Loading the full error…"));
  };
  const known = fullErrors.get(key);
  if (known) {
    paint(known);
    if (known.pending) known.waiters.push(paint);
    return host;
  }
  const entry = { pending: true, waiters: [paint] };
  fullErrors.set(key, entry);
  paint(entry);
  const route = kind === "step" ? "steps" : "compensations";
  get(`/workflows/${seg(workflowId)}/${route}/${seg(name)}/error`)
    .then(({ data }) => {
      entry.text = data;
    })
    .catch((exc) => {
      entry.error = exc.describe ? exc.describe() : String(exc);
    })
    .finally(() => {
      entry.pending = false;
      for (const again of entry.waiters) again(entry);
      entry.waiters = [];
    });
  return host;
}

const BANNER_TITLES = {
  FAILED: "Failed",
  PAUSED: "Paused",
  COMPENSATING: "Unwinding after a failure",
  CANCELLING: "Cancelling",
  COMPENSATED: "Compensated after a failure",
};

/** A failed undo's banner names two failures: the undo's (its title and line) and, here, the
 * one that started the unwinding (`error.cause`), with that step's own error, and, for a map
 * step's undo, what its items' undo says (issue 35.5). */
function unwindingCause(view, cause) {
  if (cause?.type !== "CompensationFailed") return null;
  const undo = view.compensations.find((x) => x.name === cause.step);
  const undoError = undo?.error ? (typeof undo.error === "string" ? undo.error : `${undo.error.type || "Error"}: ${undo.error.message || ""}`) : null;
  const first = cause.cause;
  const started = first?.step ? view.steps.find((x) => x.name === first.step) : null;
  return h(
    "div",
    { class: "unwinding", id: "unwinding-cause" },
    undo?.map ? h("p", { id: "failed-undo" }, `The undo of map step ${cause.step} failed: `, undoError || "", ` (${undo.map.failed} of ${undo.map.total} items' undo failed; see its items below).`) : null,
    first
      ? h(
          "p",
          { id: "first-failure" },
          "The unwinding began when ",
          first.step ? ["step ", h("strong", {}, first.step), " failed: "] : "the workflow failed: ",
          h("strong", {}, first.type || "Error"),
          `: ${first.message || ""}`,
        )
      : h("p", { id: "first-failure", class: "muted" }, "Why the unwinding began is not recorded (an operator's compensate or cancel, or a workflow from before it was kept)."),
    started?.error ? tracebackView(view.workflow_id, "step", started.name, started.attempt) : null,
  );
}

/** The root cause at the top of a failed or paused workflow, and whether a person is needed. */
function rootCause(view) {
  const paused = view.status === "PAUSED";
  const cause = view.error || (paused ? view.pause?.error && { ...view.pause.error, step: view.pause.step } : null);
  if (!cause && !paused) return null;
  if (!["FAILED", "PAUSED", "COMPENSATING", "COMPENSATED", "CANCELLING"].includes(view.status) && !cause) return null;
  const needed = view.status === "FAILED" || paused || cause?.operator_needed;
  const step = cause?.step;
  const kind = cause?.type === "CompensationFailed" ? "compensation" : "step";
  const unit = step ? (kind === "step" ? view.steps : view.compensations).find((x) => x.name === step) : null;
  return h(
    "section",
    { class: "banner", id: "root-cause", role: "region", "aria-labelledby": "root-cause-title" },
    h("h2", { id: "root-cause-title" }, BANNER_TITLES[view.status] || "After a failure", step ? ` at ${kindLabel(kind, step)}` : ""),
    cause ? h("p", { class: "error-line" }, h("strong", {}, cause.type || "Error"), `: ${cause.message || ""}`) : h("p", {}, `Paused${view.pause?.by ? ` by ${view.pause.by}` : ""}.`),
    unwindingCause(view, cause),
    needed ? h("p", { class: "operator-needed", id: "operator-needed" }, "An operator is needed: ", paused ? "resume, compensate or cancel it." : view.status === "FAILED" ? "fix the cause, then retry it." : "") : null,
    paused && view.pause_timeout_at ? h("p", { id: "pause-timeout" }, "If nobody acts, its pause times out and it unwinds ", ago(view.pause_timeout_at), ".") : null,
    unit?.error ? tracebackView(view.workflow_id, kind, unit.name, unit.attempt) : null,
  );
}

/** Who ends a unit's attempt when the supervisor does not: its agent, its child workflow
    (a child-workflow step), or its items' verdict (a map step). */
function endedBy(kind, item) {
  if (item.children?.length) return "child workflow";
  if (kind === "step" && item.map) return "its items";
  return "agent";
}

/** Every attempt of every step and compensation, in the order they started. */
export function attemptRows(view) {
  const rows = [];
  for (const [kind, items] of [["step", view.steps], ["compensation", view.compensations]]) {
    for (const item of items) {
      for (const a of item.attempts) {
        const current = a.attempt === item.attempt && a.outcome !== "input_replaced";
        rows.push({
          kind,
          name: item.name,
          attempt: a.attempt,
          outcome: a.outcome,
          dispatched: current ? item.dispatched_at : null,
          claimed: a.started_at,
          heartbeat: current ? item.heartbeat_at : null,
          ended: a.at,
          error: a.error,
          message: a.message,
          by: a.outcome.endsWith("timeout") ? "supervisor" : a.outcome === "input_replaced" ? `operator ${a.by || ""}`.trim() : endedBy(kind, item),
        });
      }
      if (IN_FLIGHT.has(item.status) && item.attempt > 0) {
        rows.push({
          kind,
          name: item.name,
          attempt: item.attempt,
          outcome: item.status.toLowerCase(),
          dispatched: item.dispatched_at,
          claimed: item.status === "QUEUED" ? null : item.started_at,
          heartbeat: item.heartbeat_at,
          ended: null,
          due: item.status === "QUEUED" ? item.available_at : null,
          error: null,
          by: null,
          live: true,
        });
      }
    }
  }
  const at = (r) => Date.parse(r.claimed || r.dispatched || r.ended || r.due || "") || Number.MAX_SAFE_INTEGER;
  return rows.sort((x, y) => at(x) - at(y) || (x.kind === y.kind ? 0 : x.kind === "step" ? -1 : 1));
}

function fallbackDefinition(view) {
  // The definition is gone from this deployment: draw the steps the view has, without edges.
  const comps = new Set(view.compensations.map((c) => c.name));
  return {
    Name: view.type,
    Steps: view.steps.map((st) => ({
      Name: st.name,
      DependsOn: [],
      Agent: "?",
      Pool: "?",
      Map: st.map ? {} : undefined,
      Workflow: st.children?.length ? "?" : undefined,
      Compensation: comps.has(st.name) ? { Agent: "?", Pool: "?" } : undefined,
    })),
  };
}

/** An ended attempt's message beside its error's name: the API keeps its first 100
 * characters per attempt (cut with "…"; the step's last error is whole in its traceback). */
function attemptMessage(r) {
  if (!r.message) return "";
  const cut = r.message.endsWith("…");
  const title = cut ? `The first ${MESSAGE_CHARS} characters of its message; the step's last error is shown whole with its traceback.` : undefined;
  return h("span", { class: "attempt-message", "data-cut": String(cut), title }, `: ${r.message}`);
}

// Units whose earlier attempts the operator unfolded (a unit with more than COLLAPSE_OVER
// attempts shows its latest, the others behind a button).
const COLLAPSE_OVER = 2;
const unfolded = new Set();

function timeline(view, again = () => {}) {
  const all = attemptRows(view);
  const latest = new Map();
  const counts = new Map();
  for (const r of all) {
    const unit = `${r.kind}:${r.name}`;
    latest.set(unit, Math.max(latest.get(unit) || 0, r.attempt));
    counts.set(unit, (counts.get(unit) || 0) + 1);
  }
  const rows = all.map((r) => {
    const [word, tone] = OUTCOMES[r.outcome] || [r.outcome, "NONE"];
    const unit = `${r.kind}:${r.name}`;
    const many = counts.get(unit) > COLLAPSE_OVER;
    const isLatest = r.attempt === latest.get(unit);
    const open = unfolded.has(`${view.workflow_id}:${unit}`);
    const toggle =
      many && isLatest
        ? h(
            "button",
            {
              type: "button",
              class: "expander",
              "aria-expanded": String(open),
              "data-key": `fold:${unit}`,
              "data-fold": unit,
              on: {
                click: () => {
                  const key = `${view.workflow_id}:${unit}`;
                  if (unfolded.has(key)) unfolded.delete(key);
                  else unfolded.add(key);
                  again();
                },
              },
            },
            open ? "Hide earlier attempts" : `Show ${counts.get(unit) - 1} earlier attempts`,
          )
        : null;
    return h(
      "tr",
      { "data-row": `${r.kind}:${r.name}:${r.attempt}`, "data-outcome": r.outcome, hidden: many && !isLatest && !open },
      h("th", { scope: "row" }, kindLabel(r.kind, r.name), toggle ? " " : null, toggle),
      h("td", { class: "num" }, String(r.attempt)),
      h("td", {}, h("span", { class: `badge st-${tone}` }, word), r.due && Date.parse(r.due) > Date.now() ? h("span", { class: "muted" }, " retry at ", time(r.due)) : null),
      h("td", {}, time(r.dispatched)),
      h("td", {}, time(r.claimed)),
      h("td", {}, time(r.heartbeat)),
      h("td", {}, time(r.ended)),
      h("td", { class: "num" }, r.claimed ? duration(r.claimed, r.ended) : "—"),
      h("td", { class: "error-text" }, r.error || "", attemptMessage(r)),
      h("td", {}, r.by || ""),
    );
  });
  if (!rows.length) return h("p", { class: "empty" }, "No attempt has started yet.");
  return table(
    "Every attempt (the last 20 per step are kept), in the order they started. Dispatch and heartbeat times are known for each step's latest attempt.",
    ["Step", "Attempt", "Outcome", "Dispatched", "Claimed", "Last heartbeat", "Ended", "Duration", "Error", "Ended by"],
    rows,
  );
}

/** Up to `pages` pages of 100 of a paged route, following its `next_token`; `more` when
 * the route had more than that. */
async function readPages(path, pages) {
  const items = [];
  let token = null;
  let more = false;
  for (let page = 0; page < pages; page += 1) {
    const { data } = await get(path, { limit: 100, next_token: token });
    items.push(...data.items);
    token = data.next_token;
    if (!token) break;
    more = page === pages - 1;
  }
  return { items, more };
}

/** A payload field with something to show: its value, or its large twin's link. */
function present(value, ref) {
  return (value !== null && value !== undefined) || Boolean(ref);
}

/** An Approval's answer in words: "APPROVED by ops at 12:03:04.120: “looks fine”"; a
 * WaitForSignal step's: the signal it took, or its timeout that went on (issue 37). */
function decisionText(decision) {
  if (!decision) return null;
  if (decision.timed_out) return h("span", { class: "decision" }, `no signal ${decision.signal} in time: went on`);
  if (decision.signal) {
    return h("span", { class: "decision", "data-signal": decision.signal }, h("strong", {}, `took signal ${decision.signal} #${decision.sequence}`), decision.sender ? ` sent by ${decision.sender}` : "", decision.signal_id ? ` (id ${decision.signal_id})` : "");
  }
  const at = Number.isFinite(decision.at) ? new Date(decision.at).toISOString() : decision.at;
  return h(
    "span",
    { class: "decision", "data-verdict": decision.verdict || "" },
    h("strong", {}, String(decision.verdict || "answered")),
    decision.by ? ` by ${decision.by}` : "",
    at ? [" at ", time(at, { date: true })] : "",
    decision.comment ? `: “${decision.comment}”` : "",
  );
}

/** A child-workflow step's children: the current one, and the earlier attempts' (issue 24). */
function childLinks(item) {
  const ids = item.children || [];
  if (!ids.length) return [];
  const link = (id) => h("a", { href: `#/workflows/${seg(id)}`, class: "mono", "data-child": id }, id);
  return [
    ["Child workflow", h("span", { id: `child-of-${item.name}`, class: "current-child" }, link(ids[ids.length - 1]), h("span", { class: "muted" }, ` (attempt ${ids.length}, the current one)`))],
    [
      "Earlier children",
      ids.length > 1
        ? h(
            "ul",
            { class: "earlier-children", id: `earlier-children-${item.name}` },
            ids.slice(0, -1).map((id, i) => h("li", {}, link(id), h("span", { class: "muted" }, ` (attempt ${i + 1})`))),
          )
        : null,
    ],
  ];
}

function itemDetails(kind, item, workflowId, spec = null) {
  const key = `${kind}:${item.name}`;
  const stepType = kind === "step" && spec ? stepKind(spec) : "task";
  // Where a large payload of this step (or compensation) is previewed from.
  const source = (field) => (workflowId ? { workflowId, [kind === "step" ? "step" : "compensation"]: item.name, field } : null);
  const retryWait = item.available_at && item.available_at !== item.dispatched_at;
  return h(
    "section",
    { class: "item", id: `item-${kind}-${item.name}`, "aria-label": `${kind === "step" ? "Step" : "Compensation of"} ${item.name}` },
    h(
      "details",
      { dataset: { key }, open: IN_FLIGHT.has(item.status) || item.status === "FAILED" },
      h("summary", {}, h("span", { class: "item-name" }, kindLabel(kind, item.name)), " ", badge(item.status), h("span", { class: "muted" }, ` attempt ${item.attempt}`)),
      fields([
        ["Attempts ended", String(item.attempts_total)],
        ["Iterations", item.iterations ? `${item.iterations} ended (a Repeat step: its output is the last one's)` : ""],
        ["Dispatches", item.dispatches ? `${item.dispatches} (every task message sent for it, the supervisor's re-sends of lost ones included)` : ""],
        ["Dispatched", item.dispatched_at && time(item.dispatched_at)],
        ["Retry not before", retryWait && time(item.available_at)],
        ["First claimed", item.first_claimed_at && time(item.first_claimed_at)],
        ["Claimed", item.started_at && time(item.started_at)],
        ["Last heartbeat", item.heartbeat_at && time(item.heartbeat_at)],
        ["Finished", item.finished_at && time(item.finished_at)],
        ["Next deadline", deadlineText(item.next_deadline)],
        [stepType === "approval" ? "Answer due by" : "Wakes", item.wake_at && time(item.wake_at, { date: true })],
        ["Decision", decisionText(item.decision)],
        ["Items", item.map ? h("div", {}, mapProgress(item.map), h("a", { href: itemsHash(workflowId, item.name), "data-items-link": item.name }, "Page through the items")) : ""],
        ...childLinks(item),
      ]),
      // The full text (message uncut, traceback) read through the API and shown as text.
      item.error ? jsonView("Error", item.error, { key: `${key}:error` }) : null,
      item.error && workflowId ? tracebackView(workflowId, kind, item.name, item.attempt) : null,
      present(item.output, item.output_ref) ? jsonView("Output", item.output, { key: `${key}:output`, ref: item.output_ref, preview: source("output") }) : null,
      present(item.details, item.details_ref) ? jsonView("Progress details", item.details, { key: `${key}:details`, ref: item.details_ref, preview: source("details") }) : null,
      present(item.input, item.input_ref) ? jsonView("Replacement input", item.input, { key: `${key}:input`, ref: item.input_ref, preview: source("input") }) : null,
    ),
  );
}

/** The steps a resume may give a replacement input: the failed ones and those held by the
    pause (not succeeded, not in flight: what the API accepts), never one that succeeded. */
export function resumableSteps(view) {
  return view.steps.filter((st) => ["FAILED", "PENDING", "QUEUED"].includes(st.status));
}

function resumeForm(view) {
  const offered = resumableSteps(view);
  const select = h(
    "select",
    { id: "resume-step", name: "step" },
    h("option", { value: "" }, "no replacement input"),
    offered.map((st) => h("option", { value: st.name }, `${st.name} (${st.status})`)),
  );
  const area = h("textarea", { id: "resume-input", name: "input", rows: 8, cols: 40, spellcheck: "false", disabled: true });
  // The box starts with the step's current input (an earlier replacement, else the
  // workflow's input), to edit rather than retype.
  const current = (name) => {
    const st = view.steps.find((x) => x.name === name);
    return st && st.input !== null && st.input !== undefined ? st.input : view.input;
  };
  select.addEventListener("change", () => {
    area.disabled = !select.value;
    area.value = select.value ? JSON.stringify(current(select.value), null, 2) : "";
  });
  const node = h(
    "div",
    { class: "resume-form" },
    h("label", { for: "resume-step" }, "Replacement input for step"),
    select,
    offered.length ? null : h("p", { class: "muted", id: "resume-none" }, "No step failed: nothing to replace."),
    h("label", { for: "resume-input" }, "Replacement input (JSON)"),
    area,
  );
  const prepare = () => {
    if (!select.value) return undefined;
    let input;
    try {
      input = JSON.parse(area.value);
    } catch (exc) {
      area.focus();
      throw new Error(`The replacement input is not valid JSON: ${exc.message}`);
    }
    return { step: select.value, input };
  };
  return { node, prepare };
}

/** Each live step's next deadline, soonest first, in words (issue 29.3). */
function nextActs(view) {
  const live = [...view.steps.map((x) => ["step", x]), ...view.compensations.map((x) => ["compensation", x])].filter(([, x]) => x.next_deadline);
  if (!live.length) return "";
  live.sort(([, a], [, b]) => (Date.parse(a.next_deadline.at || "9999") || 0) - (Date.parse(b.next_deadline.at || "9999") || 0));
  return h(
    "ul",
    { class: "deadlines", id: "deadlines" },
    live.map(([kind, x]) => h("li", { "data-step": `${kind}:${x.name}` }, h("span", { class: "step-name" }, kindLabel(kind, x.name)), " — ", deadlineText(x.next_deadline))),
  );
}

/** Each child-workflow step's current child, as a link (the earlier ones are in its details). */
function childrenSummary(view) {
  const parents = view.steps.filter((st) => st.children?.length);
  if (!parents.length) return "";
  return h(
    "ul",
    { class: "children-summary", id: "children-summary" },
    parents.map((st) => {
      const current = st.children[st.children.length - 1];
      return h(
        "li",
        { "data-step": st.name },
        h("span", { class: "step-name" }, st.name),
        ": ",
        h("a", { href: `#/workflows/${seg(current)}`, class: "mono", "data-child": current }, current),
        st.children.length > 1 ? h("span", { class: "muted" }, ` (attempt ${st.children.length}; ${st.children.length - 1} earlier in its details)`) : null,
      );
    }),
  );
}

/** The workflow a child workflow's step started it from, as a link (issue 24). */
function parentLine(view) {
  if (!view.parent_id) return null;
  const item = view.parent_item !== null && view.parent_item !== undefined ? `, item ${view.parent_item}` : "";
  return h(
    "p",
    { class: "lineage", id: "parent-link" },
    "A child workflow of ",
    h("a", { href: `#/workflows/${seg(view.parent_id)}`, class: "mono", "data-parent": view.parent_id }, view.parent_id),
    ` (step ${view.parent_step}${item}).`,
  );
}

export async function workflowPage(ctx, { id, query = {} }) {
  let view = (await get(`/workflows/${seg(id)}`)).data;
  let definition = null;
  let definitionNote = "";
  try {
    definition = (await get(`/definitions/${seg(view.type)}`)).data;
    if (definition.hash !== view.definition_hash) {
      definitionNote = "The definition has changed since this workflow started: the graph shows the current one.";
    }
  } catch (exc) {
    if (!(exc instanceof ApiError)) throw exc;
    definitionNote = `The definition ${view.type} is not served any more (${exc.code}): its steps are drawn without their edges.`;
  }
  if (!ctx.alive) return;

  const live = liveToggle((on) => {
    paintLive();
    if (on) refresh();
  });
  const shown = definition?.definition || fallbackDefinition(view);
  const specs = new Map((shown.Steps || []).map((st) => [st.Name, st]));
  // Each map step's progress and items (the URL's `items` names the one being paged).
  const maps = new Map();
  for (const st of shown.Steps || []) {
    const seen = view.steps.find((x) => x.name === st.Name);
    if (!st.Map && !seen?.map) continue;
    const state = query.items === st.Name ? query : {};
    maps.set(st.Name, mapSection(ctx, { workflowId: view.workflow_id, step: st.Name, state, live: () => live.isOn(), children: Boolean(st.Workflow) }));
  }
  const liveState = h("span", { class: "muted", id: "live-state" });
  const paintLive = () =>
    replace(liveState, TERMINAL.has(view.status) ? "Finished: not refreshing." : live.isOn() ? "Live: refreshing every second." : "Live refresh is off.");
  const summary = h("div", { id: "summary" });
  const bannerHost = h("div", { id: "banner-host" });
  const actions = h("div", { class: "actions", id: "actions" });
  const answers = h("div", { class: "actions", id: "answers" });
  const outcome = h("p", { class: "outcome", id: "action-outcome", role: "status" });
  const graphHost = h("div", { id: "graph" });
  const timelineHost = h("div", { id: "timeline" });
  const dataHost = h("div", { id: "data" });
  const itemsHost = h("div", { id: "items" });
  const mapsHost = h("div", { id: "maps" });
  const eventsHost = h("div", { id: "events" });
  // A state machine's path (issue 42.4): the states it entered, in order, each visit with its
  // input and output (GET /workflows/{id}/path); a native workflow has none (404 PathNotFound).
  const isMachine = Boolean(shown.StateMachine);
  const pathHost = h("div", { id: "path" });
  let pathItems = null;
  let pathMore = false;
  let pathText = "";
  async function loadPath() {
    if (!isMachine) return;
    const { items, more } = await readPages(`/workflows/${seg(id)}/path`, PATH_PAGES);
    if (!ctx.alive) return;
    const text = JSON.stringify(items);
    if (text === pathText) return;
    pathText = text;
    pathItems = items;
    pathMore = more;
    drawPath();
  }
  function drawPath() {
    if (!isMachine) return;
    if (pathItems === null) {
      redraw(pathHost, h("p", { class: "muted loading" }, "Loading the path…"));
      return;
    }
    const rows = pathItems.map((e) =>
      h(
        "tr",
        { "data-state": e.state, "data-visit": String(e.visit) },
        h("td", {}, String(e.number)),
        h("th", { scope: "row" }, e.state),
        h("td", {}, String(e.visit)),
        h("td", {}, time(e.entered_at)),
        h("td", {}, e.exited_at ? time(e.exited_at) : "running"),
        h("td", {}, jsonView("Input", e.input, { key: `path:${e.number}:input`, ref: e.input_ref })),
        h("td", {}, present(e.output, e.output_ref) ? jsonView("Output", e.output, { key: `path:${e.number}:output`, ref: e.output_ref }) : "none yet"),
      ),
    );
    redraw(
      pathHost,
      rows.length
        ? table("The states this state machine entered, in order: a loop's state once per visit. A Parallel's branches and a Map's items are child workflows, each with its own path.", ["#", "State", "Visit", "Entered", "Exited", "Input", "Output"], rows)
        : h("p", { class: "empty" }, "No state entered yet."),
      pathMore ? h("p", { class: "muted" }, `The first ${pathItems.length} states; the rest through GET /workflows/{id}/path.`) : null,
    );
  }
  // Signals (issue 37.8): the names its WaitForSignal steps wait for, the signals kept and
  // not taken yet (GET /workflows/{id}/signals), and a form to send one.
  const waitsForSignals = (shown.Steps || []).some((st) => st.WaitForSignal);
  const signalsHost = h("section", { id: "signals", hidden: !waitsForSignals });
  let signals = null;
  async function loadSignals() {
    if (!waitsForSignals) return;
    try {
      signals = (await get(`/workflows/${seg(id)}/signals`)).data;
    } catch (exc) {
      if (!(exc instanceof ApiError)) throw exc;
      signals = { waits: {}, pending: [], problem: exc.describe ? exc.describe() : String(exc) };
    }
    if (ctx.alive) drawSignals();
  }
  // The form is built once (a refresh redraws the list, never what is being typed).
  const signalWaits = h("p", { class: "muted" });
  const signalList = h("div", { id: "signal-list" });
  const signalName = h("select", { name: "signal-name" });
  const signalPayload = h("textarea", { name: "signal-payload", rows: "3", placeholder: '{"quantity": 3}' });
  const signalId = h("input", { name: "signal-id", size: 20, placeholder: "optional dedupe id" });
  const signalSent = h("p", { class: "outcome", role: "status", id: "signal-outcome" });
  const signalButton = h("button", { type: "submit", class: "primary" }, "Send signal");
  const signalForm = h(
    "form",
    { class: "signal-form", "aria-label": "Send a signal" },
    h("label", {}, "Signal ", signalName),
    h("label", {}, "Payload (JSON) ", signalPayload),
    h("label", {}, "Signal id ", signalId),
    signalButton,
  );
  signalForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    let body;
    try {
      body = { payload: signalPayload.value.trim() ? JSON.parse(signalPayload.value) : null };
    } catch {
      replace(signalSent, "The payload is not JSON.");
      return;
    }
    if (signalId.value.trim()) body.signal_id = signalId.value.trim();
    try {
      const { data } = await post(`/workflows/${seg(id)}/signals/${seg(signalName.value)}`, body);
      replace(
        signalSent,
        data.duplicate
          ? `Signal ${data.name} #${data.sequence} was kept already.`
          : data.taken_by
            ? `Signal ${data.name} #${data.sequence} taken by ${data.taken_by}.`
            : `Signal ${data.name} #${data.sequence} kept until a step waits for it.`,
      );
    } catch (exc) {
      replace(signalSent, exc.describe ? exc.describe() : String(exc));
    }
    await refresh();
  });
  if (waitsForSignals) replace(signalsHost, h("h2", {}, "Signals"), signalWaits, signalList, signalForm, signalSent);
  function drawSignals() {
    if (!waitsForSignals || signals === null) return;
    const names = Object.keys(signals.waits);
    replace(signalWaits, names.length ? `Its steps wait for: ${names.map((n) => `${n} (${signals.waits[n].join(", ")})`).join("; ")}.` : "");
    if (signalName.options.length !== names.length) replace(signalName, names.map((n) => h("option", { value: n }, n)));
    signalButton.disabled = TERMINAL.has(view.status);
    const rows = signals.pending.map((p) =>
      h("tr", { "data-signal": `${p.name}#${p.sequence}` }, h("td", {}, p.name), h("td", {}, String(p.sequence)), h("td", { class: "mono" }, JSON.stringify(p.payload)), h("td", {}, p.signal_id || ""), h("td", {}, time(p.sent_at, { date: true }))),
    );
    redraw(
      signalList,
      signals.problem ? h("p", { class: "problem" }, signals.problem) : null,
      rows.length
        ? table("Signals kept that no step has taken yet, oldest first.", ["Name", "#", "Payload", "Signal id", "Sent"], rows)
        : h("p", { class: "empty" }, "No signal waits to be taken."),
    );
  }

  const problem = h("p", { class: "problem", role: "alert" });
  let lastText = "";

  function select(kind, name) {
    // A box in the graph was chosen: unfold that step's details and move the keyboard there.
    const target = document.getElementById(`item-${kind}-${name}`);
    const details = target?.querySelector("details");
    if (details) {
      details.open = true;
      details.dataset.touched = "";
      target.scrollIntoView({ block: "start" });
      details.querySelector("summary").focus({ preventScroll: true });
    }
  }

  async function act(action) {
    const resume = action.name === "resume" ? resumeForm(view) : null;
    const result = await confirmAction({
      title: `${action.label.replace("…", "")} workflow ${view.workflow_id}?`,
      body: [h("p", {}, action.explain), h("p", {}, "Status now: ", badge(view.status)), resume?.node],
      confirmLabel: `${action.label.replace("…", "")} workflow`,
      danger: action.danger,
      prepare: resume?.prepare,
      act: (body) => post(`/workflows/${seg(view.workflow_id)}/${action.name}`, body),
    });
    if (!result) return;
    showOutcome(outcome, action.label.replace("…", ""), result);
    await refresh();
  }

  function draw() {
    paintLive();
    redraw(bannerHost, rootCause(view));
    redraw(
      summary,
      fields([
        ["Status", Object.assign(badge(view.status), { id: "wf-status" })],
        ["Type", h("a", { href: `#/definitions/${seg(view.type)}` }, view.type)],
        ["Created", time(view.created_at, { date: true })],
        ["Updated", time(view.updated_at, { date: true })],
        ["Finished", view.finished_at && time(view.finished_at, { date: true })],
        ["Paused", view.pause ? `${view.pause.reason || ""}${view.pause.step ? ` (step ${view.pause.step})` : ""}${view.pause.by ? ` by ${view.pause.by}` : ""}` : ""],
        ["Paused at", view.paused_at && time(view.paused_at, { date: true })],
        ["Pause times out", view.pause_timeout_at && ago(view.pause_timeout_at)],
        ["Supervisor acts next", nextActs(view)],
        ["Child workflows", childrenSummary(view)],
        ["Redrives", view.redrives ? String(view.redrives) : ""],
        ["Tags", view.tags ? Object.entries(view.tags).map(([k, v]) => `${k}:${v}`).join(", ") : ""],
        ["Definition", h("code", { title: view.definition_hash }, view.definition_hash.slice(0, 12))],
      ]),
    );
    redraw(
      actions,
      ACTIONS.map((a) =>
        h(
          "button",
          {
            type: "button",
            class: a.danger ? "danger" : "",
            disabled: !a.when.includes(view.status),
            title: a.when.includes(view.status) ? a.explain : `Only when ${a.when.join(" or ")}`,
            dataset: { key: `action:${a.name}`, action: a.name },
            on: { click: () => act(a) },
          },
          a.label,
        ),
      ),
    );
    // An Approval step waiting for a person: approve or reject it here (the API says who may).
    const waiting = view.steps.filter(awaitsAnswer);
    redraw(
      answers,
      waiting.length
        ? waiting.map((st) =>
            h(
              "div",
              { class: "answer", "data-step": st.name },
              h("span", {}, h("strong", {}, st.name), " waits for a person: ", deadlineText(st.next_deadline), " "),
              ...answerButtons(view.workflow_id, st.name, async (result, label) => {
                showOutcome(outcome, label, result);
                await refresh();
              }),
            ),
          )
        : null,
    );
    redraw(
      graphHost,
      definitionNote ? h("p", { class: "note" }, definitionNote) : null,
      drawGraph(shown, { view, onSelect: select }),
      legend([...STEP_STATUSES, "NOT_STARTED"]),
    );
    const drawTimeline = () => redraw(timelineHost, timeline(view, drawTimeline));
    drawTimeline();
    redraw(
      dataHost,
      jsonView("Input", view.input, { key: "wf:input", ref: view.input_ref, preview: { workflowId: view.workflow_id, field: "input" } }),
      // A large member of the output is its step's output: previewed as that.
      jsonView("Output", view.output, { key: "wf:output", links: view.output_ref, preview: (step) => ({ workflowId: view.workflow_id, step, field: "output" }), empty: view.status === "SUCCEEDED" ? "null" : "none yet (a workflow has an output once it SUCCEEDED)" }),
      view.error ? jsonView("Error", view.error, { key: "wf:error" }) : null,
    );
    for (const [name, section] of maps) section.update(view.steps.find((x) => x.name === name), TERMINAL.has(view.status));
    redraw(
      itemsHost,
      view.steps.map((st) => itemDetails("step", st, view.workflow_id, specs.get(st.name))),
      view.compensations.length ? h("h3", { class: "sub" }, "Compensations") : null,
      view.compensations.map((c) => itemDetails("compensation", c, view.workflow_id)),
    );
    drawHistory();
  }

  // The workflow's history as the relay published it (GET /workflows/{id}/events): read,
  // never rebuilt from the current state (issue 29.4).
  let historyItems = null;
  let historyMore = false;
  let historyText = "";
  async function loadHistory() {
    const { items, more } = await readPages(`/workflows/${seg(id)}/events`, HISTORY_PAGES);
    if (!ctx.alive) return;
    const text = JSON.stringify(items);
    if (text === historyText) return;
    historyText = text;
    historyItems = items;
    historyMore = more;
    drawHistory();
  }

  /** True while the workflow has ended but its history lacks the event of that end (the
   * relay publishes a moment after the table changed). */
  function historyBehind() {
    if (!TERMINAL.has(view.status) || historyItems === null) return false;
    const end = Date.parse(view.finished_at || view.updated_at || "") || 0;
    return !historyItems.some((e) => TERMINAL_EVENTS.has(e.type) && (Date.parse(e.at || e.detail?.at || "") || end) >= end - END_SLACK_MS);
  }

  function drawHistory() {
    if (historyItems === null) {
      redraw(eventsHost, h("p", { class: "muted loading" }, "Loading the history…"));
      return;
    }
    const rows = historyItems.map((e) =>
      h("tr", { "data-event": e.type }, h("td", {}, time(e.at || e.detail.at, { date: true })), h("th", { scope: "row" }, e.type), h("td", {}, eventText(e.detail))),
    );
    redraw(
      eventsHost,
      rows.length
        ? table("The events this workflow announced, as published (kept by the event relay), oldest first.", ["Time", "Event", "Detail"], rows)
        : h("p", { class: "empty" }, "No event recorded yet (the relay keeps them a moment after they happen)."),
      historyMore ? h("p", { class: "muted" }, `The first ${historyItems.length} events; the rest through GET /workflows/{id}/events.`) : null,
      historyBehind() ? h("p", { class: "note", id: "history-behind" }, `It ended ${view.status}, but the event relay has not published that yet: the history is behind, and this page keeps reading it.`) : null,
    );
  }

  async function refresh() {
    try {
      view = (await get(`/workflows/${seg(id)}`)).data;
      await loadHistory();
      await loadSignals();
      await loadPath();
      replace(problem);
    } catch (exc) {
      replace(problem, exc.describe ? exc.describe() : String(exc));
      return;
    }
    if (!ctx.alive) return;
    const text = JSON.stringify(view);
    if (text !== lastText) {
      lastText = text;
      draw();
    }
  }

  replace(
    ctx.main,
    h("p", { class: "crumbs" }, h("a", { href: "#/workflows" }, "← Workflows")),
    h("h1", { tabindex: "-1" }, view.parent_id ? "Child workflow " : "Workflow ", h("code", { class: "wf-id" }, view.workflow_id)),
    parentLine(view),
    h("div", { class: "toolbar" }, live.button, liveState),
    problem,
    bannerHost,
    summary,
    h("section", { "aria-labelledby": "h-actions" }, h("h2", { id: "h-actions" }, "Actions"), answers, actions, outcome),
    signalsHost,
    h("section", { "aria-labelledby": "h-graph" }, h("h2", { id: "h-graph" }, "Steps"), graphHost),
    isMachine ? h("section", { "aria-labelledby": "h-path" }, h("h2", { id: "h-path" }, "Path"), pathHost) : null,
    maps.size ? h("section", { "aria-labelledby": "h-maps" }, h("h2", { id: "h-maps" }, "Map items"), mapsHost) : null,
    h("section", { "aria-labelledby": "h-timeline" }, h("h2", { id: "h-timeline" }, "Attempts"), timelineHost),
    h("section", { "aria-labelledby": "h-data" }, h("h2", { id: "h-data" }, "Input and output"), dataHost),
    h("section", { "aria-labelledby": "h-items" }, h("h2", { id: "h-items" }, "Step details"), itemsHost),
    h("section", { "aria-labelledby": "h-events" }, h("h2", { id: "h-events" }, "Events"), eventsHost),
  );
  lastText = JSON.stringify(view);
  replace(mapsHost, [...maps.values()].map((section) => section.node));
  draw();
  // Came here by paging (or filtering) a map's items: the keyboard lands on that table.
  const paged = maps.get(query.items);
  if (paged) ctx.focusOn = paged.heading;
  loadSignals().catch(() => {});
  drawPath();
  loadPath().catch((exc) => {
    if (ctx.alive) redraw(pathHost, h("p", { class: "problem" }, `The path could not be read: ${exc.describe ? exc.describe() : exc}`));
  });
  loadHistory().catch((exc) => {
    if (ctx.alive) redraw(eventsHost, h("p", { class: "problem" }, `The history could not be read: ${exc.describe ? exc.describe() : exc}`));
  });
  // The history lags the table by the relay's delay: a finished workflow's page keeps reading
  // it until the event of *this* end is there (an operator's retry ends it again, later than
  // the end the history already holds): every second for HISTORY_CATCH_UP_MS after it saw the
  // history behind, then every HISTORY_SLOW_MS, for as long as the page is open (issue 35.5).
  let behindSince = null;
  let historyRead = 0;
  ctx.every(REFRESH_MS, async () => {
    if (!live.isOn()) return;
    if (!TERMINAL.has(view.status)) {
      behindSince = null;
      await refresh();
      return;
    }
    if (!historyBehind()) {
      behindSince = null;
      return;
    }
    const now = Date.now();
    behindSince = behindSince ?? now;
    if (now - behindSince > HISTORY_CATCH_UP_MS && now - historyRead < HISTORY_SLOW_MS) return;
    historyRead = now;
    await loadHistory().catch(() => {});
  });
  let linksRead = Date.now();
  const hasLinks = () => /"url":"https?:/.test(lastText);
  const refreshLinks = async () => {
    if (!TERMINAL.has(view.status) || !hasLinks()) return;
    linksRead = Date.now();
    await refresh();
  };
  ctx.every(LINKS_REFRESH_MS, refreshLinks);
  // Back to a tab left in the background (its timers paused): fresh links at once.
  const onVisible = () => {
    if (!document.hidden && Date.now() - linksRead > LINKS_REFRESH_MS) refreshLinks();
  };
  document.addEventListener("visibilitychange", onVisible);
  ctx.stops.push(() => document.removeEventListener("visibilitychange", onVisible));
}
