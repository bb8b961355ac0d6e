"""A moto-backed AWS for the Lambda handlers, and real event shapes to call them with."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import boto3
import pytest
from shepherd import routes
from shepherd.observability import ENV_POOL, ENV_SWEEP_INTERVAL, ENV_SWEEP_WINDOW
from shepherd.routes import TASK_TOKEN_HEADER
from shepherd.settings import Settings
from shepherd_cli import apigw, lambda_kit
from shepherd_cli.resources import create_all
from shepherd_cli.streams import StreamMapping, StreamReader, stream_arn
from shepherd_examples import AGENT_MODULES
from support import DEFINITIONS, ROOT

ALICE = "arn:aws:iam::123456789012:user/alice"
BOB = "arn:aws:sts::123456789012:assumed-role/Operators/bob-session"


@dataclass
class LambdaContext(lambda_kit.LambdaContext):
    """A test's context (the kit's): a fixed minute left, in the test account."""

    function_name: str = "shepherd-test"
    remaining_ms: int | None = 60_000
    account: str = "123456789012"


def rest_event(
    method: str,
    path: str,
    *,
    resource: str,
    path_parameters: dict[str, str] | None = None,
    body: Any = None,
    caller: str = ALICE,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    raw_body: str | None = None,
    base_path: str = "",
    is_base64: bool = False,
) -> dict[str, Any]:
    """An API Gateway REST proxy event as IAM-authorized requests produce it."""
    return apigw.rest_event(
        method,
        path,
        resource=resource,
        path_parameters=path_parameters,
        query=query,
        headers={"Content-Type": "application/json", **(headers or {})},
        body=raw_body if raw_body is not None else (None if body is None else json.dumps(body)),
        caller_arn=caller,
        base_path=base_path,
        is_base64=is_base64,
    )


def sqs_event(bodies: list[tuple[str, str]], queue_arn: str) -> dict[str, Any]:
    return lambda_kit.sqs_event(
        ({"MessageId": mid, "ReceiptHandle": f"rh-{mid}", "Body": body} for mid, body in bodies),
        queue_arn,
    )


PAYLOAD_BUCKET = "shepherd-payloads"
_SESSION: list[boto3.session.Session] = []  # the one made for the first stack
_CLIENTS: dict[str, Any] = {}


def _client(service: str) -> Any:
    """The test's own client of `service` (the stack's, not the engine's), made once.

    moto sets boto3's default session aside while a mock runs, so each test's stack made a
    default session of its own, and with it loaded every service model again for its five
    clients and the engine's (issue 36: about a third of a handler test's CPU). One session is
    the default session of every stack instead (moto puts the one it set aside back when the
    mock stops), and its clients are made once: a client holds no moto state (moto answers
    each call from the running mock's backends). A test that hooks the session takes its hook
    away again (`s3_without_list`)."""
    if not _SESSION:
        _SESSION.append(boto3.session.Session(region_name="us-east-1"))
    if boto3.DEFAULT_SESSION is None:
        boto3.DEFAULT_SESSION = _SESSION[0]
    elif boto3.DEFAULT_SESSION is not _SESSION[0]:  # a test's own default session: as before
        return boto3.client(service, region_name="us-east-1")
    if service not in _CLIENTS:
        _CLIENTS[service] = _SESSION[0].client(service, region_name="us-east-1")
    return _CLIENTS[service]


class _SqsBackend:
    """The two SQS calls `create_all` makes, made on the running mock's SQS backend: the
    backend call moto's CreateQueue handler makes, with the same attributes, and the queue's
    ARN as GetQueueAttributes reads it. A stack makes 15 queues; through boto3 and moto's
    request parsing and reply serialization their 23 calls were over half of a stack's set-up
    (issue 36). Everything else (messages sent, received and deleted) goes through the API."""

    ENDPOINT = urlparse("https://sqs.us-east-1.amazonaws.com")

    def __init__(self) -> None:
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.sqs.models import sqs_backends

        self.backend = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]

    def create_queue(
        self,
        QueueName: str,  # noqa: N803 - boto3's
        Attributes: dict[str, str] | None = None,  # noqa: N803 - boto3's
    ) -> dict[str, str]:
        queue = self.backend.create_queue(QueueName, {}, **(Attributes or {}))
        return {"QueueUrl": queue.url(self.ENDPOINT)}

    def get_queue_attributes(
        self,
        QueueUrl: str,  # noqa: N803 - boto3's
        AttributeNames: list[str],  # noqa: N803 - boto3's
    ) -> dict[str, dict[str, str]]:
        assert AttributeNames == ["QueueArn"], AttributeNames
        return {"Attributes": {"QueueArn": self.queue(QueueUrl).queue_arn}}

    def queue(self, url: str) -> Any:
        return self.backend.queues[url.rsplit("/", 1)[1]]

    def holds_visible_messages(self, url: str) -> bool:
        """Whether a ReceiveMessage could return anything: moto's receive reads only the
        queue's visible, undelayed messages (`Queue.messages`)."""
        return bool(self.queue(url).messages)


_UNSURE = object()  # a value the shortcut leaves to moto's own serializer


def _plain(value: Any, base64: Any) -> Any:
    """moto's JSON serialization of one DynamoDB AttributeValue, written out: each type's
    member as moto's serializer writes its shape (strings and numbers as they are, blobs by its
    `_base64`, booleans and null as they are, maps and lists member by member). `_UNSURE` for
    anything else (None, an enum, several types), which moto then serializes itself."""
    if not isinstance(value, dict) or len(value) != 1:
        return _UNSURE
    ((kind, inner),) = value.items()
    if kind in ("S", "N") and isinstance(inner, str):
        return {kind: inner}
    if kind in ("BOOL", "NULL") and isinstance(inner, bool):
        return {kind: inner}
    if kind == "B" and isinstance(inner, (bytes, str)):
        return {kind: base64(inner)}
    if kind in ("SS", "NS") and isinstance(inner, list) and all(isinstance(v, str) for v in inner):
        return {kind: list(inner)}
    if kind == "BS" and isinstance(inner, list) and all(isinstance(v, (bytes, str)) for v in inner):
        return {kind: [base64(v) for v in inner]}
    if kind == "M" and isinstance(inner, dict):
        members = {k: _plain(v, base64) for k, v in inner.items()}
        return _UNSURE if any(m is _UNSURE for m in members.values()) else {kind: members}
    if kind == "L" and isinstance(inner, list):
        items = [_plain(v, base64) for v in inner]
        return _UNSURE if any(i is _UNSURE for i in items) else {kind: items}
    return _UNSURE


def plain_attribute_values(patch: Any = setattr) -> None:
    """moto's DynamoDB (and Streams) replies serialize their items' attribute values directly
    (`_plain`) instead of through moto's generic shape-driven serializer, which looks up each
    of an AttributeValue's ten members by several aliases: it was half of moto's time in the
    handler tests that read many items (issue 36: 71 of 150 s in
    test_list_at_scale's paging). The bytes on the wire are the same
    (`tests/handlers/test_moto_serializer.py` compares both on every type)."""
    from moto.core.serialize import BaseJSONSerializer

    original = BaseJSONSerializer._serialize_type_structure

    def serialize(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if (
            key
            and shape.name == "AttributeValue"
            and self.operation_model.service_model.service_name in ("dynamodb", "dynamodbstreams")
        ):
            plain = _plain(value, self._base64)
            if plain is not _UNSURE:
                self._default_serialize(serialized, plain, shape, key)
                return
        original(self, serialized, value, shape, key)

    serialize.moto_own = original  # type: ignore[attr-defined] # to compare with (the test)
    patch(BaseJSONSerializer, "_serialize_type_structure", serialize)


class Stack:
    """Moto resources from the same topology the CDK app uses, plus handler drivers."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.clients = {s: _client(s) for s in ("dynamodb", "sqs", "events", "s3")}
        self._sqs = _SqsBackend()
        self.queues = create_all(
            {**self.clients, "sqs": self._sqs},
            DEFINITIONS,
            table="shepherd",
            bus="shepherd-bus",
            bucket=PAYLOAD_BUCKET,
        )
        self.tap = self._sqs.create_queue(QueueName="event-tap")["QueueUrl"]
        tap_arn = self._sqs.get_queue_attributes(QueueUrl=self.tap, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.clients["events"].put_rule(
            Name="tap",
            EventBusName="shepherd-bus",
            EventPattern=json.dumps({"source": ["shepherd"]}),
        )
        self.clients["events"].put_targets(
            Rule="tap", EventBusName="shepherd-bus", Targets=[{"Id": "tap", "Arn": tap_arn}]
        )
        settings = Settings(
            table="shepherd",
            queue_urls={p: q.url for p, q in self.queues.items()},
            event_bus="shepherd-bus",
            definitions_dir=ROOT / "statemachines",
            watch_shards=2,
            agent_modules=AGENT_MODULES,
            payload_bucket=PAYLOAD_BUCKET,
        )
        for key, value in settings.to_env().items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv(ENV_SWEEP_INTERVAL, "0.01")
        monkeypatch.setenv(ENV_SWEEP_WINDOW, "0")
        monkeypatch.setenv(ENV_POOL, "all")
        from shepherd_handlers import runtime

        runtime.engine.cache_clear()
        self.events_seen: list[dict[str, Any]] = []
        # The table's stream -> the stream consumer, as the deployed event source mapping.
        self.stream = StreamMapping(
            StreamReader(
                _client("dynamodbstreams"), stream_arn(self.clients["dynamodb"], "shepherd")
            ),
            self._consume,
        )

    @staticmethod
    def _consume(event: dict[str, Any]) -> Any:
        from shepherd_handlers import stream

        return stream.handler(event, LambdaContext())

    def relay(self) -> int:
        """Run the stream consumer over the table's changes so far; records delivered."""
        return self.stream.poll()

    # ------------------------------------------------------------------------------- API

    def api(self, method: str, path: str, **kwargs: Any) -> tuple[int, dict[str, str], Any]:
        from shepherd_handlers import api

        resource, params = _route(path)
        reply = api.handler(
            rest_event(method, path, resource=resource, path_parameters=params, **kwargs),
            LambdaContext(),
        )
        body = json.loads(reply["body"]) if reply.get("body") else None
        headers = {
            **(reply.get("headers") or {}),
            **{k: v[0] for k, v in (reply.get("multiValueHeaders") or {}).items()},
        }
        return int(reply["statusCode"]), headers, body

    def callback(self, token: str, action: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        """POST /tasks/<action> with the token in its header, as a caller sends it."""
        from shepherd_handlers import callbacks

        headers = {TASK_TOKEN_HEADER: token, **kwargs.pop("headers", {})}
        event = rest_event(
            "POST",
            f"/tasks/{action}",
            resource=f"/tasks/{action}",
            body=body if body is not None else {},
            headers=headers,
            **kwargs,
        )
        reply = callbacks.handler(event, LambdaContext())
        return int(reply["statusCode"]), json.loads(reply["body"])

    # ----------------------------------------------------------------------------- agents

    def receive(self, pool: str) -> list[dict[str, Any]]:
        got = self.clients["sqs"].receive_message(
            QueueUrl=self.queues[pool].url, MaxNumberOfMessages=10, WaitTimeSeconds=0
        )
        return list(got.get("Messages", []))

    def run_agents(self, rounds: int = 40) -> int:
        """Deliver every queued task through the agent handler, as the SQS event source would."""
        from shepherd_handlers import agent

        handled = 0
        for _ in range(rounds):
            busy = False
            for pool in self.queues:
                # An empty queue is not asked (its receive would answer nothing: issue 36).
                if not self._sqs.holds_visible_messages(self.queues[pool].url):
                    continue
                messages = self.receive(pool)
                if not messages:
                    continue
                busy = True
                event = sqs_event(
                    [(m["MessageId"], m["Body"]) for m in messages],
                    f"arn:aws:sqs:us-east-1:123456789012:{pool}",
                )
                reply = agent.handler(event, LambdaContext())
                failed = {f["itemIdentifier"] for f in reply["batchItemFailures"]}
                for m in messages:
                    if m["MessageId"] not in failed:
                        self.clients["sqs"].delete_message(
                            QueueUrl=self.queues[pool].url, ReceiptHandle=m["ReceiptHandle"]
                        )
                handled += len(messages)
            if not busy:
                break
        return handled

    def sweep(self) -> dict[str, Any]:
        from shepherd_handlers import supervisor

        event = lambda_kit.eventbridge_event(
            "Scheduled Event",
            {},
            source="aws.events",
            account="123456789012",
            region="us-east-1",
            at="2026-11-21T17:00:00Z",
            resources=["arn:aws:events:us-east-1:123456789012:rule/shepherd-supervisor"],
        )
        return supervisor.handler(event, LambdaContext())

    def published(self, *, relay: bool = True) -> list[dict[str, Any]]:
        """Every event that reached the bus so far (through a rule -> SQS tap), after the
        stream consumer has caught up (unless `relay` is False)."""
        if relay:
            self.relay()
        sqs = self.clients["sqs"]
        while True:
            got = sqs.receive_message(
                QueueUrl=self.tap, MaxNumberOfMessages=10, WaitTimeSeconds=0
            ).get("Messages", [])
            if not got:
                return list(self.events_seen)
            for m in got:
                self.events_seen.append(json.loads(m["Body"]))
                sqs.delete_message(QueueUrl=self.tap, ReceiptHandle=m["ReceiptHandle"])


def _route(path: str) -> tuple[str, dict[str, str] | None]:
    found = routes.match(path.split("?", maxsplit=1)[0])
    if found is None:
        return path, None
    resource, params = found
    return resource, {k: unquote(v) for k, v in params.items()} or None


@contextlib.contextmanager
def stack_with_definitions(
    monkeypatch: pytest.MonkeyPatch, folder: Path, files: Mapping[str, str]
) -> Iterator[Stack]:
    """A stack (on moto) whose functions read this repository's definitions and `files`
    (file name -> YAML) beside them, copied into `folder`."""
    from moto import mock_aws

    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "shepherd")
    definitions = folder / "statemachines"
    shutil.copytree(ROOT / "statemachines", definitions)
    for name, text in files.items():
        (definitions / name).write_text(text)
    with mock_aws():
        stack = Stack(monkeypatch)
        monkeypatch.setenv("SHEPHERD_DEFINITIONS_DIR", str(definitions))
        from shepherd_handlers import runtime

        runtime.engine.cache_clear()
        yield stack
