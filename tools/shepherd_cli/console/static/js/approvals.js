// Answering an Approval step (issue 25.3): one confirmation for approve and reject, with the
// comment recorded beside who decided and when. Used by the approvals page and the workflow page.

import { get, post, seg } from "./api.js";
import { confirmAction } from "./confirm.js";
import { h } from "./dom.js";
import { jsonView } from "./json.js";

/** True for a step view that waits for a person's answer (an Approval step, WAITING). */
export const awaitsAnswer = (step) => step.status === "WAITING" && step.next_deadline?.why === "approval timeout";

// Approvals answered from this page, by "workflow:step": the inbox (an index) and a view read
// a moment before may still list one as waiting; its row then says it was answered, and offers
// no second answer (which the API would refuse with 409 ApprovalNotPending).
const answered = new Map();

const keyOf = (workflowId, step) => `${workflowId}:${step}`;

/** What the person approves: the workflow's type and input, and what its finished steps gave
 * (the approval's step is reached with these); read when the dialog opens. */
async function approvalContext(workflowId, step) {
  let view;
  try {
    view = (await get(`/workflows/${seg(workflowId)}`)).data;
  } catch (exc) {
    return h("p", { class: "problem", id: "approval-context" }, `What this approval is about could not be read: ${exc.describe ? exc.describe() : exc}`);
  }
  const done = view.steps.filter((st) => st.status === "SUCCEEDED" && st.name !== step && st.output !== null && st.output !== undefined);
  return h(
    "div",
    { class: "approval-context", id: "approval-context" },
    h("p", {}, "Workflow ", h("code", {}, workflowId), ` (${view.type}, ${view.status}), started with this input:`),
    jsonView("Input", view.input, { key: "approve:input", ref: view.input_ref, empty: "none" }),
    done.length ? h("p", {}, "What its finished steps gave:") : null,
    done.map((st) => jsonView(st.name, st.output, { key: `approve:${st.name}`, ref: st.output_ref, folded: true })),
  );
}

/**
 * Ask, then approve or reject `step` of `workflowId` with the comment typed in the dialog; the
 * dialog shows what is being approved. Resolves to the outcome {ok, reply?, error?}, or null
 * when the person went back.
 */
export async function answerApproval(workflowId, step, approve) {
  const verb = approve ? "Approve" : "Reject";
  const comment = h("textarea", { id: "approval-comment", rows: "3", maxlength: "1000" });
  const body = [
    await approvalContext(workflowId, step),
    h(
      "p",
      {},
      approve
        ? `Step ${step} succeeds and the workflow goes on; your name and comment are recorded.`
        : `Step ${step} fails with Rejected (never retried) and the workflow unwinds or pauses as its definition says; your name and comment are recorded.`,
    ),
    h("label", { for: "approval-comment" }, "Comment (optional)"),
    comment,
  ];
  const outcome = await confirmAction({
    title: `${verb} ${step} of workflow ${workflowId}?`,
    body,
    confirmLabel: `${verb} ${step}`,
    danger: !approve,
    prepare: () => (comment.value.trim() ? { comment: comment.value.trim() } : {}),
    act: (payload) => post(`/workflows/${seg(workflowId)}/steps/${seg(step)}/${approve ? "approve" : "reject"}`, payload),
  });
  if (outcome?.ok) answered.set(keyOf(workflowId, step), approve ? "approved" : "rejected");
  else if (outcome?.error?.code === "ApprovalNotPending") answered.set(keyOf(workflowId, step), "answered already");
  return outcome;
}

/** The approve and reject buttons of one waiting approval; `done(outcome, label)` after each.
 * Once answered here, words in their place: it is not waiting any more. */
export function answerButtons(workflowId, step, done) {
  const verdict = answered.get(keyOf(workflowId, step));
  if (verdict) return [h("span", { class: "answered", "data-answered": verdict }, `${verdict[0].toUpperCase()}${verdict.slice(1)}: no longer waiting`)];
  const buttons = [true, false].map((approve) =>
    h(
      "button",
      {
        type: "button",
        class: approve ? "primary" : "danger",
        dataset: { key: `answer:${workflowId}:${step}:${approve}` },
        on: {
          click: async () => {
            const outcome = await answerApproval(workflowId, step, approve);
            if (answered.has(keyOf(workflowId, step))) {
              buttons[0].replaceWith(...answerButtons(workflowId, step, done));
              buttons[1].remove();
            }
            if (outcome) await done(outcome, `${approve ? "Approve" : "Reject"} ${step}`);
          },
        },
      },
      `${approve ? "Approve" : "Reject"} ${step}`,
    ),
  );
  return buttons;
}
