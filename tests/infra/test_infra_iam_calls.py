"""Least privilege, checked against behaviour: every AWS call each real handler makes in
representative flows (on moto) is allowed by that function's own statements in the template.
A grant the code needs but the template lacks would be AccessDenied on AWS; it fails here."""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from aws_stack import ALICE, PAYLOAD_BUCKET, LambdaContext, Stack, sqs_event
from iam_check import Call, Recorder, TemplateIam, required, violations
from infra_support import Synth, function_roles
from moto import mock_aws
from rehearsal import PSEUDO, pool_queues
from shepherd.engine.agent import AgentContext, Pending
from shepherd.observability import SIGNAL_DETAIL_TYPE, START_DETAIL_TYPE
from shepherd.settings import ENV_EVENT_OWNERS, ENV_OPERATORS
from shepherd.topology import TABLE as TOPOLOGY
from shepherd_cli.lambda_kit import eventbridge_event
from support import ENV, ORDER

TABLE = "shepherd"  # the names aws_stack.Stack gives its moto resources
BUS = "shepherd-bus"


@dataclass
class Flows:
    calls: list[Call]
    names: dict[str, str]  # template logical ID -> the resource's name
    aliases: dict[str, str]  # a moto resource's name -> the template's name for it

    def iam(self, template: dict[str, Any]) -> TemplateIam:
        return TemplateIam(template, self.names, pseudo=PSEUDO, aliases=self.aliases)


def _start_event(detail: dict[str, Any]) -> dict[str, Any]:
    """A new event each time (its own id: an event's id is the key of a start without one)."""
    return eventbridge_event(
        START_DETAIL_TYPE,
        detail,
        source="acme.platform",
        account="123456789012",
        region="us-east-1",
        at="2026-11-21T17:00:00Z",
        resources=[],
        event_id=str(uuid.uuid4()),
    )


def _deliver(stack: Stack, recorder: Recorder) -> set[str]:
    """Every queued task through its own pool's agent function, attributed to that pool."""
    from shepherd_handlers import agent

    ran: set[str] = set()
    for _ in range(40):
        busy = False
        for pool, queues in stack.queues.items():
            messages = stack.receive(pool)
            if not messages:
                continue
            busy = True
            event = sqs_event(
                [(m["MessageId"], m["Body"]) for m in messages],
                f"arn:aws:sqs:us-east-1:123456789012:shepherd-{pool}",
            )
            with recorder.acting_as(f"agent:{pool}"):
                reply = agent.handler(event, LambdaContext())
            assert reply == {"batchItemFailures": []}, (pool, reply)
            for m in messages:  # the event source mapping deletes, not the function
                stack.clients["sqs"].delete_message(
                    QueueUrl=queues.url, ReceiptHandle=m["ReceiptHandle"]
                )
            ran.add(pool)
        if not busy:
            return ran
    raise AssertionError("tasks kept coming")


def _upload(stack: Stack, recorder: Recorder, data: bytes) -> Any:
    """POST /payloads (as the API), then the caller's presigned POST of `data`."""
    signing = len(recorder.calls)
    status, _, upload = stack.api("POST", "/payloads", body={"size": len(data)})
    assert status == 201
    # botocore's generate_presigned_post builds its form through the CreateBucket model
    # and so fires the hook, but sends nothing: no request, no permission.
    recorder.calls[signing:] = [
        c for c in recorder.calls[signing:] if (c.service, c.operation) != ("s3", "CreateBucket")
    ]
    before = len(recorder.calls)
    posted = requests.post(
        upload["url"], data=upload["fields"], files={"file": ("in.json", data)}, timeout=10
    )
    assert posted.status_code in (200, 201, 204)
    # The caller's POST is authorised as the role that signed it: PutObject on its key
    # (what moto's in-process handling of the form records instead is not the role's).
    del recorder.calls[before:]
    recorder.calls.append(
        Call("api", "s3", "PutObject", {"Bucket": PAYLOAD_BUCKET, "Key": upload["key"]})
    )
    return upload


def _defer_one(stack: Stack, recorder: Recorder) -> None:
    """An agent invocation with too little time left for the step: the record goes back to
    its own queue at once (ChangeMessageVisibility), unclaimed."""
    from shepherd_handlers import agent

    (message,) = stack.receive("inventory")
    name = stack.queues["inventory"].url.rsplit("/", 1)[-1]
    event = sqs_event(
        [(message["MessageId"], message["Body"])], f"arn:aws:sqs:us-east-1:123456789012:{name}"
    )
    event["Records"][0]["receiptHandle"] = message["ReceiptHandle"]
    with recorder.acting_as("agent:inventory"):
        reply = agent.handler(event, LambdaContext(remaining_ms=1_000))
    assert reply == {"batchItemFailures": [{"itemIdentifier": message["MessageId"]}]}


def _drive(stack: Stack, recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Start, run, call back, list, read, cancel, sweep: each through its real handler."""
    from shepherd import schedules
    from shepherd.clock import SystemClock
    from shepherd_examples.agents import registry
    from shepherd_handlers import events, supervisor

    tokens: list[str] = []

    def ship(ctx: AgentContext) -> Any:  # ship_order as a callback step
        tokens.append(ctx.task_token())
        return Pending("waiting for the carrier")

    original = registry.get("ship_order")
    assert original is not None
    registry.register("ship_order", ship)
    try:
        with recorder.acting_as("api"):
            status, _, order = stack.api(
                "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
            )
        assert status == 202
        _defer_one(stack, recorder)  # a record whose step does not fit the time left
        with recorder.acting_as("events"):
            started = events.handler(
                _start_event({"type": "provision_environment", "input": ENV}),
                LambdaContext(),
            )
        assert started["status"] == "accepted"
        # A start event naming an upload: the events function reads and deletes uploads/<...>.
        with recorder.acting_as("api"):
            big_env = _upload(stack, recorder, json.dumps({**ENV, "env_name": "big-one"}).encode())
        with recorder.acting_as("events"):
            started = events.handler(
                _start_event(
                    {"type": "provision_environment", "input_upload": big_env["upload_id"]}
                ),
                LambdaContext(),
            )
        assert started["status"] == "accepted", started
        # A definition schedule's firing (EventBridge Scheduler invokes the events function):
        # it reads the schedule's paused state, then starts.
        with recorder.acting_as("events"):
            fired = events.handler(
                schedules.firing_event(
                    "provision_environment",
                    "nightly-staging",  # the example's own schedule, as it really fires:
                    {"env_name": "staging-nightly", "region": "eu-west-1", "size": "medium"},
                    account="123456789012",
                    region="us-east-1",
                    scheduled_time="2026-11-21T01:00:00Z",  # 02:00 in Paris
                    execution_id="6a7e8feb-b491-4cf7-a9f1-bf3703467719",
                    schedule_arn=(
                        "arn:aws:scheduler:us-east-1:123456789012:schedule/g/nightly-staging"
                    ),
                ),
                LambdaContext(),
            )
        assert fired["status"] == "accepted", fired
        # A Signal event by a business key: the events function reads the by_key index.
        with recorder.acting_as("events"):
            signalled = events.handler(
                eventbridge_event(
                    SIGNAL_DETAIL_TYPE,
                    {"name": "amend", "match": {"order_id": "o-iam"}, "payload": {}},
                    source="acme.platform",
                    account="123456789012",
                    region="us-east-1",
                    at="2026-11-21T17:00:00Z",
                    resources=[],
                    event_id=str(uuid.uuid4()),
                ),
                LambdaContext(),
            )
        assert signalled["status"] == "accepted", signalled
        _deliver(stack, recorder)
        (token,) = tokens
        # The carrier's result through an upload: the success reads and deletes uploads/<...>.
        with recorder.acting_as("api"):
            result = _upload(stack, recorder, json.dumps({"tracking": "T-1"}).encode())
        with recorder.acting_as("callbacks"):
            assert stack.callback(token, "heartbeat", {"details": {"at": "depot"}})[0] == 200
            success = {"output_upload": result["upload_id"]}
            assert stack.callback(token, "success", success)[0] == 200
        _deliver(stack, recorder)
    finally:
        registry.register("ship_order", original)

    with recorder.acting_as("api"):
        assert stack.api("GET", order["location"])[2]["status"] == "SUCCEEDED"
        assert stack.api("GET", "/workflows")[0] == 200  # the owner index
        # The filter indexes (status, type, both) and the counts.
        assert stack.api("GET", "/workflows", query={"status": "SUCCEEDED"})[0] == 200
        assert stack.api("GET", "/workflows", query={"type": "order_fulfilment"})[0] == 200
        query = {"status": "FAILED", "type": "order_fulfilment"}
        assert stack.api("GET", "/workflows", query=query)[0] == 200
        assert stack.api("GET", "/workflows/counts")[0] == 200
        assert stack.api("GET", "/approvals")[0] == 200  # the inbox index
        # Business keys: a tagged start, the tag's listing and a signal by its match (by_key).
        status, _, _ = stack.api(
            "POST",
            "/workflows",
            body={"type": "order_fulfilment", "input": ORDER, "tags": {"team": "iam"}},
        )
        assert status == 202
        assert stack.api("GET", "/workflows", query={"tag": "team:iam"})[0] == 200
        by_match = {"name": "amend", "match": {"order_id": "o-iam"}, "payload": {}}
        assert stack.api("POST", "/signals", body=by_match)[0] == 202
        assert stack.api("GET", "/definitions")[0] == 200
        assert stack.api("GET", "/pools")[0] == 200  # every queue's backlog
        assert stack.api("POST", "/pools/inventory/pause")[0] == 200
        assert stack.api("POST", "/pools/inventory/resume")[0] == 200
        assert stack.api("GET", "/schedules")[0] == 200  # the schedule items
        # A presigned upload and a start from it: the start reads and deletes uploads/<...>.
        upload = _upload(stack, recorder, json.dumps(ORDER).encode())
        status, _, _ = stack.api(
            "POST",
            "/workflows",
            body={"type": "order_fulfilment", "input_upload": upload["upload_id"]},
        )
        assert status == 202
        # An input over 8 KiB: the API writes it under wf/, the agents read it back.
        status, _, _ = stack.api(
            "POST",
            "/workflows",
            body={"type": "order_fulfilment", "input": {**ORDER, "pad": "p" * 20_000}},
        )
        assert status == 202
        _deliver(stack, recorder)  # its tasks, before the lost-task flow below
        status, _, lost_one = stack.api(
            "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
        )
        assert status == 202
    # A task lost in transit: the supervisor finds it through the watch index and sends it again.
    (lost,) = stack.receive("inventory")
    stack.clients["sqs"].delete_message(
        QueueUrl=stack.queues["inventory"].url, ReceiptHandle=lost["ReceiptHandle"]
    )
    later = SystemClock().now_ms() + 60_000
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: later)
    with recorder.acting_as("supervisor"):
        report = supervisor.handler(
            {"detail-type": "Scheduled Event", "source": "aws.scheduler", "detail": {}},
            LambdaContext(),
        )
    assert report["actions"] >= 1, report
    _deliver(stack, recorder)
    with recorder.acting_as("api"):
        assert stack.api("GET", lost_one["location"])[2]["status"] == "SUCCEEDED"
        status, _, doomed = stack.api(
            "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
        )
        assert status == 202
        assert stack.api("POST", f"{doomed['location']}/cancel")[0] in (200, 202)
        # Paused before any claim, resumed with a replacement input for a step with no item
        # yet: one transaction that creates that step's item.
        status, _, held = stack.api(
            "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
        )
        assert status == 202
        assert stack.api("POST", f"{held['location']}/pause")[0] == 202
        replacement = {"step": "charge_payment", "input": {**ORDER, "amount": 1}}
        assert stack.api("POST", f"{held['location']}/resume", body=replacement)[0] == 202
        # A map (the transcode example on the media pool): its opening, item units, their
        # accounting and output; two corrupt chunks, one past its tolerance, so the items
        # that acted are undone too (the undo order's pages, item compensations).
        corrupt = {"mode": "permanent"}
        video = {
            "video_id": "iam",
            "duration_seconds": 30,
            "chunk_seconds": 6,
            "faults": {"encode_chunks[1]": corrupt, "encode_chunks[3]": corrupt},
        }
        status, _, mapped = stack.api(
            "POST", "/workflows", body={"type": "transcode_video", "input": video}
        )
        assert status == 202
    _deliver(stack, recorder)
    with recorder.acting_as("api"):
        assert stack.api("GET", held["location"])[2]["status"] == "SUCCEEDED"
        assert stack.api("GET", mapped["location"])[2]["status"] == "COMPENSATED"
        items = stack.api("GET", f"{mapped['location']}/steps/encode_chunks/items")
        assert items[0] == 200 and items[2]["total"] == 5
    # The table's changes through the relay, as its stream mapping delivers them.
    with recorder.acting_as("relay"):
        assert stack.relay() > 0


@pytest.fixture(scope="module")
def flows(shepherd: Synth) -> Iterator[Flows]:
    """The flows run once, on moto, with every engine client recording its calls."""
    from shepherd import wiring

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
        monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "shepherd")
        # The events' source maps to ALICE (the API's default caller), so it may use her uploads.
        monkeypatch.setenv(ENV_EVENT_OWNERS, json.dumps({"acme.platform": ALICE}))
        monkeypatch.setenv(ENV_OPERATORS, ALICE)  # she may pause and resume a pool
        with mock_aws():
            stack = Stack(monkeypatch)
            recorder = Recorder()
            make_client = wiring._client
            monkeypatch.setattr(
                wiring, "_client", lambda service: recorder.attach(make_client(service))
            )
            from shepherd_handlers import runtime

            runtime.engine.cache_clear()
            _drive(stack, recorder, monkeypatch)
            runtime.engine.cache_clear()
        named = pool_queues(shepherd.tpl)
        names = {
            shepherd.logical_id(shepherd.construct.store.table): TABLE,
            shepherd.logical_id(shepherd.construct.events.bus): BUS,
            shepherd.logical_id(shepherd.construct.payloads.bucket): PAYLOAD_BUCKET,
            **{ids.queue: ids.queue_name for ids in named.values()},
            **{ids.dlq: ids.dlq_name for ids in named.values()},
        }
        # The moto queues have the local stack's names; the template's are `<base>-Q-<pool>`.
        aliases = {
            q.url.rsplit("/", 1)[-1]: named[pool].queue_name for pool, q in stack.queues.items()
        }
        yield Flows(recorder.calls, names, aliases)


def test_every_call_each_function_makes_is_allowed_by_its_own_role(
    shepherd: Synth, flows: Flows
) -> None:
    roles = function_roles(shepherd.tpl)
    assert {c.function for c in flows.calls} == set(roles), "every function took part"
    made = {(c.function, c.service, c.operation, c.params.get("IndexName")) for c in flows.calls}
    # The flows reach what matters for least privilege: every index, each by its one reader,
    # transactions, the start's conditional put, batches to queues, events to the bus.
    for index in TOPOLOGY.list_indexes:
        assert ("api", "dynamodb", "Query", index.name) in made
    assert ("api", "dynamodb", "Query", TOPOLOGY.inbox_index.name) in made
    assert ("supervisor", "dynamodb", "Query", "watch") in made
    assert any(op == "TransactWriteItems" for _, _, op, _ in made)
    assert ("api", "dynamodb", "PutItem", None) in made
    assert any(op == "SendMessageBatch" for _, _, op, _ in made)
    assert any(op == "PutEvents" for _, _, op, _ in made)
    assert {("api", "s3", op, None) for op in ("PutObject", "GetObject", "DeleteObject")} <= made
    iam = flows.iam(shepherd.tpl)
    assert violations(flows.calls, iam, roles) == []


def test_each_recorded_permission_is_load_bearing(shepherd: Synth, flows: Flows) -> None:
    """Take any one needed action away from the real template and the check fails: the test
    above would catch a removed grant, whichever it is."""
    roles = function_roles(shepherd.tpl)
    needed = sorted({(c.function, a) for c in flows.calls for a, _ in required(c)})
    assert len(needed) > 10
    for function, action in needed:
        tpl = copy.deepcopy(shepherd.tpl)
        iam = flows.iam(tpl)
        for statement in iam.statements(roles[function]):
            actions = (
                statement["Action"]
                if isinstance(statement["Action"], list)
                else [statement["Action"]]
            )
            statement["Action"] = [a for a in actions if a != action] or ["none:Nothing"]
        broken = violations([c for c in flows.calls if c.function == function], iam, roles)
        assert any(f"needs {action} " in v for v in broken), (function, action)


def _grants(iam: TemplateIam, role_of: str) -> list[tuple[str, str]]:
    """(action, resource pattern) of every Allow of a function's role, resolved."""
    out = []
    for statement in iam.statements(role_of):
        if statement["Effect"] != "Allow":
            continue
        acts = (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
        res = (
            statement["Resource"]
            if isinstance(statement["Resource"], list)
            else [statement["Resource"]]
        )
        out += [(a, iam.resolve(r)) for a in acts for r in res]
    return out


def _documented(function: str, action: str, resource: str) -> str | None:
    """Why a grant no recorded call uses is there all the same, or None (then it goes)."""
    if action in ("xray:PutTraceSegments", "xray:PutTelemetryRecords"):
        return "Lambda's active tracing sends the segments, not the handler"
    if action in ("logs:CreateLogStream", "logs:PutLogEvents"):
        return "Lambda writes the function's logs with its role"
    if function.startswith("agent:") and action in AGENT_MAPPING:
        return "the pool's event source mapping polls its queue with the function's role"
    if function.startswith("agent:") and action == "sqs:ChangeMessageVisibility":
        # Only on its own queue (the test above holds every call to its role's resources).
        return "every pool's agent defers a record alike; the flows defer inventory's (_defer_one)"
    if function == "supervisor" and action in AGENT_MAPPING and "Ticks" in resource:
        return "the tick queue's event source mapping polls it with the function's role"
    if function == "events" and action == "sqs:SendMessage" and "StartFailures" in resource:
        return "Lambda sends an invocation that failed after its retries to the on-failure queue"
    if function == "relay" and (action in RELAY_MAPPING or action == "sqs:SendMessage"):
        return "the stream's event source mapping reads it, and sends what fails to the queue"
    if function in ("api", "supervisor") and action in POOL_CONTROL:
        return (
            "pausing a pool (API) and holding it paused (supervisor) switch its event source "
            "mapping, which moto does not run: tests/unit/test_pool_control.py, "
            "tests/handlers/test_paused_pools_held.py"
        )
    if action == "s3:ListBucket":
        return (
            "S3 answers a missing key 404 only to a role that may list the bucket (403 "
            "otherwise), so a 403 is always a denial, retried, never read as missing "
            "(shepherd.adapters.s3); moto answers 404 to anyone"
        )
    if function in ("api", "events") and action == "sqs:SendMessage" and "Ticks" in resource:
        return (
            "a start or an operator's action wakes a sleeping supervisor with a tick; the flows "
            "run without a tick queue (tests/handlers/test_supervisor_sleeps.py rings it)"
        )
    if function == "supervisor" and action == "sqs:SendMessage" and "Ticks" in resource:
        return (
            "the scheduled run sends the minute's ticks; the flows run it without a tick queue "
            "(tests/infra/test_infra_rehearsal.py sends them)"
        )
    return None


AGENT_MAPPING = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
RELAY_MAPPING = (
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
)
POOL_CONTROL = ("lambda:ListEventSourceMappings", "lambda:UpdateEventSourceMapping")


def test_every_grant_is_used_by_a_recorded_call_or_documented(
    shepherd: Synth, flows: Flows
) -> None:
    """The converse of the test above: a grant no call needs is taken away, unless the service
    itself uses it with the function's role (documented above). The engine's shared grants
    (table items, the pool queues, `wf/` payloads: one set every engine function gets, as any
    of them may take any path through the engine) count as used when any function's call uses
    them; every other grant, when a call of its own function does."""
    roles = function_roles(shepherd.tpl)
    iam = flows.iam(shepherd.tpl)
    needed = {
        function: [(a, iam.alias(arn)) for c in flows.calls if c.function == function
                   for a, arn in required(c)]
        for function in roles
    }  # fmt: skip
    everyone = [pair for pairs in needed.values() for pair in pairs]
    unused = []
    for function, logical_id in roles.items():
        for action, pattern in _grants(iam, logical_id):
            calls = everyone if _shared(action, pattern) else needed[function]
            used = any(a.lower() == action.lower() and _glob(pattern, arn) for a, arn in calls)
            if not used and _documented(function, action, pattern) is None:
                unused.append(f"{function}: {action} on {pattern}")
    assert unused == [], "\n".join(sorted(set(unused)))


def _shared(action: str, pattern: str) -> bool:
    """One of the engine's grants every engine function gets (access.Access.engine/payloads)."""
    return (
        (action.startswith("dynamodb:") and pattern.endswith(f":table/{TABLE}"))
        or (action == "sqs:SendMessage" and "-Q-" in pattern)
        or (action in ("s3:GetObject", "s3:PutObject") and pattern.endswith("/wf/*"))
    )


def _glob(pattern: str, arn: str) -> bool:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(body, arn) is not None


# --------------------------------------------------------------------- the checker itself

FRAGMENT: dict[str, Any] = {
    "Resources": {
        "Table": {"Type": "AWS::DynamoDB::Table"},
        "Queue": {"Type": "AWS::SQS::Queue"},
        "OtherQueue": {"Type": "AWS::SQS::Queue"},
        "Bus": {"Type": "AWS::Events::EventBus"},
        "Role": {"Type": "AWS::IAM::Role", "Properties": {}},
        "Fn": {
            "Type": "AWS::Lambda::Function",
            "Properties": {"Role": {"Fn::GetAtt": ["Role", "Arn"]}},
        },
        "Policy": {
            "Type": "AWS::IAM::Policy",
            "Properties": {
                "Roles": [{"Ref": "Role"}],
                "PolicyDocument": {
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Action": [
                                "dynamodb:PutItem",
                                "dynamodb:UpdateItem",
                                "dynamodb:ConditionCheckItem",
                                "dynamodb:GetItem",
                            ],
                            "Resource": {"Fn::GetAtt": ["Table", "Arn"]},
                        },
                        {
                            "Effect": "Allow",
                            "Action": "dynamodb:Query",
                            "Resource": {
                                "Fn::Join": [
                                    "",
                                    [{"Fn::GetAtt": ["Table", "Arn"]}, "/index/watch"],
                                ]
                            },
                        },
                        {
                            "Effect": "Allow",
                            "Action": "sqs:SendMessage",
                            "Resource": {"Fn::GetAtt": ["Queue", "Arn"]},
                        },
                        {
                            "Effect": "Allow",
                            "Action": "events:PutEvents",
                            "Resource": {"Fn::GetAtt": ["Bus", "Arn"]},
                        },
                    ]
                },
            },
        },
    }
}
NAMES = {"Table": "t", "Queue": "q", "OtherQueue": "other", "Bus": "b"}
URL = "https://sqs.us-east-1.amazonaws.com/123456789012/"
CALLS = [
    Call(
        "fn",
        "dynamodb",
        "TransactWriteItems",
        {
            "TransactItems": [
                {"Put": {"TableName": "t", "Item": {}}},
                {"Update": {"TableName": "t", "Key": {}}},
                {"ConditionCheck": {"TableName": "t", "Key": {}}},
            ]
        },
    ),
    Call("fn", "dynamodb", "Query", {"TableName": "t", "IndexName": "watch"}),
    Call("fn", "dynamodb", "GetItem", {"TableName": "t", "Key": {}}),
    Call("fn", "sqs", "SendMessageBatch", {"QueueUrl": f"{URL}q", "Entries": []}),
    Call("fn", "events", "PutEvents", {"Entries": [{"EventBusName": "b"}]}),
]


def _check(fragment: dict[str, Any], calls: list[Call] = CALLS) -> list[str]:
    return violations(calls, TemplateIam(fragment, NAMES), {"fn": "Fn"})


def _statements(fragment: dict[str, Any]) -> list[dict[str, Any]]:
    return list(fragment["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"])


def test_checker_allows_what_the_fragment_grants() -> None:
    assert _check(FRAGMENT) == []


@pytest.mark.parametrize(
    "removed",
    [
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:ConditionCheckItem",  # a transaction needs each item's own action
        "dynamodb:Query",  # on the index
        "dynamodb:GetItem",
        "sqs:SendMessage",  # SendMessageBatch is authorized as SendMessage
        "events:PutEvents",
    ],
)
def test_checker_fails_when_a_grant_is_removed(removed: str) -> None:
    fragment = copy.deepcopy(FRAGMENT)
    for statement in _statements(fragment):
        actions = (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
        statement["Action"] = [a for a in actions if a != removed] or ["none:Nothing"]
    found = _check(fragment)
    assert found and all(f"needs {removed} " in v for v in found), found


def test_checker_knows_a_table_grant_is_not_an_index_grant_nor_another_queue() -> None:
    by_owner = Call("fn", "dynamodb", "Query", {"TableName": "t", "IndexName": "by_owner"})
    assert _check(FRAGMENT, [by_owner]) == [
        "fn: Query needs dynamodb:Query on arn:aws:dynamodb:us-east-1:123456789012:table/t"
        "/index/by_owner"
    ]
    other = Call("fn", "sqs", "SendMessage", {"QueueUrl": f"{URL}other", "MessageBody": "x"})
    assert len(_check(FRAGMENT, [other])) == 1
    wildcard = copy.deepcopy(FRAGMENT)
    _statements(wildcard)[1]["Resource"] = {
        "Fn::Join": ["", [{"Fn::GetAtt": ["Table", "Arn"]}, "/index/*"]]
    }
    assert _check(wildcard, [by_owner]) == []


def test_checker_honours_an_explicit_deny_and_refuses_unknown_operations() -> None:
    denied = copy.deepcopy(FRAGMENT)
    statements = _statements(denied)
    statements.append({"Effect": "Deny", "Action": "dynamodb:*", "Resource": "*"})
    denied["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"] = statements
    assert len(_check(denied)) == 5  # every DynamoDB requirement; SQS and events still pass
    with pytest.raises(AssertionError, match="teach iam_check"):
        required(Call("fn", "dynamodb", "ExecuteStatement", {"Statement": "SELECT"}))


def test_checker_is_fed_by_real_sdk_calls() -> None:
    """The recorder sees what the code passed to the SDK, for the function acting."""
    import boto3

    recorder = Recorder()
    with mock_aws():
        client = recorder.attach(boto3.client("sqs", region_name="us-east-1"))
        with recorder.acting_as("fn"):
            url = client.create_queue(QueueName="q")["QueueUrl"]
            client.send_message_batch(
                QueueUrl=url, Entries=[{"Id": "1", "MessageBody": json.dumps({})}]
            )
        with pytest.raises(AssertionError, match="outside any handler"):
            client.get_queue_url(QueueName="q")
    assert [(c.function, c.service, c.operation) for c in recorder.calls] == [
        ("fn", "sqs", "CreateQueue"),
        ("fn", "sqs", "SendMessageBatch"),
    ]
    assert required(recorder.calls[1]) == [
        ("sqs:SendMessage", "arn:aws:sqs:us-east-1:123456789012:q")
    ]
