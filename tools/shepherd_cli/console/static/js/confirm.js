// Every operator action goes through one confirmation: a native modal <dialog> (focus is kept
// inside it, Escape cancels) that says what will happen, then shows what did.

import { h, replace } from "./dom.js";

/**
 * Ask, then act. `prepare()` (optional) returns what to send or throws an Error whose message is
 * shown in the dialog (it stays open); `act(prepared)` calls the API. Resolves to the outcome
 * {ok, reply?, error?}, or null when the operator cancelled.
 */
export function confirmAction({ title, body, confirmLabel, danger = false, prepare, act }) {
  const problem = h("p", { class: "problem", role: "alert" });
  const cancel = h("button", { type: "button", class: "secondary" }, "Back");
  const ok = h("button", { type: "submit", class: danger ? "danger" : "primary" }, confirmLabel);
  const form = h(
    "form",
    { method: "dialog" },
    h("h2", { id: "confirm-title" }, title),
    h("div", { class: "confirm-body" }, body),
    problem,
    h("div", { class: "buttons" }, cancel, ok),
  );
  const dialog = h("dialog", { class: "confirm", "aria-labelledby": "confirm-title" }, form);
  document.body.append(dialog);

  return new Promise((resolve) => {
    let settled = false;
    const finish = (outcome) => {
      if (settled) return;
      settled = true;
      if (dialog.open) dialog.close();
      dialog.remove();
      resolve(outcome);
    };
    cancel.addEventListener("click", () => finish(null));
    dialog.addEventListener("cancel", () => finish(null)); // Escape
    dialog.addEventListener("close", () => finish(null));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      let prepared;
      try {
        prepared = prepare ? prepare() : undefined;
      } catch (exc) {
        replace(problem, exc.message);
        return;
      }
      ok.disabled = true;
      cancel.disabled = true;
      // Loading state: the label says it is on its way (a bulk action takes a while).
      form.setAttribute("aria-busy", "true");
      replace(ok, "Working…");
      replace(problem);
      try {
        finish({ ok: true, reply: await act(prepared) });
      } catch (error) {
        finish({ ok: false, error });
      }
    });
    dialog.showModal();
  });
}

/** Show an action's outcome in `region` (a live region): the API's reply, or its refusal. */
export function showOutcome(region, label, outcome) {
  if (!outcome) return;
  if (outcome.ok) {
    const { status, data } = outcome.reply;
    replace(region, h("span", { class: "ok" }, `${label}: done (HTTP ${status})`), data?.status ? ` — status now ${data.status}` : "", data?.paused !== undefined ? ` — ${data.paused ? "paused" : "running"}` : "");
    region.dataset.outcome = "ok";
  } else {
    const err = outcome.error;
    replace(region, h("span", { class: "bad" }, `${label}: refused`), ` — ${err.describe ? err.describe() : err.message}`);
    region.dataset.outcome = "error";
  }
}
