// Collapsible JSON (native <details>, so keyboard and screen readers work without script),
// every value as text. A large payload, {"$payload": {url, size, sha256}}, becomes a download
// link with its size instead of its content.

import { bytes, h, safeHref } from "./dom.js";

const OPEN_DEPTH = 2; // levels shown unfolded
const OPEN_MAX_ENTRIES = 30; // a bigger object or array starts folded

/** The large-payload reference the API gives in place of a big value, or null. */
export function payloadRef(value) {
  if (!value || typeof value !== "object" || Array.isArray(value)) return null;
  const keys = Object.keys(value);
  if (keys.length !== 1 || keys[0] !== "$payload") return null;
  const ref = value.$payload;
  if (!ref || typeof ref !== "object" || typeof ref.url !== "string") return null;
  // Only an absolute http(s) URL is a link; anything else (javascript:, data:, a path on the
  // console) is shown as the data it is.
  if (!/^https?:\/\//i.test(ref.url)) return null;
  const href = safeHref(ref.url);
  if (href === "#") return null;
  return { href, size: Number(ref.size), sha256: typeof ref.sha256 === "string" ? ref.sha256 : "" };
}

function payloadLink(ref) {
  return h(
    "span",
    { class: "payload" },
    h("a", { href: ref.href, download: "", rel: "noopener noreferrer", target: "_blank" }, `Download large payload (${bytes(ref.size)})`),
    ref.sha256 ? h("span", { class: "muted sha" }, ` sha256 ${ref.sha256}`) : null,
  );
}

function scalar(value) {
  if (value === null || value === undefined) return h("span", { class: "j-null" }, "null");
  if (typeof value === "string") return h("span", { class: "j-str" }, JSON.stringify(value));
  if (typeof value === "number") return h("span", { class: "j-num" }, String(value));
  if (typeof value === "boolean") return h("span", { class: "j-bool" }, String(value));
  return h("span", {}, String(value));
}

function node(value, depth, key, folded = false) {
  const ref = payloadRef(value);
  if (ref) return payloadLink(ref);
  if (value === null || typeof value !== "object") return scalar(value);
  const isArray = Array.isArray(value);
  const entries = isArray ? value.map((v, i) => [i, v]) : Object.entries(value);
  if (entries.length === 0) return h("span", { class: "j-punct" }, isArray ? "[]" : "{}");
  const summary = isArray ? `[ ${entries.length} item${entries.length === 1 ? "" : "s"} ]` : `{ ${entries.length} key${entries.length === 1 ? "" : "s"} }`;
  const open = !folded && depth < OPEN_DEPTH && entries.length <= OPEN_MAX_ENTRIES;
  return h(
    "details",
    { class: "j-node", open, dataset: { key } },
    h("summary", {}, summary),
    h(
      "ul",
      {},
      entries.map(([k, v]) =>
        h("li", {}, h("span", { class: isArray ? "j-index" : "j-key" }, isArray ? `${k}: ` : `${JSON.stringify(k)}: `), node(v, depth + 1, `${key}/${k}`)),
      ),
    ),
  );
}

/**
 * A labelled JSON value; `empty` is shown instead of null/undefined when given. `key` names it
 * on the page, so a redraw keeps what the operator folded or unfolded; `folded` starts it closed.
 */
export function jsonView(label, value, { empty, key = label, folded = false } = {}) {
  const body = (value === null || value === undefined) && empty ? h("span", { class: "muted" }, empty) : node(value, 0, key, folded);
  return h("div", { class: "json" }, h("div", { class: "json-label" }, label), h("div", { class: "json-body" }, body));
}
