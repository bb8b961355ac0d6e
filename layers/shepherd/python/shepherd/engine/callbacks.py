"""Callback steps: an outside system heartbeats, succeeds or fails an attempt with its token.

The token is the capability: it names one attempt, and every write it leads to is fenced like
an agent's (status, attempt and the token's hash). Only a genuine token learns anything: a
forged one is unknown (404) whatever the state of the attempt it names.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shepherd import jsonsafe, limits
from shepherd.decisions import transitions as tx
from shepherd.decisions.planner import failure_decision
from shepherd.definitions import Definition
from shepherd.engine.scheduler import Scheduler, output_problem
from shepherd.engine.tokens import TaskToken, matches
from shepherd.engine.uploads import Uploads
from shepherd.errors import (
    HeartbeatTooSoon,
    OutputRejected,
    PayloadTooLarge,
    TaskTokenInvalid,
    TaskTokenStale,
    UploadRejected,
)
from shepherd.keys import Kind
from shepherd.model import StepRecord, StepStatus, WorkflowState, dumps

_OVER = "the attempt of this token is over"


class Callbacks:
    """Callbacks with task tokens: the outside system's side of a callback step."""

    def __init__(self, scheduler: Scheduler, uploads: Uploads) -> None:
        self.scheduler = scheduler
        self.uploads = uploads

    def callback(
        self,
        token: str,
        action: str,
        *,
        details: Any = None,
        output: Any = None,
        error: str | None = None,
        cause: str | None = None,
        output_upload: str | None = None,
        owner: str = "local",
    ) -> StepRecord:
        """Heartbeat, succeed or fail the attempt a task token belongs to. A success's output is
        `output`, or the object of `owner`'s upload `output_upload` (see engine.uploads; the
        owner defaults as for `Scheduler.start_upload`)."""
        asl = self.scheduler.asl
        unit = asl.token_of(token)
        if unit is not None:  # a state machine's Task (`shepherd.asl.engine`): its own writes
            if output_upload is not None:  # a state machine's result is at most 256 KiB
                raise UploadRejected(
                    "UploadNotSupported",
                    "a state machine's Task takes its output in the request, not as an upload",
                    output_upload,
                    "output_upload",
                )
            return asl.callback(
                unit,
                action,
                output=output,
                error=None if error is None else limits.truncate(error, limits.MAX_ERROR_NAME),
                cause=None if cause is None else limits.truncate(cause, limits.MAX_ERROR_CAUSE),
                details=details,
                quiet_ms=limits.MIN_CALLBACK_HEARTBEAT_MS,
            )
        parsed, state, definition, rec = self._target(token)
        now = self.scheduler.ports.clock.now_ms()
        if action == "heartbeat":
            return self._heartbeat(state, rec, parsed, details, now)
        if action == "success":
            upload: dict[str, Any] | None = None
            claimant = f"task:{rec.workflow_id}:{rec.kind}:{rec.name}:{parsed.attempt}"
            if output_upload is not None:
                text, upload = self.uploads.take_output(output_upload, owner, claimant)
            else:
                text = dumps(output)
            problem = output_problem(self.scheduler.whole_if_large(state, text), rec, text)
            if problem is None:
                if output_upload is not None:
                    self.uploads.claim(output_upload, owner, claimant, "output_upload")
                stored = self.scheduler.keep_for(rec, "output", text)
                pulled = self.scheduler.pull_due(state, rec.kind, rec.name)
                updated = self.scheduler.complete_attempt(
                    state, rec, stored, token_hash=parsed.hash
                )
                if updated is None:
                    raise TaskTokenStale(_OVER)
                self.scheduler.pull_due_again(state, rec.kind, rec.name, pulled)
                if upload is not None:
                    self.uploads.discard(upload)
                return updated
            # Over a cap: the attempt fails for good (OutputTooLarge), and the caller is told.
            self._fail(state, definition, rec, parsed, "OutputTooLarge", problem, True)
            raise OutputRejected(
                jsonsafe.size(text), limits.MAX_OUTPUT_BYTES, f"{problem}; the attempt failed"
            )
        name = limits.truncate(error or "TaskFailed", limits.MAX_ERROR_NAME)
        message = limits.truncate(cause or name, limits.MAX_ERROR_CAUSE)
        return self._fail(state, definition, rec, parsed, name, message, False)

    def _heartbeat(
        self, state: WorkflowState, rec: StepRecord, token: TaskToken, details: Any, now: int
    ) -> StepRecord:
        """Keep the attempt alive, at most once a second per token (checked before anything
        is stored, and again by the write's condition, so racing callers cannot pass it).
        Details a heartbeat replaces are deleted from the payload bucket once it has won."""
        quiet = limits.MIN_CALLBACK_HEARTBEAT_MS
        _too_soon(rec.callback_heartbeat_at, now, quiet)
        text = None if details is None else dumps(details)
        if text is not None and jsonsafe.size(text) > limits.MAX_DETAILS_BYTES:
            raise PayloadTooLarge("details", jsonsafe.size(text), limits.MAX_DETAILS_BYTES)
        if text is not None:
            text = self.scheduler.keep_for(rec, "details", text)
        write = tx.heartbeat(rec, token.attempt, now, text, token.hash, quiet_ms=quiet)
        updated = self.scheduler.executor.step(state, write)
        payloads = self.scheduler.ports.payloads
        if updated is None:
            if text != rec.details:
                payloads.discard(text)  # this heartbeat's own object: nothing references it
            current = state.record(rec.kind, rec.name)
            if current is not None and matches(current.callback_token, token):
                _too_soon(current.callback_heartbeat_at, now, quiet)  # a racing one won
            raise TaskTokenStale(_OVER)
        if text is not None and rec.details != text:
            payloads.discard(rec.details)  # superseded: no reader can reach it any more
        return updated

    def _fail(
        self,
        state: WorkflowState,
        definition: Definition,
        rec: StepRecord,
        token: TaskToken,
        error: str,
        message: str,
        permanent: bool,
    ) -> StepRecord:
        pulled = self.scheduler.pull_due(state, rec.kind, rec.name)  # a retry, or the unwinding
        ended = failure_decision(
            rec,
            definition.spec(rec.kind, rec.name),
            error_type=error,
            message=message,
            permanent=permanent,
            unwinding=state.workflow.status.unwinding and rec.kind == "step",
            rng=self.scheduler.ports.rng,
        )
        if not self.scheduler.end_attempt(state, definition, replace(ended, token_hash=token.hash)):
            raise TaskTokenStale(_OVER)
        updated = state.record(rec.kind, rec.name)
        assert updated is not None
        if updated.status is StepStatus.FAILED:
            self.scheduler.advance_after(rec, failed=True)
        self.scheduler.pull_due_again(state, rec.kind, rec.name, pulled)
        return updated

    def _target(self, token: str) -> tuple[TaskToken, WorkflowState, Definition, StepRecord]:
        """The attempt a genuine token names, if it still waits; else why not.

        Only a token whose hash the step holds (for its current attempt) or held (in the history
        of an ended attempt) is genuine. Anything else, including a real attempt's coordinates
        with a wrong secret, is `TaskTokenInvalid` whatever state that attempt is in: a 409
        would tell a forger that the workflow, the step and the attempt exist.
        """
        try:
            parsed = TaskToken.decode(token)
        except ValueError:
            raise TaskTokenInvalid("unknown task token") from None
        units: list[tuple[Kind, str]] = [(parsed.kind, parsed.step)]
        if parsed.kind == "compensation":
            units.append(("step", parsed.step))
        loaded = self.scheduler.load_units(parsed.workflow_id, units)
        rec = loaded[0].record(parsed.kind, parsed.step) if loaded else None
        if loaded is None or rec is None:
            raise TaskTokenInvalid("unknown task token")
        if matches(rec.callback_token, parsed) and rec.attempt == parsed.attempt:
            return parsed, loaded[0], loaded[1], rec
        if any(h.get("a") == parsed.attempt and matches(h.get("th"), parsed) for h in rec.history):
            raise TaskTokenStale(_OVER)
        raise TaskTokenInvalid("unknown task token")


def _too_soon(last_ms: int | None, now: int, quiet_ms: int) -> None:
    """HeartbeatTooSoon unless the last heartbeat is at least `quiet_ms` old."""
    if last_ms is not None and now - last_ms < quiet_ms:
        raise HeartbeatTooSoon(max(1, -(-(last_ms + quiet_ms - now) // 1000)))
