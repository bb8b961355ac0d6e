// A definition's DAG as SVG: steps in columns by depth (a step sits one column right of its
// deepest dependency), each step's compensation in a dashed box under it. With a workflow's
// view, every box carries its status as a colour and as words (never colour alone).

import { h, s } from "./dom.js";

const MIN_NODE_W = 184;
const CHAR_W = 7.8; // a bold 13 px label's widest average character
let NODE_W = MIN_NODE_W; // widened per graph so the longest name shows in full
const NODE_H = 48;
const UNDO_H = 38;
const UNDO_GAP = 12;
const COL_GAP = 56;
const ROW_GAP = 22;
const PAD = 12;

let instances = 0;

export const STEP_STATUSES = ["PENDING", "QUEUED", "RUNNING", "WAITING", "SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"];
const STATUS_CHAR_W = 6.9; // an 11.5 px status line's widest average character

// Full names, never cut (issue 29): the boxes grow to the longest one (see drawGraph).
const clip = (text) => text;

/** The steps a `Next` names (a catcher's, a Choice's), each with the step naming it and how:
    it runs only when that step sends it there (docs/definitions.md, Catch and Choice step). */
export function enteredFrom(steps) {
  const out = new Map();
  for (const st of steps) {
    for (const c of st.Catch || []) if (!out.has(c.Next)) out.set(c.Next, { from: st.Name, how: "catch" });
    const choice = st.Choice;
    if (!choice) continue;
    for (const rule of choice.Choices || []) if (!out.has(rule.Next)) out.set(rule.Next, { from: st.Name, how: "choice" });
    if (choice.Default && !out.has(choice.Default)) out.set(choice.Default, { from: st.Name, how: "choice" });
  }
  return out;
}

/** Column of every step: 0 for roots, else one more than its deepest dependency (or the step
    whose Catch or Choice names it). */
export function depths(steps) {
  const byName = new Map(steps.map((st) => [st.Name, st]));
  const entered = enteredFrom(steps);
  const memo = new Map();
  const depth = (name, seen = new Set()) => {
    if (memo.has(name)) return memo.get(name);
    if (seen.has(name)) return 0; // a cycle cannot pass validation; never loop on one anyway
    seen.add(name);
    const way = entered.get(name);
    const deps = [...(byName.get(name)?.DependsOn || []), ...(way ? [way.from] : [])];
    const d = deps.length ? 1 + Math.max(...deps.map((dep) => depth(dep, seen))) : 0;
    memo.set(name, d);
    return d;
  };
  for (const st of steps) depth(st.Name);
  return memo;
}

function statusText(item, fallback) {
  if (!item) return fallback;
  const attempt = item.attempt ? ` · attempt ${item.attempt}` : "";
  return `${item.status}${attempt}`;
}

/** What runs a step: a task, a map (of agents or of child workflows), a child workflow, a
    Wait or an Approval (docs/definitions.md). */
export function stepKind(st) {
  if (st.Map) return st.Workflow ? "map-of-children" : "map";
  if (st.Workflow) return "child";
  if (st.Wait) return "wait";
  if (st.Approval) return "approval";
  if (st.Choice) return "choice";
  return "task";
}

function waitText(wait) {
  if (wait.Seconds !== undefined && wait.Seconds !== null) return `wait ${wait.Seconds} s`;
  if (wait.Until) return `wait until ${wait.Until}`;
  return `wait until ${wait.UntilPath}`;
}

/** A step's second line in a definition's graph: where and what it runs. */
export function definitionLine(st) {
  switch (stepKind(st)) {
    case "map":
      return `map · ${st.Pool} · ${st.Agent}`;
    case "map-of-children":
      return `map of child workflows ${st.Workflow}`;
    case "child":
      return `child workflow ${st.Workflow}`;
    case "wait":
      return waitText(st.Wait);
    case "approval":
      return "approval by a person";
    case "choice":
      return "choice";
    default:
      return `${st.Pool} · ${st.Agent}`;
  }
}

const KIND_WORDS = { map: "map", "map-of-children": "map of child workflows", child: "child workflow", wait: "wait", approval: "approval", choice: "choice" };

/** A step's second line in a workflow's graph: its status, and for a map its items. */
function viewLine(st, item) {
  const kind = stepKind(st);
  const m = item?.map;
  if (m) return `${item.status} · ${m.succeeded.toLocaleString()}/${m.total.toLocaleString()} items${m.failed ? ` · ${m.failed.toLocaleString()} failed` : ""}`;
  const text = statusText(item, "PENDING");
  return kind === "task" ? text : `${KIND_WORDS[kind]} · ${text}`;
}

/** The widest a step's second line gets (a map's counts at their full width), in characters. */
function widestLine(st, item) {
  if (!item?.map) return viewLine(st, item).length;
  const m = item.map;
  const full = { ...m, succeeded: m.total, failed: m.total };
  return viewLine(st, { ...item, map: full }).length;
}
/**
 * The graph of `definition` (the API's `definition` object, ASL field names).
 * `view` (optional): a workflow view; `onSelect(kind, name)`: a box was chosen (click, Enter).
 */
export function drawGraph(definition, { view, onSelect } = {}) {
  instances += 1;
  const id = `g${instances}`;
  const steps = definition.Steps || [];
  const stepsByName = new Map((view?.steps || []).map((x) => [x.name, x]));
  const compsByName = new Map((view?.compensations || []).map((x) => [x.name, x]));
  const longest = Math.max(0, ...steps.flatMap((st) => [st.Name.length, st.Compensation ? `undo: ${st.Compensation.Agent}`.length + 2 : 0]));
  const longestLine = Math.max(0, ...steps.map((st) => (view ? widestLine(st, stepsByName.get(st.Name)) : definitionLine(st).length)));
  NODE_W = Math.max(MIN_NODE_W, Math.ceil(longest * CHAR_W) + 24, Math.ceil(longestLine * STATUS_CHAR_W) + 24);
  const col = depths(steps);
  const columns = [];
  for (const st of steps) (columns[col.get(st.Name)] ||= []).push(st);
  const hasUndo = steps.some((st) => st.Compensation);
  const blockH = NODE_H + (hasUndo ? UNDO_GAP + UNDO_H : 0);
  const rows = Math.max(1, ...columns.map((c) => (c ? c.length : 0)));
  const width = PAD * 2 + columns.length * NODE_W + Math.max(0, columns.length - 1) * COL_GAP;
  const height = PAD * 2 + rows * blockH + (rows - 1) * ROW_GAP;

  const pos = new Map();
  columns.forEach((column, c) => {
    (column || []).forEach((st, r) => {
      // Centre short columns vertically so joins read naturally.
      const offset = ((rows - column.length) * (blockH + ROW_GAP)) / 2;
      pos.set(st.Name, { x: PAD + c * (NODE_W + COL_GAP), y: PAD + offset + r * (blockH + ROW_GAP) });
    });
  });

  const svg = s("svg", {
    class: "dag",
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: "group",
    "aria-label": `Graph of ${definition.Name}: ${steps.length} steps`,
  });
  svg.append(
    s(
      "defs",
      {},
      s(
        "marker",
        { id: `${id}-arrow`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head" }),
      ),
    ),
  );

  const entered = enteredFrom(steps);
  for (const st of steps) {
    const to = pos.get(st.Name);
    const way = entered.get(st.Name);
    // A Catch's or a Choice's way in: dashed, titled with how it is taken.
    const inputs = [...(st.DependsOn || []).map((dep) => [dep, "edge"]), ...(way ? [[way.from, `edge edge-${way.how}`]] : [])];
    for (const [dep, edgeClass] of inputs) {
      const from = pos.get(dep);
      if (!from) continue;
      const x1 = from.x + NODE_W;
      const y1 = from.y + NODE_H / 2;
      const x2 = to.x - 2;
      const y2 = to.y + NODE_H / 2;
      const mid = (x1 + x2) / 2;
      svg.append(
        s("path", {
          class: edgeClass,
          d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`,
          "marker-end": `url(#${id}-arrow)`,
        }),
      );
    }
  }

  for (const st of steps) {
    const { x, y } = pos.get(st.Name);
    const item = stepsByName.get(st.Name);
    const status = view ? item?.status || "PENDING" : "NONE";
    const second = view ? viewLine(st, item) : definitionLine(st);
    const kind = stepKind(st);
    const g = box("step", st.Name, st.Name, second, status, x, y, NODE_W, NODE_H, onSelect, { kind, map: item?.map });
    svg.append(g);
    if (st.Compensation) {
      const comp = compsByName.get(st.Name);
      const compStatus = view ? comp?.status || "NOT_STARTED" : "NONE";
      const compSecond = view ? statusText(comp, "not started") : `${st.Compensation.Pool} · ${st.Compensation.Agent}`;
      const uy = y + NODE_H + UNDO_GAP;
      svg.append(
        s("line", { class: "undo-link", x1: x + NODE_W / 2, y1: y + NODE_H, x2: x + NODE_W / 2, y2: uy }),
        box("compensation", st.Name, `undo: ${st.Compensation.Agent}`, compSecond, compStatus, x + 10, uy, NODE_W - 20, UNDO_H, onSelect),
      );
    }
  }
  // A graph wider than the page scrolls sideways: the scroll area is a named region the
  // keyboard can reach (and scroll with the arrow keys), not only a mouse (issue 35.5).
  return h("div", { class: "dag-wrap", tabindex: "0", role: "region", "aria-label": `Graph of ${definition.Name} (scrolls sideways when wider than the page)` }, svg);
}

/** A map's items as a thin bar along a node's foot: a part per status (the words are in the
    node's label and on the page). */
function nodeBar(m, w, hgt) {
  const x0 = 10;
  const width = w - 20;
  const y = hgt - 8;
  const parts = [
    ["succeeded", m.succeeded],
    ["failed", m.failed],
    ["cancelled", m.cancelled],
    ["running", m.running],
  ];
  const g = s("g", { class: "node-bar", "aria-hidden": "true" }, s("rect", { class: "node-bar-track", x: x0, y, width, height: 4, rx: 1.5 }));
  let at = x0;
  for (const [key, n] of parts) {
    if (n <= 0) continue;
    const part = (width * n) / Math.max(1, m.total);
    g.append(s("rect", { class: `node-bar-part part-${key}`, x: at.toFixed(2), y, width: Math.max(1, part).toFixed(2), height: 4, "data-part": key }));
    at += part;
  }
  return g;
}

function box(kind, name, title, second, status, x, y, w, hgt, onSelect, { kind: stepKindName = "task", map = null } = {}) {
  const what = { map: "a map", "map-of-children": "a map of child workflows", child: "a child workflow", wait: "a wait", approval: "an approval" }[stepKindName];
  const counts = map ? ` · ${map.succeeded} succeeded, ${map.failed} failed, ${map.cancelled} cancelled, ${map.running} in flight, ${map.pending} not started of ${map.total} items` : "";
  // The name a screen reader announces starts with the words the box shows (its title and
  // status lines, unclipped), so a person who sees "undo: release_stock" can say what they see
  // (WCAG 2.5.3, label in name); the drawn texts are hidden from it, to be read once.
  const label = kind === "step" ? `${name}: ${second}${what ? ` (${what})` : ""}${counts}` : `${title}: ${second} (the compensation of step ${name})`;
  const g = s("g", {
    class: `node ${kind} st-${status}`,
    transform: `translate(${x} ${y})`,
    "data-kind": kind,
    "data-name": name,
    "data-status": status,
    "data-step-kind": kind === "step" ? stepKindName : null,
    "aria-label": label,
  });
  if (onSelect) {
    g.setAttribute("tabindex", "0");
    g.setAttribute("role", "button");
    g.addEventListener("click", () => onSelect(kind, name));
    g.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        onSelect(kind, name);
      }
    });
  } else {
    g.setAttribute("role", "img");
  }
  g.append(
    s("title", {}, label),
    s("rect", { width: w, height: hgt, rx: 7, ry: 7 }),
    s("text", { x: 10, y: kind === "step" ? 20 : 16, class: "node-name", "aria-hidden": "true" }, clip(title)),
    s("text", { x: 10, y: kind === "step" ? (map ? 35 : 38) : 31, class: "node-status", "aria-hidden": "true" }, clip(second)),
  );
  if (map) g.append(nodeBar(map, w, hgt));
  return g;
}

/** The colours' meaning, each with its word. */
export function legend(statuses) {
  return h(
    "ul",
    { class: "legend", "aria-label": "Status colours" },
    statuses.map((st) => h("li", {}, h("span", { class: `swatch st-${st}`, "aria-hidden": "true" }), st === "NOT_STARTED" ? "not started (compensation)" : st)),
  );
}
