"""End to end: the local stack (moto server, control process, agent worker processes), used
only through HTTP and the `shepherd` CLI. Every wait is bounded; no process survives."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from shepherd_cli.client import Api, ApiError, CliError
from shepherd_cli.local import LocalStack
from support import ENV, ORDER, view_step

pytestmark = pytest.mark.e2e
TERMINAL = {"SUCCEEDED", "COMPENSATED", "CANCELLED", "FAILED"}


@pytest.fixture
def stack(local_stack: LocalStack) -> LocalStack:
    """The session's local stack (tests/conftest.py), shared with the console's browser tests."""
    return local_stack


@pytest.fixture
def api(stack: LocalStack) -> Api:
    return Api(stack.api_url, caller="e2e")


def start(api: Api, wf_type: str, payload: Any, **extra: Any) -> str:
    return str(
        api.call("POST", "/workflows", {"type": wf_type, "input": payload, **extra})["workflow_id"]
    )


def wait(api: Api, workflow_id: str, seconds: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        view = api.call("GET", f"/workflows/{workflow_id}")
        if view["status"] in TERMINAL:
            return dict(view)
        time.sleep(0.25)
    raise AssertionError(f"{workflow_id} still {view['status']} after {seconds}s: {view}")


def cli(stack: LocalStack, *args: str, caller: str = "e2e") -> subprocess.CompletedProcess[str]:
    exe = str(Path(sys.executable).with_name("shepherd"))
    return subprocess.run(
        [exe, "--api", stack.api_url, "--caller", caller, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )


def effects(stack: LocalStack, workflow_id: str) -> list[tuple[str, str]]:
    with sqlite3.connect(stack.state_dir / "ledger.sqlite") as db:
        rows = db.execute(
            "SELECT key, action FROM effects WHERE key LIKE ? ORDER BY seq", (workflow_id + "%",)
        ).fetchall()
    return [(str(k).removeprefix(workflow_id + ":"), str(a)) for k, a in rows]


def faults(payload: dict[str, Any], **spec: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "faults": {k.replace("__", ":"): v for k, v in spec.items()}}


def test_happy_paths_through_the_cli(stack: LocalStack) -> None:
    order = cli(stack, "start", "order_fulfilment", "--input", json.dumps(ORDER), "--wait")
    assert order.returncode == 0, order.stderr
    assert "SUCCEEDED" in order.stdout and "notify_customer" in order.stdout
    env = cli(stack, "start", "provision_environment", "--input", json.dumps(ENV), "--wait")
    assert env.returncode == 0, env.stderr
    workflow_id = env.stdout.split()[1]
    status = cli(stack, "status", workflow_id, "--json")
    view = json.loads(status.stdout)
    assert view["status"] == "SUCCEEDED" and view["output"]["verify"]["healthy"] is True
    listed = cli(stack, "list", "--type", "provision_environment")
    assert workflow_id in listed.stdout


def test_retryable_errors_end_succeeded_after_retries(api: Api) -> None:
    view = wait(
        api,
        start(api, "order_fulfilment", faults(ORDER, charge_payment={"mode": "error", "times": 2})),
    )
    assert view["status"] == "SUCCEEDED"
    charge = view_step(view, "charge_payment")
    assert [a["outcome"] for a in charge["attempts"]] == ["error", "error", "ok"]


def test_permanent_error_compensates_in_reverse(api: Api, stack: LocalStack) -> None:
    workflow_id = start(api, "order_fulfilment", faults(ORDER, ship_order={"mode": "permanent"}))
    view = wait(api, workflow_id)
    assert view["status"] == "COMPENSATED"
    # ship_order was claimed, so it may have acted (When: ATTEMPTED): undone first, and its
    # undo finds nothing in the ledger (its attempt failed before the effect).
    assert [c["name"] for c in view["compensations"]] == [
        "ship_order",
        "charge_payment",
        "reserve_inventory",
    ]
    assert effects(stack, workflow_id) == [
        ("reserve_inventory", "reserve"),
        ("charge_payment", "charge"),
        ("charge_payment:compensate", "refund"),
        ("reserve_inventory:compensate", "release"),
    ]


def test_hung_agent_is_timed_out_and_retried(api: Api) -> None:
    view = wait(
        api,
        start(
            api, "order_fulfilment", faults(ORDER, reserve_inventory={"mode": "hang", "times": 1})
        ),
    )
    assert view["status"] == "SUCCEEDED"
    reserve = view["steps"][0]
    assert [a["outcome"] for a in reserve["attempts"]] == ["heartbeat_timeout", "ok"]


def test_crashed_worker_is_replaced_and_its_step_recovered(api: Api, stack: LocalStack) -> None:
    before = stack.restarts
    workflow_id = start(
        api, "provision_environment", faults(ENV, create_storage={"mode": "crash", "times": 1})
    )
    view = wait(api, workflow_id)
    assert view["status"] == "SUCCEEDED"
    storage = next(s for s in view["steps"] if s["name"] == "create_storage")
    assert storage["attempt"] == 2 and storage["attempts"][0]["outcome"] == "heartbeat_timeout"
    assert stack.restarts > before  # a real process died and a new worker took its place
    assert [e for e in effects(stack, workflow_id) if e[0] == "create_storage"] == [
        ("create_storage", "create_storage")
    ]


def test_cancel_through_the_cli(api: Api, stack: LocalStack) -> None:
    workflow_id = start(
        api, "order_fulfilment", faults(ORDER, ship_order={"mode": "error", "times": 20})
    )
    deadline = time.monotonic() + 30
    while (
        view_step(api.call("GET", f"/workflows/{workflow_id}"), "ship_order")["attempt"] < 2
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    cancelled = cli(stack, "cancel", workflow_id)
    assert cancelled.returncode == 0 and cancelled.stdout.strip() in ("CANCELLING", "CANCELLED")
    view = wait(api, workflow_id)
    assert view["status"] == "CANCELLED"
    assert [c["name"] for c in view["compensations"]] == [
        "ship_order",
        "charge_payment",
        "reserve_inventory",
    ]
    actions = [action for _, action in effects(stack, workflow_id)]
    assert actions.count("refund") == actions.count("release") == 1
    assert actions.index("refund") < actions.index("release")  # undone in that order too
    again = cli(stack, "cancel", workflow_id)
    assert (
        again.returncode == 1
        and "409 InvalidTransition" in again.stderr
        and "Traceback" not in again.stderr
    )


def test_retry_of_a_failed_workflow(api: Api, stack: LocalStack) -> None:
    # The refund fails on attempts 1..6: retries (MaxAttempts 5) exhausted -> FAILED.
    payload = faults(
        ORDER,
        ship_order={"mode": "permanent"},
        charge_payment__compensation={"mode": "error", "times": 6},
    )
    workflow_id = start(api, "order_fulfilment", payload)
    view = wait(api, workflow_id, 90)
    assert view["status"] == "FAILED" and view["error"]["operator_needed"] is True
    retried = cli(stack, "retry", workflow_id)
    assert retried.returncode == 0 and retried.stdout.strip() == "COMPENSATING"
    view = wait(api, workflow_id, 60)
    assert view["status"] == "COMPENSATED" and view["redrives"] == 1
    assert [e[1] for e in effects(stack, workflow_id)] == ["reserve", "charge", "refund", "release"]


def test_idempotent_start_and_caller_isolation(stack: LocalStack) -> None:
    alice, bob = Api(stack.api_url, caller="alice"), Api(stack.api_url, caller="bob")
    first = alice.call(
        "POST",
        "/workflows",
        {"type": "order_fulfilment", "input": ORDER},
        headers={"Idempotency-Key": "same"},
    )
    again = alice.call(
        "POST",
        "/workflows",
        {"type": "order_fulfilment", "input": ORDER},
        headers={"Idempotency-Key": "same"},
    )
    assert again["workflow_id"] == first["workflow_id"] and again["created"] is False
    with pytest.raises(ApiError) as conflict:
        alice.call(
            "POST",
            "/workflows",
            {"type": "order_fulfilment", "input": {**ORDER, "amount": 1}},
            headers={"Idempotency-Key": "same"},
        )
    assert conflict.value.status == 409
    with pytest.raises(ApiError) as hidden:
        bob.call("GET", f"/workflows/{first['workflow_id']}")
    assert hidden.value.status == 404
    assert first["workflow_id"] not in [
        w["workflow_id"] for w in bob.call("GET", "/workflows")["items"]
    ]


def test_bad_input_is_a_400_naming_the_field(api: Api, stack: LocalStack) -> None:
    with pytest.raises(ApiError) as bad:
        api.call(
            "POST", "/workflows", {"type": "order_fulfilment", "input": {**ORDER, "items": []}}
        )
    assert bad.value.status == 400 and bad.value.field == "input.items"
    with pytest.raises(ApiError) as unknown:
        api.call("POST", "/workflows", {"type": "nope", "input": {}})
    assert unknown.value.status == 400 and unknown.value.code == "UnknownWorkflowType"
    result = cli(stack, "start", "order_fulfilment", "--input", '{"order_id": 1}')
    assert result.returncode == 1
    assert (
        result.stderr.startswith("shepherd: 400 InvalidInput") and "Traceback" not in result.stderr
    )
    result = cli(stack, "start", "order_fulfilment", "--input", "{not json")
    assert result.returncode == 1 and "not valid JSON" in result.stderr


def _raw(stack: LocalStack, method: str, path: str, body: bytes | None, **headers: str) -> Any:
    import http.client
    from urllib.parse import urlsplit

    conn = http.client.HTTPConnection(urlsplit(stack.api_url).hostname, stack.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_hostile_requests_get_the_error_shape_through_the_local_stack(stack: LocalStack) -> None:
    json_type = {"Content-Type": "application/json", "X-Shepherd-Caller": "hostile"}
    cases = [
        (
            "POST",
            "/workflows",
            b'{"type": "order_fulfilment", "input": {"amount": NaN}}',
            json_type,
            400,
            "NonFiniteNumber",
        ),
        ("POST", "/workflows", b"[" * 1000 + b"]" * 1000, json_type, 400, "JsonTooDeep"),
        ("POST", "/workflows", b'{"type": "x", "input": "\xff"}', json_type, 400, "InvalidJson"),
        (
            "POST",
            "/workflows",
            b"{}",
            {"Content-Type": "multipart/form-data"},
            415,
            "UnsupportedMediaType",
        ),
        ("GET", "/workflows?next_token=eyJhIjogMX0%3D", None, {}, 400, "ValidationError"),
        ("PUT", "/workflows", None, {}, 401, "MissingAuthenticationToken"),
        ("GET", "/no/such/route", None, {}, 401, "MissingAuthenticationToken"),
    ]
    for method, path, body, headers, status, code in cases:
        got, reply = _raw(stack, method, path, body, **headers)
        assert (got, reply["error"]["code"]) == (status, code), (method, path, reply)
        assert reply["error"]["request_id"]
    assert Api(stack.api_url, caller="hostile").call("GET", "/workflows")["items"] == []


def test_pause_and_resume_a_workflow_and_a_pool_through_the_cli(
    api: Api, stack: LocalStack
) -> None:
    """A paused pool's workers claim nothing (its task stays queued); a paused workflow
    dispatches nothing; resuming both lets the workflow finish."""
    paused = cli(stack, "pools", "pause", "payments")
    assert paused.returncode == 0, paused.stderr
    assert any(
        line.startswith("payments") and "PAUSED" in line for line in paused.stdout.splitlines()
    )
    workflow_id = start(api, "order_fulfilment", ORDER)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        view = api.call("GET", f"/workflows/{workflow_id}")
        # charge_payment is sent, never claimed: no item yet, shown PENDING at attempt 0.
        charge = view_step(view, "charge_payment")
        if view["steps"][0]["status"] == "SUCCEEDED" and charge["status"] == "PENDING":
            break
        time.sleep(0.2)
    time.sleep(2)  # the payments workers poll, and must not take it
    view = api.call("GET", f"/workflows/{workflow_id}")
    charge = view_step(view, "charge_payment")
    assert charge["status"] == "PENDING" and charge["attempt"] == 0
    listing = cli(stack, "pools")
    assert "payments" in listing.stdout and "PAUSED" in listing.stdout
    assert cli(stack, "pause", workflow_id).stdout.strip() == "PAUSED"
    assert cli(stack, "pools", "resume", "payments").returncode == 0
    time.sleep(2)  # the payments task is dropped: its workflow is paused
    view = api.call("GET", f"/workflows/{workflow_id}")
    assert view["status"] == "PAUSED" and view_step(view, "charge_payment")["status"] == "PENDING"
    assert cli(stack, "resume", workflow_id).stdout.strip() == "RUNNING"
    assert wait(api, workflow_id)["status"] == "SUCCEEDED"
    refused = cli(stack, "resume", workflow_id)
    assert refused.returncode == 1 and "409 InvalidTransition" in refused.stderr


def test_the_local_relay_publishes_a_workflow_s_events_from_the_table_s_stream(
    api: Api, stack: LocalStack
) -> None:

    workflow_id = start(api, "order_fulfilment", ORDER)
    assert wait(api, workflow_id)["status"] == "SUCCEEDED"
    # The tap has the whole bus: some events name no workflow (a pool's circuit).
    own = [
        e
        for e in _tap_events(stack, until=(workflow_id, "WorkflowSucceeded"), seconds=20)
        if e["detail"].get("workflow_id") == workflow_id
    ]
    seen = [e["detail-type"] for e in own]
    assert all(len(e["detail"]["event_id"]) == 32 for e in own), own
    assert seen[0] == "WorkflowStarted" and seen[-1] == "WorkflowSucceeded", seen


def test_an_input_over_5_mib_is_uploaded_by_the_cli_and_started_once(
    api: Api, stack: LocalStack, tmp_path: Path
) -> None:
    """`shepherd start --input @big.json` over 5 MiB: POST /payloads, the presigned POST to
    moto's S3 endpoint, then a start naming the upload; the upload is single-use."""
    big = {**ORDER, "pad": "p" * (6 * 1024 * 1024)}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big))
    result = cli(stack, "start", "order_fulfilment", "--input", f"@{path}", "--wait")
    assert result.returncode == 0, result.stderr
    workflow_id = result.stdout.split()[1]
    view = wait(api, workflow_id)
    assert view["status"] == "SUCCEEDED"
    assert view["input"] is None and view["input_ref"]["size"] > 6 * 1024 * 1024
    # The same through the API by hand: the presigned URL points at the local S3 endpoint.
    data = json.dumps(ORDER).encode()
    upload_id = api.upload(data)
    first = api.call("POST", "/workflows", {"type": "order_fulfilment", "input_upload": upload_id})
    assert first["created"] is True
    with pytest.raises(ApiError) as used:
        api.call(
            "POST",
            "/workflows",
            {"type": "order_fulfilment", "input_upload": upload_id, "idempotency_key": "u2"},
        )
    assert (used.value.status, used.value.code) == (409, "UploadUsed")
    with pytest.raises(ApiError) as other:
        Api(stack.api_url, caller="someone-else").call(
            "POST", "/workflows", {"type": "order_fulfilment", "input_upload": upload_id}
        )
    assert (other.value.status, other.value.code) == (404, "UploadNotFound")
    assert wait(api, first["workflow_id"])["status"] == "SUCCEEDED"


def test_a_callback_step_is_answered_from_the_cli_with_an_uploaded_output(
    api: Api, stack: LocalStack, tmp_path: Path
) -> None:
    """`shepherd task heartbeat|success TOKEN`: a demo step waits for a callback (input option
    `callback`, its token left in its details); a 6 MiB result goes through an upload."""
    workflow_id = start(api, "order_fulfilment", {**ORDER, "callback": ["ship_order"]})
    deadline = time.monotonic() + 30
    token = None
    while token is None and time.monotonic() < deadline:
        view = api.call("GET", f"/workflows/{workflow_id}")
        ship = next(s for s in view["steps"] if s["name"] == "ship_order")
        token = (
            (ship.get("details") or {}).get("task_token") if ship["status"] == "WAITING" else None
        )
        time.sleep(0.2)
    assert token is not None, view
    # The step's HeartbeatSeconds is 3 and its TimeoutSeconds 8: the heartbeat and the answer come
    # first, one CLI start each, before anything else; on a busy machine (the suite's two shards
    # side by side) an extra CLI start in between let the attempt time out (409 TaskTokenStale).
    beat = cli(stack, "task", "heartbeat", token, "--details", '{"at": "depot"}')
    assert beat.returncode == 0 and beat.stdout.strip().endswith("WAITING"), beat.stderr
    big = {"tracking": "CLI-1", "manifest": "m" * (6 * 1024 * 1024)}
    path = tmp_path / "result.json"
    path.write_text(json.dumps(big))
    done = cli(stack, "task", "success", token, "--output", f"@{path}")
    assert done.returncode == 0 and done.stdout.strip().endswith("SUCCEEDED"), done.stderr
    # A heartbeat given an output is the caller's mistake, refused before any request is made.
    wrong = cli(stack, "task", "heartbeat", token, "--output", "{}")
    assert wrong.returncode == 1 and "--output does not go with `task heartbeat`" in wrong.stderr
    view = wait(api, workflow_id)
    assert view["status"] == "SUCCEEDED"
    assert view["output_ref"]["ship_order"]["size"] > 6 * 1024 * 1024
    # The token's attempt is over: a second answer is refused, in the CLI's words.
    again = cli(stack, "task", "success", token, "--output", "{}")
    assert again.returncode == 1 and "TaskTokenStale" in again.stderr


def test_the_relay_publishes_on_after_a_cancelled_transaction(api: Api, stack: LocalStack) -> None:
    """A cancelled transaction (a pause hold losing to a claim, say) is normal; on plain moto
    it swapped the table's stream shard and the relay never published another event."""
    from shepherd_cli.local import TABLE

    dynamodb = stack.client("dynamodb")
    scratch = {"pk": {"S": "E2E#cancelled"}, "sk": {"S": "x"}}
    with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": scratch}},
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": {"pk": {"S": "E2E#missing"}, "sk": {"S": "x"}},
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )
    workflow_id = start(api, "order_fulfilment", {**ORDER, "order_id": "after-cancelled-tx"})
    _tap_events(stack, until=(workflow_id, "WorkflowStarted"), seconds=30)  # it asserts
    assert wait(api, workflow_id)["status"] == "SUCCEEDED"


def _tap_events(
    stack: LocalStack, until: tuple[str, str], seconds: float = 60
) -> list[dict[str, Any]]:
    """Every event on the tap, in order, read (and deleted: moto walks every message a queue
    holds on each send to it, so a tap nobody empties slows every later event) until the
    workflow `until[0]`'s event of type `until[1]` is among them (bounded)."""

    sqs = stack.client("sqs")
    seen: list[dict[str, Any]] = []

    def found() -> bool:
        return any((e["detail"].get("workflow_id"), e["detail-type"]) == until for e in seen)

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not found():
        got = sqs.receive_message(
            QueueUrl=stack.events_tap_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        ).get("Messages", [])
        seen += [json.loads(m["Body"]) for m in got]
        if got:
            sqs.delete_message_batch(
                QueueUrl=stack.events_tap_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)
                ],
            )
    assert found(), f"no {until[1]} of {until[0]} on the tap within {seconds} s"
    return seen


def test_a_replaced_control_process_goes_on_without_announcing_the_history_again(
    api: Api, stack: LocalStack
) -> None:
    """A killed control process is replaced, as Lambda starts a new sandbox: the API answers
    again and a workflow started before the kill finishes (its state lives on in moto). The
    relay keeps its place (as the event source mapping keeps its checkpoint): the new control
    process goes on after the last record delivered instead of the stream's start."""
    import signal

    earlier = start(api, "order_fulfilment", {**ORDER, "order_id": "before-the-kill"})
    assert wait(api, earlier)["status"] == "SUCCEEDED"
    _tap_events(stack, until=(earlier, "WorkflowSucceeded"))
    # Delivered means published and kept in the history; the relay then checkpoints at its
    # next poll. Kill it only once that checkpoint is written (what the mapping keeps).
    checkpoint = stack.state_dir / f"relay-{stack.moto_port}.json"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        kinds = [e["type"] for e in api.call("GET", f"/workflows/{earlier}/events")["items"]]
        if "WorkflowSucceeded" in kinds:
            break
        time.sleep(0.2)
    kept_at = time.time()
    while time.monotonic() < deadline and (
        not checkpoint.exists() or checkpoint.stat().st_mtime < kept_at
    ):
        time.sleep(0.1)
    in_flight = start(api, "order_fulfilment", ORDER)  # running when its control process dies
    before = stack.control_restarts
    control = stack._control
    assert control is not None
    os.kill(control.pid, signal.SIGKILL)
    control.wait(timeout=10)
    later = None
    deadline = time.monotonic() + 60
    while later is None and time.monotonic() < deadline:
        try:
            later = start(api, "order_fulfilment", {**ORDER, "order_id": "after-the-kill"})
        except CliError:
            time.sleep(0.2)  # the replacement is starting
    assert later is not None, "the API did not answer again"
    assert stack.control_restarts == before + 1 and stack._control is not control
    assert wait(api, in_flight)["status"] == "SUCCEEDED"  # state lives on in moto
    assert wait(api, later)["status"] == "SUCCEEDED"
    seen = _tap_events(stack, until=(later, "WorkflowSucceeded"))
    assert [e for e in seen if e["detail"].get("workflow_id") == earlier] == []  # not again


def test_a_state_machines_service_calls_and_child_run_against_the_local_moto(
    api: Api, stack: LocalStack
) -> None:
    """Issue 38's "done when": `tests/e2e/statemachines/record_order.asl.json` puts a DynamoDB
    item, sends an SQS message, publishes to SNS and runs `audit_order` to its end
    (`startExecution.sync:2`) on the local stack, each call a unit of Shepherd's integration
    pool made against the stack's moto, where the test reads what it wrote."""
    dynamodb, sqs, sns = stack.client("dynamodb"), stack.client("sqs"), stack.client("sns")
    table = "e2e-orders"
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    queue_url = sqs.create_queue(QueueName="e2e-orders")["QueueUrl"]
    announced_url = sqs.create_queue(QueueName="e2e-orders-announced")["QueueUrl"]
    announced_arn = sqs.get_queue_attributes(QueueUrl=announced_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    topic_arn = sns.create_topic(Name="e2e-orders")["TopicArn"]
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=announced_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    order = {
        "order_id": "e2e-o-1",
        "total": 42,
        "table": table,
        "queue_url": queue_url,
        "topic_arn": topic_arn,
    }
    workflow_id = start(api, "record_order", order)
    view = wait(api, workflow_id, 60)
    assert view["status"] == "SUCCEEDED", view
    out = view["output"]
    # The child ran to its end first: it read back the item its parent put.
    assert out["audit"]["status"] == "SUCCEEDED"
    assert out["audit"]["output"] == {"order_id": "e2e-o-1", "total": "42"}
    child_id = out["audit"]["execution"].rsplit(":", 1)[1]
    child = api.call("GET", f"/workflows/{child_id}")
    assert (child["type"], child["status"]) == ("audit_order", "SUCCEEDED")
    assert child["output"] == out["audit"]["output"]
    # Each effect, read from the local moto.
    item = dynamodb.get_item(TableName=table, Key={"pk": {"S": "e2e-o-1"}})["Item"]
    assert item == {"pk": {"S": "e2e-o-1"}, "total": {"N": "42"}}
    (sent,) = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1)["Messages"]
    assert json.loads(sent["Body"]) == {"order_id": "e2e-o-1", "total": 42}
    assert out["sent"] == {"message_id": sent["MessageId"]}
    (published,) = sqs.receive_message(QueueUrl=announced_url, WaitTimeSeconds=1)["Messages"]
    assert json.loads(published["Body"]) == {"order_id": "e2e-o-1"}
    assert set(out["published"]) == {"message_id"}
