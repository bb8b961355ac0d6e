// Collapsible JSON (native <details>, so keyboard and screen readers work without script),
// every value as text. A large payload is not in its field: the API gives it in the field's
// `_ref` twin as {url, size, sha256} (docs/api.md), shown as a download link with its size,
// and beside it a preview of its first 4 KiB, read through the API (GET /workflows/{id}/preview:
// a ranged read of the object, never the whole) and shown as text in a <pre>.
// A value inside a payload is always data, whatever its shape.

import { get, seg } from "./api.js";
import { bytes, h, replace, safeHref } from "./dom.js";

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

export const PREVIEW_BYTES = 4096;

// Previews read, by workflow, payload and content (a preview never changes for one sha256):
// fetched once, kept across redraws (a live page redraws often) and shared by the two places
// that show one payload (a workflow output's member and its step's output).
const previews = new Map();

/** Where a payload's preview comes from: {workflowId, field, step?, compensation?}. */
function previewKey(source, ref) {
  return [source.workflowId, source.step ? `step:${source.step}` : source.compensation ? `compensation:${source.compensation}` : "workflow", source.field, ref.sha256].join("|");
}

// A preview is read when it scrolls into view (one closed in a step's <details> only once the
// step is opened): a workflow with many large payloads costs nothing for those never looked at.
const watching = new WeakMap();
const observer =
  "IntersectionObserver" in window
    ? new IntersectionObserver((entries) => {
        for (const entry of entries) {
          if (!entry.isIntersecting) continue;
          observer.unobserve(entry.target);
          watching.get(entry.target)?.();
        }
      })
    : null;

function previewView(source, ref) {
  const key = previewKey(source, ref);
  const host = h("figure", { class: "payload-preview", "data-preview": `${source.step || source.compensation || "workflow"}:${source.field}` });
  const paint = (entry) => {
    if (entry.error) {
      replace(host, h("figcaption", {}, "Preview"), h("p", { class: "problem" }, `The preview could not be read: ${entry.error}`));
      return;
    }
    if (!entry.data) {
      replace(host, h("figcaption", { class: "muted loading" }, `Reading the first ${bytes(PREVIEW_BYTES)}…`));
      return;
    }
    const d = entry.data;
    const cut = d.truncated;
    replace(
      host,
      h(
        "figcaption",
        {},
        cut ? h("strong", { class: "cut-mark" }, "Truncated preview: ") : "Preview: ",
        cut ? `the first ${bytes(d.bytes)} of ${bytes(d.size)}, as text` : `all ${bytes(d.size)}, as text`,
      ),
      // textContent only: whatever the payload holds is shown, never run or rendered.
      h("pre", { class: "preview-text", tabindex: "0", "aria-label": `The first ${bytes(d.bytes)} of the payload` }, d.text),
      cut ? h("p", { class: "muted cut-note" }, `… cut here: ${bytes(d.size - d.bytes)} more in the download.`) : null,
    );
  };
  let entry = previews.get(key);
  if (!entry || entry.error) {
    entry = { started: false, data: null, error: null, hosts: [] };
    previews.set(key, entry);
  }
  paint(entry);
  if (entry.data) return host;
  // Still to read (or being read): this host is painted when it arrives. Once the draw that
  // made it is done, hosts a redraw replaced are dropped (and no longer watched).
  entry.hosts.push({ host, paint });
  window.setTimeout(() => {
    for (const old of entry.hosts) if (!old.host.isConnected) observer?.unobserve(old.host);
    entry.hosts = entry.hosts.filter((old) => old.host.isConnected);
  }, 0);
  const load = () => {
    if (entry.started) return;
    entry.started = true;
    get(`/workflows/${seg(source.workflowId)}/preview`, { field: source.field, step: source.step, compensation: source.compensation, bytes: PREVIEW_BYTES })
      .then(({ data }) => {
        entry.data = data;
      })
      .catch((exc) => {
        entry.error = exc.describe ? exc.describe() : String(exc);
      })
      .finally(() => {
        for (const shown of entry.hosts) shown.paint(entry);
        for (const shown of entry.hosts) observer?.unobserve(shown.host);
        entry.hosts = [];
      });
  };
  if (observer) {
    watching.set(host, load);
    observer.observe(host);
  } else load();
  return host;
}

function payloadLink(ref, preview) {
  return h(
    "div",
    { class: "payload" },
    h(
      "p",
      { class: "payload-head" },
      // The presigned URL carries its own Content-Disposition (docs/api.md, Large payloads): the
      // browser saves a named file and the page stays where it is.
      h("a", { href: ref.href, download: "", rel: "noopener noreferrer", class: "payload-link" }, `Download large payload (${bytes(ref.size)})`),
      ref.sha256 ? h("span", { class: "muted sha" }, ` sha256 ${ref.sha256}`) : null,
    ),
    preview ? previewView(preview, ref) : null,
  );
}

function scalar(value) {
  if (value === null || value === undefined) return h("span", { class: "j-null" }, "null");
  if (typeof value === "string") return h("span", { class: "j-str" }, JSON.stringify(value));
  if (typeof value === "number") return h("span", { class: "j-num" }, String(value));
  if (typeof value === "boolean") return h("span", { class: "j-bool" }, String(value));
  return h("span", {}, String(value));
}

function node(value, depth, key, folded = false, links = null, preview = null) {
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
          isLink ? refView(v, preview ? preview(k) : null) : node(v, depth + 1, `${key}/${k}`),
        ),
      ),
    ),
  );
}

/** A large payload's download link alone (no preview: a map item's output, which the
    preview route does not read), or its data as text when it is no link to follow. */
export function refLink(ref) {
  const safe = payloadRef(ref);
  return safe ? payloadLink(safe, null) : node(ref, 1, "ref");
}

/** A large payload's link and preview, or (a link the console will not follow) its data as
    text. `preview`: where its preview is read ({workflowId, field, step?, compensation?}). */
function refView(ref, preview = null) {
  const safe = payloadRef(ref);
  return safe ? payloadLink(safe, preview) : node(ref, 1, "ref");
}

/**
 * A labelled JSON value; `empty` is shown instead of null/undefined when given. `key` names it
 * on the page, so a redraw keeps what the operator folded or unfolded; `folded` starts it closed.
 * `ref`: the field's `_ref` twin (the value is large: a download link instead); `links`: for an
 * object whose large members are given apart (the workflow output and its `output_ref`).
 * `preview`: where a large payload's preview is read: for `ref`, {workflowId, field, step?,
 * compensation?}; for `links`, a function of the member's name giving that.
 */
export function jsonView(label, value, { empty, key = label, folded = false, ref = null, links = null, preview = null } = {}) {
  const absent = value === null || value === undefined;
  const hasLinks = links && typeof links === "object" && Object.keys(links).length > 0;
  let body;
  if (ref) body = refView(ref, preview);
  else if (hasLinks) body = node(absent ? {} : value, 0, key, folded, links, preview);
  else body = absent && empty ? h("span", { class: "muted" }, empty) : node(value, 0, key, folded);
  return h("div", { class: "json" }, h("div", { class: "json-label" }, label), h("div", { class: "json-body" }, body));
}
