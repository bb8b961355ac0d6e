// Send a signal by a business key (issue 37.3): POST /signals reaches every open workflow of
// the caller whose WaitForSignal step of that name waits on those values (its `Match`),
// through the by_key index. Shown on a definition whose steps wait so; the values are JSON, so
// "7" and 7 stay apart as the API compares them.

import { post, seg } from "./api.js";
import { h, replace } from "./dom.js";

/** The definition's WaitForSignal steps that name a Match, by signal name. */
export function matchedSignals(def) {
  const byName = new Map();
  for (const st of def.Steps || []) {
    const wait = st.WaitForSignal;
    if (!wait || !wait.Match) continue;
    if (!byName.has(wait.Name)) byName.set(wait.Name, { steps: [], match: wait.Match });
    byName.get(wait.Name).steps.push(st.Name);
  }
  return byName;
}

function template(match) {
  return JSON.stringify(Object.fromEntries(Object.keys(match).map((k) => [k, ""])));
}

function fate(one) {
  if (one.duplicate) return "already sent (kept once)";
  if (one.taken_by) return `taken by ${one.taken_by}`;
  return "kept until a step waits for it";
}

/** The form, or null if no step of the definition waits on a match. */
export function signalByMatchForm(def) {
  const signals = matchedSignals(def);
  if (!signals.size) return null;
  const names = [...signals.keys()];
  const name = h("select", { name: "match-signal-name" }, names.map((n) => h("option", { value: n }, n)));
  const where = h("p", { class: "muted", id: "match-signal-where" });
  const match = h("textarea", { name: "match-values", rows: "2", spellcheck: "false" });
  const payload = h("textarea", { name: "match-payload", rows: "3", placeholder: '{"quantity": 3}', spellcheck: "false" });
  const signalId = h("input", { name: "match-signal-id", size: 20, placeholder: "optional dedupe id" });
  const outcome = h("div", { class: "outcome", role: "status", id: "match-signal-outcome" });
  const button = h("button", { type: "submit", class: "primary" }, "Send to every match");
  const chosen = () => {
    const entry = signals.get(name.value);
    match.value = template(entry.match);
    const paths = Object.entries(entry.match).map(([k, path]) => `${k} (the input's ${path})`);
    replace(where, `Waited for by ${entry.steps.join(", ")}, on ${paths.join(", ")}.`);
  };
  name.addEventListener("change", chosen);
  chosen();
  const form = h(
    "form",
    { class: "match-signal-form", "aria-label": "Send a signal by business key" },
    h("label", {}, "Signal ", name),
    h("label", {}, "Match (JSON) ", match),
    h("label", {}, "Payload (JSON) ", payload),
    h("label", {}, "Signal id ", signalId),
    button,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { name: name.value };
    try {
      body.match = JSON.parse(match.value);
      if (payload.value.trim()) body.payload = JSON.parse(payload.value);
    } catch {
      replace(outcome, "The match and the payload are JSON.");
      return;
    }
    if (signalId.value.trim()) body.signal_id = signalId.value.trim();
    button.disabled = true;
    replace(outcome, "Sending…");
    try {
      const { data } = await post("/signals", body);
      const sent = data.signals || [];
      replace(
        outcome,
        h("p", {}, sent.length ? `Signal ${data.name} sent to ${sent.length} workflow${sent.length === 1 ? "" : "s"}:` : "No open workflow of yours waits on these values: nothing sent."),
        sent.length
          ? h(
              "ul",
              { class: "match-signal-sent" },
              sent.map((one) => h("li", { "data-workflow-id": one.workflow_id }, h("a", { href: `#/workflows/${seg(one.workflow_id)}` }, one.workflow_id), ` #${one.sequence}: ${fate(one)}`)),
            )
          : null,
      );
    } catch (exc) {
      replace(outcome, exc.describe ? exc.describe() : String(exc));
    } finally {
      button.disabled = false;
    }
  });
  return h("section", { id: "signal-by-match", "aria-labelledby": "match-signal-title" }, h("h3", { id: "match-signal-title" }, "Send a signal by business key"), where, form, outcome);
}
