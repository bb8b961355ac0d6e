// Answering an Approval step (issue 25.3): one confirmation for approve and reject, with the
// comment recorded beside who decided and when. Used by the approvals page and the workflow page.

import { post, seg } from "./api.js";
import { confirmAction } from "./confirm.js";
import { h } from "./dom.js";

/** True for a step view that waits for a person's answer (an Approval step, WAITING). */
export const awaitsAnswer = (step) => step.status === "WAITING" && step.next_deadline?.why === "approval timeout";

/**
 * Ask, then approve or reject `step` of `workflowId` with the comment typed in the dialog.
 * Resolves to the outcome {ok, reply?, error?}, or null when the person went back.
 */
export function answerApproval(workflowId, step, approve) {
  const verb = approve ? "Approve" : "Reject";
  const comment = h("textarea", { id: "approval-comment", rows: "3", maxlength: "1000" });
  const body = [
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
  return confirmAction({
    title: `${verb} ${step} of workflow ${workflowId}?`,
    body,
    confirmLabel: `${verb} ${step}`,
    danger: !approve,
    prepare: () => (comment.value.trim() ? { comment: comment.value.trim() } : {}),
    act: (payload) => post(`/workflows/${seg(workflowId)}/steps/${seg(step)}/${approve ? "approve" : "reject"}`, payload),
  });
}

/** The approve and reject buttons of one waiting approval; `done(outcome, label)` after each. */
export function answerButtons(workflowId, step, done) {
  return [true, false].map((approve) =>
    h(
      "button",
      {
        type: "button",
        class: approve ? "primary" : "danger",
        dataset: { key: `answer:${workflowId}:${step}:${approve}` },
        on: {
          click: async () => {
            const outcome = await answerApproval(workflowId, step, approve);
            if (outcome) await done(outcome, `${approve ? "Approve" : "Reject"} ${step}`);
          },
        },
      },
      `${approve ? "Approve" : "Reject"} ${step}`,
    ),
  );
}
