// The Shepherd API through the console's proxy (/api/...). The console's server adds the
// signature or the caller; this page adds only the console token to requests that change things.

const TOKEN = document.querySelector('meta[name="shepherd-console-token"]')?.content || "";
const TOKEN_HEADER = "X-Shepherd-Console-Token";
// A read the API has not answered by then is shown as an error (and a live page tries again
// at its next tick) rather than a spinner for as long as the proxy waits (issue 35.5). A change
// (POST) is never abandoned: it may have been done, so the page waits for its answer.
export const READ_TIMEOUT_MS = 4000;

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
  const abort = new AbortController();
  const timer = reading ? window.setTimeout(() => abort.abort(), READ_TIMEOUT_MS) : null;
  let response;
  let text;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
      signal: abort.signal,
    });
    text = await response.text();
  } catch (exc) {
    if (abort.signal.aborted) {
      throw new ApiError(0, { code: "ApiTimeout", message: `the API did not answer ${method} ${path} within ${READ_TIMEOUT_MS / 1000} s: it may be down or hung` });
    }
    throw new ApiError(0, { code: "ConsoleUnreachable", message: `the console did not answer: ${exc.message}` });
  } finally {
    if (timer !== null) window.clearTimeout(timer);
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
