"""Large payloads through the engine (issue 12): the item keeps a reference, the object lives
in the payload bucket, agents see plain values that resolve lazily, and faults stay harmless.

Runs on the in-memory store and on DynamoDB (moto), each with the in-memory payload bucket
(the S3 adapter passes the same contract: tests/contract/test_payload_store_contract.py)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from shepherd import jsonsafe, limits
from shepherd.engine.agent import AgentContext, Outcome
from shepherd.errors import InputTooLarge
from shepherd.model import StepStatus, WorkflowStatus
from shepherd.payloads import REF_PREFIX, PayloadRef, ref_of
from support import ORDER, Harness, registry_with

KIB = 1024
MIB = 1024 * KIB


def _sized(base: dict[str, Any], size: int) -> dict[str, Any]:
    """`base` padded so that its canonical JSON is exactly `size` bytes."""
    empty = jsonsafe.size(jsonsafe.dumps({**base, "pad": ""}))
    return {**base, "pad": "p" * (size - empty)}


def _returns_bytes(size: int) -> Any:
    def agent(ctx: AgentContext) -> Any:
        return _sized({"step": ctx.step, "attempt": ctx.attempt}, size)

    return agent


def _referenced(h: Harness, workflow_id: str) -> set[str]:
    """Every object key the workflow's items reference."""
    state = h.state(workflow_id)
    stored = [state.workflow.input]
    for rec in (*state.steps.values(), *state.compensations.values()):
        stored += [rec.output, rec.details, rec.input]
    return {ref.key for text in stored if (ref := ref_of(text)) is not None}


def test_small_payloads_stay_inline_and_touch_no_bucket(harness: Harness) -> None:
    wf = harness.start("order_fulfilment", ORDER)
    assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED
    assert harness.payload_store.puts == 0 and harness.payload_store.gets == 0
    assert not harness.state(wf).workflow.input.startswith(REF_PREFIX)


def test_an_input_at_its_cap_is_kept_by_reference_and_agents_read_it_plainly(
    harness: Harness,
) -> None:
    seen: dict[str, int] = {}

    def reserve(ctx: AgentContext) -> Any:
        seen["input"] = jsonsafe.size(jsonsafe.dumps(ctx.input))
        return {"reserved": ctx.input["items"]}

    payload = _sized(ORDER, limits.MAX_INPUT_BYTES)
    with registry_with(reserve_inventory=reserve) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", payload)
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    ref = ref_of(state.workflow.input)
    assert ref is not None and ref.size == limits.MAX_INPUT_BYTES
    assert ref.key == f"wf/{wf}/input/{ref.sha256}"  # the server's names, never the caller's
    assert seen["input"] == limits.MAX_INPUT_BYTES
    with pytest.raises(InputTooLarge):
        harness.start("order_fulfilment", _sized(ORDER, limits.MAX_INPUT_BYTES + 1))


def test_inline_threshold_boundary(harness: Harness) -> None:
    at = _sized(ORDER, limits.PAYLOAD_INLINE_BYTES)
    over = _sized(ORDER, limits.PAYLOAD_INLINE_BYTES + 1)
    inline = harness.state(harness.start("order_fulfilment", at)).workflow.input
    referenced = harness.state(harness.start("order_fulfilment", over)).workflow.input
    assert json.loads(inline) == at
    assert referenced.startswith(REF_PREFIX)


def test_a_step_returns_a_value_at_the_output_cap_with_no_code_change(harness: Harness) -> None:
    """100 MiB from a plain `return`: stored by reference, read back whole by the next step
    and by the workflow output, each verified against its sha256."""
    received: dict[str, int] = {}

    def ship(ctx: AgentContext) -> Any:
        received["charge"] = len(ctx.dependencies["charge_payment"]["pad"])
        return {"tracking": "T"}

    with registry_with(
        charge_payment=_returns_bytes(limits.MAX_OUTPUT_BYTES), ship_order=ship
    ) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    ref = ref_of(state.steps["charge_payment"].output)
    assert ref is not None and ref.size == limits.MAX_OUTPUT_BYTES
    assert received["charge"] > limits.MAX_OUTPUT_BYTES - 100
    assert jsonsafe.size(jsonsafe.dumps(harness.output(wf)["charge_payment"])) == ref.size


def test_an_output_one_byte_over_the_cap_fails_the_attempt_and_stores_no_output(
    harness: Harness,
) -> None:
    with registry_with(charge_payment=_returns_bytes(limits.MAX_OUTPUT_BYTES + 1)) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(wf)
    charge = state.steps["charge_payment"]
    assert charge.status is StepStatus.FAILED and "OutputTooLarge" in (charge.error or "")
    # No output object (only the error's full text: its message and traceback).
    kept = [k.split("/")[5] for k in harness.payload_store.objects if "/charge_payment/" in k]
    assert kept == ["error"]


def test_dependencies_resolve_lazily_only_what_an_agent_reads(harness: Harness) -> None:
    gets: list[int] = []

    def ship(ctx: AgentContext) -> Any:
        gets.append(harness.payload_store.gets)
        assert set(ctx.dependencies) == {"charge_payment"}  # names cost nothing
        gets.append(harness.payload_store.gets)
        assert ctx.dependencies["charge_payment"]["step"] == "charge_payment"
        ctx.dependencies["charge_payment"]  # read twice, fetched once
        gets.append(harness.payload_store.gets)
        return {"tracking": "T"}

    with registry_with(charge_payment=_returns_bytes(64 * KIB), ship_order=ship) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED
    assert gets[1] - gets[0] == 0 and gets[2] - gets[1] == 1


def test_large_progress_details_reach_the_next_attempt(harness: Harness) -> None:
    got: list[Any] = []

    def flaky(ctx: AgentContext) -> Any:
        got.append(ctx.previous_details)
        if ctx.attempt == 1:
            ctx.report_progress({"log": "d" * (300 * KIB)})
            raise RuntimeError("transient")
        return {"ok": True}

    with registry_with(charge_payment=flaky) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert got[0] is None and got[1] == {"log": "d" * (300 * KIB)}


def test_a_compensation_sees_the_large_output_it_undoes(harness: Harness) -> None:
    undone: list[Any] = []

    def refund(ctx: AgentContext) -> Any:
        assert ctx.forward is not None
        undone.append(len(ctx.forward.output["pad"]))
        undone.append(ctx.step_output["step"])
        return {"refunded": True}

    def decline(ctx: AgentContext) -> Any:
        from shepherd.errors import PermanentError

        raise PermanentError("no", name="AddressInvalid")

    with registry_with(
        charge_payment=_returns_bytes(50 * KIB), refund_payment=refund, ship_order=decline
    ) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.COMPENSATED
    assert undone[0] > 49 * KIB and undone[1] == "charge_payment"


def test_a_fenced_attempts_object_is_never_referenced(harness: Harness) -> None:
    """The zombie wrote its large output before its fenced write lost: the object exists,
    nothing points at it, and the workflow's output is the fresh attempt's."""

    def slow_then_fresh(ctx: AgentContext) -> Any:
        if ctx.attempt == 1:
            harness.clock.advance(5)  # frozen past HeartbeatSeconds: attempt 1 is timed out
            assert harness.sweep().actions["TimedOut"] == 1
            return _sized({"tracking": "ZOMBIE"}, 20 * KIB)
        return _sized({"tracking": "FRESH"}, 20 * KIB)

    with registry_with(ship_order=slow_then_fresh) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    assert harness.handled(wf, "ship_order") == [(1, "fenced"), (2, "succeeded")]
    zombie = [k for k in harness.payload_store.objects if f"wf/{wf}/step/ship_order/1/" in k]
    assert len(zombie) == 1  # written, then its write lost
    assert zombie[0] not in _referenced(harness, wf)
    assert harness.output(wf)["ship_order"]["tracking"] == "FRESH"


def test_an_idempotent_replays_object_is_the_same_write_once_key(harness: Harness) -> None:
    payload = _sized(ORDER, 20 * KIB)
    first = harness.scheduler.start("order_fulfilment", payload, idempotency_key="k1")
    again = harness.scheduler.start("order_fulfilment", payload, idempotency_key="k1")
    assert first.created and not again.created
    assert first.workflow.input == again.workflow.input  # same content, same key
    assert len([k for k in harness.payload_store.objects if k.startswith("wf/")]) == 1


def test_a_missing_object_fails_the_step_with_a_clear_error_never_null(harness: Harness) -> None:
    wf = harness.start("order_fulfilment", _sized(ORDER, 20 * KIB))
    ref = ref_of(harness.state(wf).workflow.input)
    assert ref is not None
    del harness.payload_store.objects[ref.key]
    state = harness.run(wf)
    reserve = state.steps["reserve_inventory"]
    assert reserve.status is StepStatus.FAILED and reserve.attempt == 1  # not retried
    error = json.loads(reserve.error or "{}")
    assert error["type"] == "PayloadMissing" and ref.key in error["message"]
    assert state.workflow.status is WorkflowStatus.FAILED or state.workflow.status.terminal


def test_an_altered_object_is_refused(harness: Harness) -> None:
    wf = harness.start("order_fulfilment", _sized(ORDER, 20 * KIB))
    ref = ref_of(harness.state(wf).workflow.input)
    assert ref is not None
    data = harness.payload_store.objects[ref.key]
    harness.payload_store.objects[ref.key] = data.replace(b"ppp", b"qqq", 1)
    reserve = harness.run(wf).steps["reserve_inventory"]
    assert "checksum" in json.loads(reserve.error or "{}")["message"]


def test_a_failed_put_fails_the_attempt_which_is_retried(harness: Harness) -> None:
    from shepherd.errors import StoreUnavailable

    store = harness.payload_store
    original = store.put
    failures = [1]

    def flaky_put(key: str, data: bytes, sha256: str) -> None:
        if failures:
            failures.pop()
            raise StoreUnavailable("S3 is slow today")
        original(key, data, sha256)

    store.put = flaky_put  # type: ignore[method-assign]
    with registry_with(charge_payment=_returns_bytes(20 * KIB)) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    charge = state.steps["charge_payment"]
    assert charge.attempt == 2 and charge.history[0]["e"] == "StoreUnavailable"
    assert [r.outcome for m, r in harness.log if m.step == "charge_payment"] == [
        Outcome.RETRYING,
        Outcome.SUCCEEDED,
    ]


def test_an_operators_large_replacement_input_reaches_the_step(harness: Harness) -> None:
    from test_pause import pausing_order

    pausing_order(harness)
    seen: list[Any] = []

    def charge(ctx: AgentContext) -> Any:
        seen.append(ctx.input)
        if ctx.input.get("amount", 0) > 100:
            from shepherd.errors import PermanentError

            raise PermanentError("over the card limit", name="CardDeclined")
        return {"ok": True}

    replacement = _sized({**ORDER, "amount": 7}, 30 * KIB)
    with registry_with(charge_payment=charge) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", {**ORDER, "amount": 500})
        harness.pump()
        assert harness.status(wf) is WorkflowStatus.PAUSED
        harness.operations.resume(wf, step="charge_payment", step_input=replacement)
        state = harness.run(wf)
    assert state.workflow.status is WorkflowStatus.SUCCEEDED
    stored = state.steps["charge_payment"].input
    assert stored is not None and stored.startswith(REF_PREFIX)
    assert seen[-1] == replacement


def test_a_reference_names_its_object_exactly(harness: Harness) -> None:
    ref = PayloadRef("wf/x/input/ab", 12, "ab")
    assert ref_of(ref.text()) == ref
    digest = hashlib.sha256(b"{}").hexdigest()
    assert ref_of(PayloadRef("k", 2, digest).text()) == PayloadRef("k", 2, digest)


def test_demo_agents_return_at_least_output_bytes_with_no_change_to_them(
    harness: Harness,
) -> None:
    from shepherd_examples.agents import registry

    harness.runtime.agents = registry
    payload = {**ORDER, "output_bytes": {"charge_payment": 3 * MIB, "nope": "x"}}
    wf = harness.start("order_fulfilment", payload)
    assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED
    output = harness.output(wf)
    assert jsonsafe.size(jsonsafe.dumps(output["charge_payment"])) >= 3 * MIB
    assert output["charge_payment"]["amount"] == ORDER["amount"]  # its own result is kept
    assert "padding" not in output["ship_order"]


# --------------------------------------------------------- uploads (POST /payloads), engine


def _uploaded(h: Harness, payload: Any, owner: str = "alice") -> str:
    """An upload (as POST /payloads records it) whose object holds `payload`; its id."""
    data = jsonsafe.dumps(payload).encode()
    upload = h.uploads.create(owner, len(data), hashlib.sha256(data).hexdigest())
    h.payload_store.put(upload.key, data, hashlib.sha256(data).hexdigest())
    return upload.upload_id


def test_an_upload_of_100_mib_starts_a_workflow_whose_agents_read_it(harness: Harness) -> None:
    payload = _sized(ORDER, limits.MAX_UPLOAD_BYTES)
    upload_id = _uploaded(harness, payload)
    started = harness.uploads.start("order_fulfilment", upload_id, owner="alice")
    assert started.created
    ref = ref_of(started.workflow.input)
    assert ref is not None and ref.size == limits.MAX_UPLOAD_BYTES
    assert ref.key.startswith(f"wf/{started.workflow_id}/input/")
    assert not [k for k in harness.payload_store.objects if k.startswith("uploads/")]
    assert harness.run(started.workflow_id).workflow.status is WorkflowStatus.SUCCEEDED


def test_two_starts_racing_for_one_upload_one_wins(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shepherd.errors import UploadUsed

    upload_id = _uploaded(harness, ORDER)
    uploads = harness.uploads
    # Both read the upload unused; the second's claim then loses its conditional write.
    real_claim = uploads.claim
    results: list[Any] = []
    raced: list[bool] = []

    def racing_claim(*args: Any) -> None:
        if not raced:  # the other start runs to its end between our read and our claim
            raced.append(True)
            results.append(
                harness.uploads.start(
                    "order_fulfilment", upload_id, owner="alice", idempotency_key="b"
                )
            )
        real_claim(*args)

    monkeypatch.setattr(uploads, "claim", racing_claim)
    with pytest.raises(UploadUsed):
        harness.uploads.start("order_fulfilment", upload_id, owner="alice", idempotency_key="a")
    assert results[0].created


def test_a_start_that_dies_after_its_claim_is_finished_by_repeating_it(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shepherd.errors import StoreUnavailable, UploadUsed

    upload_id = _uploaded(harness, ORDER)
    real_create = harness.scheduler.create

    def dies(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("the transaction never ran")

    monkeypatch.setattr(harness.scheduler, "create", dies)
    with pytest.raises(StoreUnavailable):
        harness.uploads.start("order_fulfilment", upload_id, owner="alice")
    monkeypatch.setattr(harness.scheduler, "create", real_create)
    # Another request naming it (another key) is refused: the claim names the first's id.
    with pytest.raises(UploadUsed):
        harness.uploads.start("order_fulfilment", upload_id, owner="alice", idempotency_key="x")
    again = harness.uploads.start("order_fulfilment", upload_id, owner="alice")
    assert again.created
    assert harness.run(again.workflow_id).workflow.status is WorkflowStatus.SUCCEEDED


def test_an_upload_expires_after_15_minutes(harness: Harness) -> None:
    from shepherd.errors import UploadExpired

    upload_id = _uploaded(harness, ORDER)
    harness.clock.advance(limits.UPLOAD_SECONDS - 0.001)
    fresh = _uploaded(harness, ORDER)
    assert harness.uploads.start("order_fulfilment", fresh, owner="alice").created
    harness.clock.advance(0.001)
    with pytest.raises(UploadExpired):
        harness.uploads.start("order_fulfilment", upload_id, owner="alice")


# ------------------------------------------- a callback's output from an upload, engine


def _waiting_for_carrier(h: Harness) -> tuple[str, str]:
    """A workflow whose ship_order waits for a callback; its id and the task token."""
    from shepherd.engine.agent import Pending

    tokens: list[str] = []

    def ship(ctx: AgentContext) -> Any:
        tokens.append(ctx.task_token())
        return Pending()

    with registry_with(ship_order=ship) as agents:
        h.runtime.agents = agents
        wf = h.start("order_fulfilment", ORDER)
        h.pump()
    assert h.step(wf, "ship_order").status is StepStatus.WAITING
    return wf, tokens[0]


def test_a_callback_succeeds_with_a_100_mib_upload_as_its_output(harness: Harness) -> None:
    from shepherd.errors import TaskTokenStale, UploadUsed

    wf, token = _waiting_for_carrier(harness)
    result = _sized({"tracking": "BIG"}, limits.MAX_OUTPUT_BYTES)
    upload_id = _uploaded(harness, result)
    harness.callbacks.callback(token, "success", output_upload=upload_id, owner="alice")
    rec = harness.step(wf, "ship_order")
    ref = ref_of(rec.output)
    assert rec.status is StepStatus.SUCCEEDED and ref is not None
    assert ref.size == limits.MAX_OUTPUT_BYTES
    assert ref.key.startswith(f"wf/{wf}/step/ship_order/1/output/")
    assert not [k for k in harness.payload_store.objects if k.startswith("uploads/")]
    assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED
    # The attempt is over: its token is stale; the upload is used (by that attempt).
    with pytest.raises(TaskTokenStale):
        harness.callbacks.callback(token, "success", output_upload=upload_id, owner="alice")
    with pytest.raises(UploadUsed) as used:
        harness.uploads.start("order_fulfilment", upload_id, owner="alice")
    assert used.value.used_by == f"task:{wf}:step:ship_order:1"


def test_a_callback_upload_that_cannot_be_used_leaves_the_attempt_waiting(
    harness: Harness,
) -> None:
    from shepherd.errors import InputInvalid, UploadExpired, UploadNotFound, UploadRejected

    wf, token = _waiting_for_carrier(harness)
    mine = _uploaded(harness, {"tracking": "T"})
    with pytest.raises(UploadNotFound) as foreign:  # another caller's upload
        harness.callbacks.callback(token, "success", output_upload=mine, owner="bob")
    assert foreign.value.field == "output_upload"
    data = b'{"tracking": NaN}'
    bad = uploads_create(harness, data)
    with pytest.raises(InputInvalid) as invalid:
        harness.callbacks.callback(token, "success", output_upload=bad, owner="alice")
    assert invalid.value.field == "output_upload"
    with pytest.raises(UploadRejected) as missing:
        harness.callbacks.callback(
            token, "success", output_upload=uploads_create(harness, b"{}", put=False), owner="alice"
        )
    assert missing.value.code == "UploadMissing"
    harness.clock.advance(limits.UPLOAD_SECONDS)
    with pytest.raises(UploadExpired):
        harness.callbacks.callback(token, "success", output_upload=mine, owner="alice")
    rec = harness.step(wf, "ship_order")
    assert rec.status is StepStatus.WAITING and rec.output is None
    # A fresh upload completes it.
    fresh = _uploaded(harness, {"tracking": "T"})
    harness.callbacks.callback(token, "success", output_upload=fresh, owner="alice")
    assert harness.step(wf, "ship_order").status is StepStatus.SUCCEEDED


def uploads_create(h: Harness, data: bytes, *, put: bool = True) -> str:
    """An upload of `data` (declared without a sha256); its object written unless not `put`."""
    upload = h.uploads.create("alice", len(data), None)
    if put:
        h.payload_store.put(upload.key, data, hashlib.sha256(data).hexdigest())
    return upload.upload_id


def test_a_callback_that_dies_after_its_claim_is_finished_by_repeating_it(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shepherd.errors import StoreUnavailable, UploadUsed

    wf, token = _waiting_for_carrier(harness)
    upload_id = _uploaded(harness, {"tracking": "AGAIN"})
    real = harness.scheduler.complete_attempt

    def dies(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("the write never ran")

    monkeypatch.setattr(harness.scheduler, "complete_attempt", dies)
    with pytest.raises(StoreUnavailable):
        harness.callbacks.callback(token, "success", output_upload=upload_id, owner="alice")
    monkeypatch.setattr(harness.scheduler, "complete_attempt", real)
    # The claim names this attempt: a start naming the upload is refused ...
    with pytest.raises(UploadUsed):
        harness.uploads.start("order_fulfilment", upload_id, owner="alice")
    # ... and the same success, repeated (after the upload's expiry even), completes it.
    harness.clock.advance(limits.UPLOAD_SECONDS)
    harness.callbacks.callback(token, "success", output_upload=upload_id, owner="alice")
    assert harness.run(wf).workflow.status is WorkflowStatus.SUCCEEDED
    assert harness.output(wf)["ship_order"] == {"tracking": "AGAIN"}


def test_two_successes_racing_for_one_upload_one_wins(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two attempts' callbacks name one upload: the conditional claim lets one use it."""
    from shepherd.errors import UploadUsed

    wf, token = _waiting_for_carrier(harness)
    other_wf, other_token = _waiting_for_carrier(harness)
    upload_id = _uploaded(harness, {"tracking": "ONE"})
    uploads = harness.uploads
    real_claim = uploads.claim

    def racing_claim(*args: Any) -> None:
        monkeypatch.setattr(uploads, "claim", real_claim)
        # the other success runs to its end between our checks and our claim
        harness.callbacks.callback(other_token, "success", output_upload=upload_id, owner="alice")
        real_claim(*args)

    monkeypatch.setattr(uploads, "claim", racing_claim)
    with pytest.raises(UploadUsed):
        harness.callbacks.callback(token, "success", output_upload=upload_id, owner="alice")
    assert harness.step(other_wf, "ship_order").status is StepStatus.SUCCEEDED
    rec = harness.step(wf, "ship_order")
    assert rec.status is StepStatus.WAITING and rec.output is None


# ------------------------------------------------------------- an error's full text, engine


def test_an_agent_errors_full_text_is_kept_beside_its_cut_message(harness: Harness) -> None:
    """The item keeps the error's name and a message cut at MAX_ERROR_MESSAGE; the whole
    message and the traceback go to the bucket, referenced from the error (`full`)."""
    long_message = "card declined: " + "d" * (3 * limits.MAX_ERROR_MESSAGE)

    def charge(ctx: AgentContext) -> Any:
        raise PermissionError(long_message)

    with registry_with(charge_payment=charge) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        harness.pump()
    rec = harness.step(wf, "charge_payment")
    error = json.loads(rec.error or "{}")
    assert error["type"] == "PermissionError"
    assert len(error["message"]) <= limits.MAX_ERROR_MESSAGE < len(long_message)
    ref = ref_of(error["full"])
    assert ref is not None and ref.key.startswith(f"wf/{wf}/step/charge_payment/1/error/")
    full = harness.scheduler.value(error["full"])
    assert full["type"] == "PermissionError" and full["message"] == long_message
    assert "Traceback (most recent call last)" in full["traceback"]
    assert (
        "in charge" in full["traceback"] and "PermissionError: card declined" in full["traceback"]
    )


def test_an_error_is_recorded_even_when_its_full_text_cannot_be_kept(harness: Harness) -> None:
    from shepherd.errors import StoreUnavailable

    def no_puts(key: str, data: bytes, sha256: str) -> None:
        raise StoreUnavailable("S3 is down")

    harness.payload_store.put = no_puts  # type: ignore[method-assign]

    def charge(ctx: AgentContext) -> Any:
        raise ValueError("declined")

    with registry_with(charge_payment=charge) as agents:
        harness.runtime.agents = agents
        wf = harness.start("order_fulfilment", ORDER)
        harness.pump()
    rec = harness.step(wf, "charge_payment")
    assert rec.history and {h["e"] for h in rec.history} == {"ValueError"}  # each recorded
    assert json.loads(rec.error or "{}") == {"type": "ValueError", "message": "declined"}
