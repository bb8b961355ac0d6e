// The Shepherd API through the console's proxy (/api/...). The console's server adds the
// signature or the caller; this page adds only the console token to requests that change things.

const TOKEN = document.querySelector('meta[name="shepherd-console-token"]')?.content || "";
const TOKEN_HEADER = "X-Shepherd-Console-Token";
// A read the API has not answered within SLOW_READ_MS is said at once, on every page (the
// #api-slow alert), and the answer still drawn when it comes: a hung API is an error within
// 5 s, not a bare spinner for as long as the proxy waits (30 s, then its 504 ApiTimeout), and
// a slow one is not abandoned (issue 35.5).
export const SLOW_READ_MS = 4000;
const slowReads = new Map(); // a pending read's number -> "GET /workflows"
let reads = 0;

function paintSlow() {
  const alert = document.getElementById("api-slow");
  if (!alert) return;
  const [first] = slowReads.values();
  alert.hidden = !first;
  alert.textContent = first
    ? `The API has not answered ${first} for ${SLOW_READ_MS / 1000} s: it may be down or hung (the console still waits for it, up to its 30 s timeout).`
    : "";
}

/** An API refusal in the API's one error shape (docs/api.md, Errors). */
export class ApiError extends Error {
  constructor(status, error) {
    super(error?.message || `HTTP ${status}`);
    this.status = status;
    this.code = error?.code || "HttpError";
    this.field = error?.field || null;
    this.requestId = error?.request_id || null;
  }

  /** One line for people: "409 InvalidTransition (field): message [request id]". */
  describe() {
    const field = this.field ? ` (${this.field})` : "";
    const id = this.requestId ? ` [request ${this.requestId}]` : "";
    return `${this.status} ${this.code}${field}: ${this.message}${id}`;
  }
}

/** Call a route: resolves to {status, data}; rejects with ApiError for any non-2xx reply. */
export async function call(method, path, { query, body } = {}) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") params.set(key, value);
  }
  const qs = params.toString();
  const url = `/api${path}${qs ? `?${qs}` : ""}`;
  const headers = { Accept: "application/json" };
  if (method !== "GET" && method !== "HEAD") headers[TOKEN_HEADER] = TOKEN;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const reading = method === "GET" || method === "HEAD";
  const read = (reads += 1);
  const timer = reading
    ? window.setTimeout(() => {
        slowReads.set(read, `${method} ${path}`);
        paintSlow();
      }, SLOW_READ_MS)
    : null;
  let response;
  let text;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
    });
    text = await response.text();
  } catch (exc) {
    throw new ApiError(0, { code: "ConsoleUnreachable", message: `the console did not answer: ${exc.message}` });
  } finally {
    if (timer !== null) window.clearTimeout(timer);
    if (slowReads.delete(read)) paintSlow();
  }
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    throw new ApiError(response.status, data?.error || { code: "HttpError", message: text.slice(0, 500) });
  }
  return { status: response.status, data };
}

export const get = (path, query) => call("GET", path, { query });
export const post = (path, body) => call("POST", path, { body });

/** A path segment (workflow id, pool, definition name) safely encoded. */
export const seg = (value) => encodeURIComponent(String(value));
