// The console: a hash-routed page per view. Each page gets a context whose timers stop when
// the operator navigates away, so a page left behind never keeps polling.

import { h, replace } from "./dom.js";
import { approvalsPage } from "./pages/approvals.js";
import { definitionsPage } from "./pages/definitions.js";
import { poolsPage } from "./pages/pools.js";
import { schedulesPage } from "./pages/schedules.js";
import { workflowPage } from "./pages/workflow.js";
import { workflowsPage } from "./pages/workflows.js";

const main = document.getElementById("main");
let current = null;
let navigated = false; // the first page keeps the browser's own focus

function route() {
  const raw = window.location.hash.replace(/^#/, "") || "/workflows";
  const [path, queryText = ""] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const query = Object.fromEntries(new URLSearchParams(queryText));
  if (parts[0] === "workflows" && parts.length === 2) return { page: workflowPage, args: { id: parts[1], query }, nav: "workflows" };
  if (parts[0] === "workflows" && parts.length === 1) return { page: workflowsPage, args: { query }, nav: "workflows" };
  if (parts[0] === "definitions") return { page: definitionsPage, args: { name: parts[1] || null }, nav: "definitions" };
  if (parts[0] === "pools") return { page: poolsPage, args: {}, nav: "pools" };
  if (parts[0] === "approvals") return { page: approvalsPage, args: {}, nav: "approvals" };
  if (parts[0] === "schedules") return { page: schedulesPage, args: {}, nav: "schedules" };
  return { page: notFound, args: { path: raw }, nav: null };
}

function notFound(ctx, { path }) {
  replace(ctx.main, h("h1", { tabindex: "-1" }, "Not found"), h("p", {}, `No page at ${path}. `, h("a", { href: "#/workflows" }, "Workflows")));
}

/** Poll `fn` every `ms` while the page lives; skipped while a previous run is still going. */
function every(ms, fn) {
  let busy = false;
  const timer = window.setInterval(async () => {
    if (busy || document.hidden) return;
    busy = true;
    try {
      await fn();
    } finally {
      busy = false;
    }
  }, ms);
  this.stops.push(() => window.clearInterval(timer));
}

async function render() {
  if (current) for (const stop of current.stops) stop();
  const { page, args, nav } = route();
  for (const link of document.querySelectorAll("header nav a")) {
    if (link.dataset.nav === nav) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const ctx = { main, stops: [], alive: true };
  ctx.every = every.bind(ctx);
  ctx.stops.push(() => {
    ctx.alive = false;
  });
  current = ctx;
  replace(main, h("p", { class: "muted" }, "Loading…"));
  delete main.dataset.ready;
  try {
    await page(ctx, args);
  } catch (exc) {
    if (!ctx.alive) return;
    replace(
      main,
      h("h1", { tabindex: "-1" }, "Something went wrong"),
      h("p", { class: "problem", role: "alert", id: "page-problem" }, exc.describe ? exc.describe() : String(exc.message || exc)),
      h("p", {}, h("button", { type: "button", id: "try-again", on: { click: render } }, "Try again")),
    );
  }
  if (ctx.alive) {
    main.dataset.ready = ""; // the page has drawn its first data (tests wait for this)
    const heading = main.querySelector("h1");
    document.title = heading ? `${heading.textContent} · Shepherd console` : "Shepherd console";
    // After a navigation, focus the new page's heading (keyboard and screen reader users
    // land on it, as on a page load), or the part of it the page names (a map's items,
    // after paging them).
    if (navigated && ctx.focusOn) {
      ctx.focusOn.focus({ preventScroll: true });
      ctx.focusOn.scrollIntoView({ block: "start" });
    } else if (heading && navigated) heading.focus();
    navigated = true;
  }
}

const api = document.querySelector('meta[name="shepherd-api"]')?.content || "";
const mode = document.querySelector('meta[name="shepherd-api-mode"]')?.content || "";
replace(document.getElementById("api-info"), "API ", h("code", {}, api), mode ? ` (${mode})` : "");
window.addEventListener("hashchange", render);
render();
