// DOM building without HTML parsing: every value lands through textContent or setAttribute,
// so nothing a workflow carries (input, output, errors, names) is ever run or rendered as markup.

const SVG_NS = "http://www.w3.org/2000/svg";

/** Attributes that would take code or a URL: set only through `safeHref`, never from data. */
const FORBIDDEN = /^(on|srcdoc$|formaction$|xlink:href$)/i;

function apply(el, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") {
      el.textContent = String(value);
    } else if (key === "on") {
      for (const [event, handler] of Object.entries(value)) el.addEventListener(event, handler);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key === "href") {
      el.setAttribute("href", safeHref(value));
    } else if (FORBIDDEN.test(key)) {
      throw new Error(`refusing to set ${key} from a value`);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** An HTML element: h("a", {href: "#/pools", class: "x"}, "text", otherNode). */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  apply(el, props);
  append(el, children);
  return el;
}

/** An SVG element, built the same way. */
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, props);
  append(el, children);
  return el;
}

/** Only in-page routes and http(s) URLs become links; anything else (javascript:, data:) is inert. */
export function safeHref(value) {
  const text = String(value);
  if (text.startsWith("#")) return text;
  try {
    const url = new URL(text, window.location.href);
    if (url.protocol === "http:" || url.protocol === "https:") return url.href;
  } catch {
    // not a URL at all
  }
  return "#";
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function replace(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

const pad = (n, width = 2) => String(n).padStart(width, "0");

/** A time as a <time> element: local clock time, the full ISO instant on hover. */
export function time(iso, { date = false } = {}) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return h("span", {}, String(iso));
  const clock = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  const day = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return h("time", { datetime: iso, title: iso }, date ? `${day} ${clock.slice(0, 8)}` : clock);
}

/** An instant as the wall clock of `zone` says it, with the zone named: "2026-12-08 02:00:00
 * CET (Europe/Paris)"; UTC and the browser's own time on hover. */
export function zoned(iso, zone) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return h("span", {}, String(iso));
  let text;
  try {
    const parts = Object.fromEntries(
      new Intl.DateTimeFormat("en-CA", { timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short" })
        .formatToParts(d)
        .map((p) => [p.type, p.value]),
    );
    text = `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${parts.timeZoneName} (${zone})`;
  } catch {
    text = `${d.toISOString().replace("T", " ").slice(0, 19)} UTC`; // a zone this browser lacks
  }
  return h("time", { datetime: iso, title: absolute(d.getTime()), "data-zone": zone }, text);
}

/** "12 s ago", "3 min ago", "in 4 min": how far an instant is from now, in words. */
export function relative(ms, now = Date.now()) {
  const delta = Math.round((now - ms) / 1000);
  const span = Math.abs(delta);
  let text;
  if (span < 60) text = `${span} s`;
  else if (span < 3600) text = `${Math.floor(span / 60)} min`;
  else if (span < 86_400) text = `${Math.floor(span / 3600)} h ${Math.floor((span % 3600) / 60)} min`;
  else text = `${Math.floor(span / 86_400)} d ${Math.floor((span % 86_400) / 3600)} h`;
  return delta >= 0 ? `${text} ago` : `in ${text}`;
}

/** The absolute local time with its timezone, for a hover (and screen readers' title). */
export function absolute(ms) {
  const d = new Date(ms);
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
  const text = d.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
  return `${text} (${zone}) — ${d.toISOString()}`;
}

/** A time as "3 min ago" that keeps counting; the absolute time and timezone on hover. */
export function ago(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return h("span", {}, String(iso));
  return h("time", { datetime: iso, title: absolute(ms), "data-ago": String(ms) }, relative(ms));
}

/** A deadline's countdown in words: "in 30 s", then "overdue by 51 s" once it passed. */
export function dueText(ms, now = Date.now()) {
  return ms > now ? relative(ms, now) : `overdue by ${relative(ms, now).replace(/ ago$/, "")}`;
}

function paintDue(el, now = Date.now()) {
  const ms = Number(el.dataset.due);
  el.textContent = dueText(ms, now);
  el.dataset.overdue = String(ms <= now);
  el.closest(".deadline")?.classList.toggle("overdue", ms <= now);
}

/** A deadline as a <time> that counts down, then says by how much it is overdue (and marks
 * its `.deadline` so); the absolute time and timezone on hover. */
export function due(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return h("span", {}, String(iso));
  const el = h("time", { datetime: iso, title: absolute(ms), "data-due": String(ms) });
  paintDue(el);
  return el;
}

// Every relative time on the page keeps counting (a redraw happens only when data changes).
window.setInterval(() => {
  for (const el of document.querySelectorAll("time[data-ago]")) el.textContent = relative(Number(el.dataset.ago));
  for (const el of document.querySelectorAll("time[data-due]")) paintDue(el);
}, 1000);

/** Milliseconds between two ISO instants (or until now), as "1.24 s", "3 min 5 s". */
export function duration(fromIso, toIso) {
  if (!fromIso) return "—";
  const ms = (toIso ? Date.parse(toIso) : Date.now()) - Date.parse(fromIso);
  if (!Number.isFinite(ms) || ms < 0) return "—";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(2)} s`;
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 60) return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function bytes(n) {
  if (!Number.isFinite(n)) return "? bytes";
  if (n < 1024) return `${n} bytes`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** A status as a coloured badge that also says it in words (never colour alone). */
export function badge(status, extra) {
  const name = String(status || "UNKNOWN");
  return h("span", { class: `badge st-${name.replace(/[^A-Z_]/g, "")}` }, name, extra ? ` ${extra}` : "");
}

/** A definition list from [term, value] pairs (value: a node or text); empty values skipped. */
export function fields(pairs, props) {
  const dl = h("dl", { class: "fields", ...props });
  for (const [term, value] of pairs) {
    if (value === undefined || value === null || value === "" || value === false) continue;
    dl.append(h("dt", {}, term), h("dd", {}, value));
  }
  return dl;
}

/**
 * A table whose rows become labelled blocks in a narrow window (each cell carries its column's
 * name), and that scrolls sideways in between rather than squeezing its columns.
 */
export function table(caption, headers, rows, props) {
  for (const row of rows) {
    [...row.children].forEach((cell, i) => cell.setAttribute("data-label", headers[i] ?? ""));
  }
  return h(
    "div",
    { class: "table-wrap", ...props },
    h(
      "table",
      { class: "stack" },
      caption ? h("caption", {}, caption) : null,
      h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, rows),
    ),
  );
}

/**
 * Replace `host`'s children, keeping what the operator did there: the <details data-key> they
 * opened or closed (others take their new default) and the [data-key] element that had the
 * focus. A live page redraws often.
 */
export function redraw(host, ...children) {
  const touched = [...host.querySelectorAll("details[data-key][data-touched]")];
  const open = new Map(touched.map((d) => [d.dataset.key, d.open]));
  const active = document.activeElement;
  const focusKey = active && host.contains(active) ? active.dataset?.key : undefined;
  replace(host, ...children);
  for (const d of host.querySelectorAll("details[data-key]")) {
    if (open.has(d.dataset.key)) {
      d.open = open.get(d.dataset.key);
      d.dataset.touched = "";
    }
  }
  if (focusKey) {
    const again = [...host.querySelectorAll("[data-key]")].find((el) => el.dataset.key === focusKey);
    again?.focus({ preventScroll: true });
  }
  return host;
}

// A <details> the operator opened or closed keeps that state across redraws (see redraw).
document.addEventListener(
  "click",
  (event) => {
    const summary = event.target instanceof Element ? event.target.closest("summary") : null;
    if (summary?.parentElement?.dataset.key !== undefined) summary.parentElement.dataset.touched = "";
  },
  true,
);
