// Collapsible JSON (native <details>, so keyboard and screen readers work without script),
// every value as text. A large payload is not in its field: the API gives it in the field's
// `_ref` twin as {url, size, sha256} (docs/api.md), shown as a download link with its size.
// A value inside a payload is always data, whatever its shape.

import { bytes, h, safeHref } from "./dom.js";

const OPEN_DEPTH = 2; // levels shown unfolded
const OPEN_MAX_ENTRIES = 30; // a bigger object or array starts folded

/** A `_ref` field's large-payload link ({url, size, sha256}) as a safe link, or null. */
export function payloadRef(ref) {
  if (!ref || typeof ref !== "object" || Array.isArray(ref) || typeof ref.url !== "string") return null;
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
    // The presigned URL carries its own Content-Disposition (docs/api.md, Large payloads): the
    // browser saves a named file and the page stays where it is.
    h("a", { href: ref.href, download: "", rel: "noopener noreferrer", class: "payload-link" }, `Download large payload (${bytes(ref.size)})`),
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

function node(value, depth, key, folded = false, links = null) {
  if (value === null || typeof value !== "object") {
    if (!links) return scalar(value);
    value = {};
  }
  const isArray = Array.isArray(value);
  const entries = isArray ? value.map((v, i) => [i, v]) : Object.entries(value);
  // `links`: members given as large-payload links (a workflow output's `output_ref`).
  const linked = links ? Object.entries(links).map(([k, ref]) => [k, ref, true]) : [];
  const count = entries.length + linked.length;
  if (count === 0) return h("span", { class: "j-punct" }, isArray ? "[]" : "{}");
  const summary = isArray ? `[ ${entries.length} item${entries.length === 1 ? "" : "s"} ]` : `{ ${count} key${count === 1 ? "" : "s"} }`;
  const open = !folded && depth < OPEN_DEPTH && count <= OPEN_MAX_ENTRIES;
  return h(
    "details",
    { class: "j-node", open, dataset: { key } },
    h("summary", {}, summary),
    h(
      "ul",
      {},
      [...entries, ...linked].map(([k, v, isLink]) =>
        h(
          "li",
          {},
          h("span", { class: isArray ? "j-index" : "j-key" }, isArray ? `${k}: ` : `${JSON.stringify(k)}: `),
          isLink ? refView(v) : node(v, depth + 1, `${key}/${k}`),
        ),
      ),
    ),
  );
}

/** A large payload's link, or (a link the console will not follow) its data as text. */
function refView(ref) {
  const safe = payloadRef(ref);
  return safe ? payloadLink(safe) : node(ref, 1, "ref");
}

/**
 * A labelled JSON value; `empty` is shown instead of null/undefined when given. `key` names it
 * on the page, so a redraw keeps what the operator folded or unfolded; `folded` starts it closed.
 * `ref`: the field's `_ref` twin (the value is large: a download link instead); `links`: for an
 * object whose large members are given apart (the workflow output and its `output_ref`).
 */
export function jsonView(label, value, { empty, key = label, folded = false, ref = null, links = null } = {}) {
  const absent = value === null || value === undefined;
  const hasLinks = links && typeof links === "object" && Object.keys(links).length > 0;
  let body;
  if (ref) body = refView(ref);
  else if (hasLinks) body = node(absent ? {} : value, 0, key, folded, links);
  else body = absent && empty ? h("span", { class: "muted" }, empty) : node(value, 0, key, folded);
  return h("div", { class: "json" }, h("div", { class: "json-label" }, label), h("div", { class: "json-body" }, body));
}
