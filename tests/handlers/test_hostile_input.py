"""What a hostile caller sends never crashes a handler: every malformed request gets a 4xx in
the error shape (with the request id), and writes nothing. An unexpected exception is a 500
InternalError carrying the request id it is logged with."""

from __future__ import annotations

import base64
import io
import json
import time
from typing import Any

import pytest
from aws_stack import ALICE, BOB, LambdaContext, Stack, rest_event
from shepherd.limits import MAX_JSON_DEPTH, MAX_REQUEST_BYTES, MAX_START_BODY_BYTES
from support import ORDER

START = {"type": "order_fulfilment", "input": ORDER}


def call(
    stack: Stack,
    method: str,
    path: str,
    *,
    raw: str | None = None,
    content_type: str | None = "application/json",
    is_base64: bool = False,
    resource: str | None = None,
    **kwargs: Any,
) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """One request through the API handler, with full control of the raw event."""
    from shepherd_handlers import api

    event = rest_event(
        method,
        path,
        resource=resource or path,
        raw_body=raw,
        is_base64=is_base64,
        caller=kwargs.pop("caller", ALICE),
        query=kwargs.pop("query", None),
        base_path=kwargs.pop("base_path", ""),
    )
    if content_type is None:
        event["headers"].pop("Content-Type")
        event["multiValueHeaders"].pop("Content-Type")
    else:
        event["headers"]["Content-Type"] = content_type
        event["multiValueHeaders"]["Content-Type"] = [content_type]
    reply = api.handler(event, LambdaContext())
    headers = {**(reply.get("headers") or {})}
    for key, values in (reply.get("multiValueHeaders") or {}).items():
        headers[key] = values[-1]
    body = json.loads(reply["body"])
    status = int(reply["statusCode"])
    if status >= 400:
        assert set(body) == {"error"}, body
        assert {"code", "message", "request_id"} <= set(body["error"]), body
        assert body["error"]["request_id"] == event["requestContext"]["requestId"]
    return status, headers, body


def assert_nothing_written(stack: Stack) -> None:
    for caller in (ALICE, BOB):
        assert stack.api("GET", "/workflows", caller=caller)[2]["items"] == []


def nested(depth: int) -> str:
    """A start body whose input nests `depth` levels deep (the body's object is one more)."""
    inner = "[" * (depth - 1) + "]" * (depth - 1)
    return '{"type": "order_fulfilment", "input": {"x": ' + inner + "}}"


@pytest.mark.parametrize(
    ("raw", "code", "in_message"),
    [
        ("{not json", "InvalidJson", "not valid JSON"),
        ('{"type": "order_fulfilment", "input": {"a": 1}', "InvalidJson", "not valid JSON"),
        ("", None, None),  # an empty body: the start's body is required (ValidationError)
        ("[]", "ValidationError", None),
        (nested(1000), "JsonTooDeep", str(MAX_JSON_DEPTH)),
        (nested(300), "JsonTooDeep", str(MAX_JSON_DEPTH)),
        (nested(MAX_JSON_DEPTH + 1), "JsonTooDeep", str(MAX_JSON_DEPTH)),
        ('{"type": ' + "[" * 70 + "]" * 70 + "}", "JsonTooDeep", str(MAX_JSON_DEPTH)),
        ('{"type": "order_fulfilment", "input": {"s": "\\ud800"}}', "InvalidUnicode", "surrogate"),
        (
            '{"type": "order_fulfilment", "input": {"n": ' + "9" * 5000 + "}}",
            "NumberOutOfRange",
            None,
        ),
        ('{"type": "order_fulfilment", "input": {"n": 1e400}}', "NumberOutOfRange", None),
        ('{"type": "order_fulfilment", "input": {"amount": NaN}}', "NonFiniteNumber", "NaN"),
        ('{"type": "order_fulfilment", "input": {"amount": Infinity}}', "NonFiniteNumber", None),
        ('{"type": "order_fulfilment", "input": {"amount": -Infinity}}', "NonFiniteNumber", None),
    ],
)
def test_malformed_json_bodies_are_400s_naming_the_problem(
    stack: Stack, raw: str, code: str | None, in_message: str | None
) -> None:
    status, _, reply = call(stack, "POST", "/workflows", raw=raw)
    assert status == 400, reply
    assert reply["error"]["code"] == (code or "ValidationError")
    if in_message:
        assert in_message in reply["error"]["message"]
    assert_nothing_written(stack)


def test_a_deeply_nested_input_within_the_limit_is_accepted_and_reads_back(
    stack: Stack,
) -> None:
    """The body's own object does not count against the payload's limit. (A start's input
    gets MAX_JSON_DEPTH - 1 levels today: the engine's request hash wraps it in one more.)"""
    status, _, refused = call(stack, "POST", "/workflows", raw=nested(MAX_JSON_DEPTH - 1))
    assert status == 400 and refused["error"]["code"] == "InvalidInput"  # no order_id
    deep = json.loads(nested(MAX_JSON_DEPTH - 1))["input"]
    body = json.dumps({"type": "order_fulfilment", "input": {**ORDER, "x": deep["x"]}})
    status, _, accepted = call(stack, "POST", "/workflows", raw=body)
    assert status == 202, accepted
    status, _, view = call(
        stack, "GET", f"/workflows/{accepted['workflow_id']}", resource="/workflows/{workflow_id}"
    )
    assert status == 200 and view["input"]["x"] == deep["x"]


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "multipart/form-data",  # no boundary: once an unhandled exception
        "multipart/form-data; boundary=xyz",
        "application/x-www-form-urlencoded",
        "application/jsonx",
    ],
)
def test_a_wrong_or_missing_content_type_is_415(stack: Stack, content_type: str | None) -> None:
    status, _, reply = call(
        stack, "POST", "/workflows", raw=json.dumps(START), content_type=content_type
    )
    assert status == 415 and reply["error"]["code"] == "UnsupportedMediaType", reply
    assert_nothing_written(stack)


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        "APPLICATION/JSON;charset=UTF-8",
    ],
)
def test_json_in_any_letter_case_with_parameters_is_accepted(
    stack: Stack, content_type: str
) -> None:
    status, _, reply = call(
        stack, "POST", "/workflows", raw=json.dumps(START), content_type=content_type
    )
    assert status == 202, reply


def test_base64_bodies(stack: Stack) -> None:
    good = base64.b64encode(json.dumps(START).encode()).decode()
    status, _, reply = call(stack, "POST", "/workflows", raw=good, is_base64=True)
    assert status == 202, reply
    not_utf8 = base64.b64encode(b'{"type": "order_fulfilment", "input": "\xff\xfe"}').decode()
    status, _, reply = call(stack, "POST", "/workflows", raw=not_utf8, is_base64=True)
    assert status == 400 and "UTF-8" in reply["error"]["message"], reply
    status, _, reply = call(stack, "POST", "/workflows", raw="@@not base64@@", is_base64=True)
    assert status == 400 and reply["error"]["code"] == "InvalidBody", reply
    assert len(stack.api("GET", "/workflows")[2]["items"]) == 1


def test_bodies_over_their_cap_are_413_before_parsing(stack: Stack) -> None:
    # Over the start's cap, and not even JSON: refused by size, unparsed.
    status, _, reply = call(stack, "POST", "/workflows", raw="[" * (MAX_START_BODY_BYTES + 1))
    assert status == 413 and reply["error"]["code"] == "BodyTooLarge", reply
    # A route without a body still refuses anything over API Gateway's limit.
    status, _, reply = call(stack, "GET", "/definitions", raw="x" * (MAX_REQUEST_BYTES + 1))
    assert status == 413 and reply["error"]["code"] == "BodyTooLarge", reply
    # ... and ignores a smaller one, whatever it holds.
    status, _, _ = call(stack, "GET", "/definitions", raw="{not json", content_type="text/plain")
    assert status == 200
    assert_nothing_written(stack)


def test_unknown_methods_on_a_route_are_405_with_allow(stack: Stack) -> None:
    status, headers, reply = call(stack, "DELETE", "/workflows")
    assert status == 405 and reply["error"]["code"] == "MethodNotAllowed"
    assert headers["Allow"] == "POST, GET"
    status, headers, reply = call(
        stack, "PUT", "/workflows/abc", resource="/workflows/{workflow_id}"
    )
    assert status == 405 and headers["Allow"] == "GET"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "1e3"}, "limit"),
        ({"status": "BOGUS"}, "status"),
        ({"type": ""}, "type"),
        ({"next_token": ""}, "next_token"),
        ({"next_token": "x" * 2049}, "next_token"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"idempotency_key": "k" * 129}, "idempotency_key"),
    ],
)
def test_out_of_range_query_values_are_400(stack: Stack, query: dict[str, str], field: str) -> None:
    status, _, reply = call(stack, "GET", "/workflows", query=query)
    assert status == 400 and reply["error"]["field"] == field, reply


@pytest.mark.parametrize(
    ("method", "path", "resource", "query", "field"),
    [
        ("GET", "/workflows", None, {"": ""}, "query"),  # `?=`: a parameter with no name
        ("GET", "/workflows", None, {"stauts": "RUNNING"}, "stauts"),
        ("GET", "/workflows/wf1", "/workflows/{workflow_id}", {"limit": "1"}, "limit"),
        ("GET", "/definitions", None, {"x": "1"}, "x"),
        (
            "POST",
            "/workflows/wf1/cancel",
            "/workflows/{workflow_id}/cancel",
            {"force": ""},
            "force",
        ),
    ],
)
def test_a_query_parameter_the_route_does_not_read_is_400(
    stack: Stack,
    method: str,
    path: str,
    resource: str | None,
    query: dict[str, str],
    field: str,
) -> None:
    """Refused like a body's unknown field."""
    status, _, reply = call(stack, method, path, resource=resource, query=query)
    assert status == 400, reply
    assert reply["error"]["code"] == "ValidationError" and reply["error"]["field"] == field
    assert "unknown query parameter" in reply["error"]["message"]


def test_pagination_tokens_are_opaque_signed_and_bound_to_caller_and_filters(
    stack: Stack,
) -> None:
    for _ in range(3):
        assert call(stack, "POST", "/workflows", raw=json.dumps(START))[0] == 202
    _, _, page = call(stack, "GET", "/workflows", query={"limit": "1"})
    token = page["next_token"]
    # Nothing of the table's keys or the owner's ARN is in it.
    decoded = b"".join(
        base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)) for part in token.split(".")
    )
    for secret in (b"arn:", b"alice", b"OWNER#", b"WF#", b"#WF", b"123456789012"):
        assert secret not in decoded and secret.decode() not in token
    # It works for its caller and filters ...
    status, _, page2 = call(stack, "GET", "/workflows", query={"limit": "1", "next_token": token})
    assert status == 200 and page2["items"][0]["workflow_id"] != page["items"][0]["workflow_id"]
    payload, mac = token.split(".")
    forged = [
        token[:-1] + ("A" if token[-1] != "A" else "B"),  # another signature
        token[: len(token) // 2],  # truncated
        payload,  # no signature
        base64.urlsafe_b64encode(b"1.wf").decode().rstrip("=") + "." + mac,  # another position
        base64.urlsafe_b64encode(json.dumps({"list_sk": {"S": "0#x"}}).encode()).decode(),
        base64.urlsafe_b64encode(b'{"pk": "OWNER#arn:aws:iam::1:user/bob"}').decode(),
        base64.urlsafe_b64encode(b"[1, 2, 3]").decode(),
        "not a token at all",
    ]
    for bad in forged:
        status, _, reply = call(stack, "GET", "/workflows", query={"limit": "1", "next_token": bad})
        assert status == 400 and reply["error"]["field"] == "next_token", (bad, reply)
    # ... and not for another caller, nor with other filters.
    status, _, _ = call(
        stack, "GET", "/workflows", query={"limit": "1", "next_token": token}, caller=BOB
    )
    assert status == 400
    for other in ({"status": "RUNNING"}, {"type": "order_fulfilment"}):
        status, _, _ = call(
            stack, "GET", "/workflows", query={"limit": "1", "next_token": token, **other}
        )
        assert status == 400


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _same_bytes_spellings(text: str) -> list[str]:
    """Other texts whose base64url decoding equals `text`'s (the last character's spare bits)."""
    decode = _unb64
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    return [
        text[:-1] + c for c in alphabet if c != text[-1] and decode(text[:-1] + c) == decode(text)
    ]


def test_a_token_has_one_spelling(stack: Stack) -> None:
    """A 32-byte MAC is 43 base64 characters whose last carries two spare bits: three other
    spellings decode to the same MAC, and each of them is refused like any forgery."""
    for _ in range(2):
        assert call(stack, "POST", "/workflows", raw=json.dumps(START))[0] == 202
    _, _, page = call(stack, "GET", "/workflows", query={"limit": "1"})
    token = page["next_token"]
    payload, mac = token.split(".")
    variants = [f"{payload}.{other}" for other in _same_bytes_spellings(mac)]
    assert len(variants) == 3
    for variant in variants:
        status, _, reply = call(
            stack, "GET", "/workflows", query={"limit": "1", "next_token": variant}
        )
        assert status == 400 and reply["error"]["field"] == "next_token", (variant, reply)
    assert call(stack, "GET", "/workflows", query={"limit": "1", "next_token": token})[0] == 200


def test_a_task_token_has_one_spelling() -> None:
    from shepherd.engine.tokens import TaskToken

    token = TaskToken.new("wf1", "step", "charge", 1)
    text = token.encode()
    assert TaskToken.decode(text) == token
    body = text[len("st1.") :]
    spare = ["st1." + other for other in _same_bytes_spellings(body)]
    respaced = "st1." + base64.urlsafe_b64encode(
        json.dumps(json.loads(_unb64(body)), indent=1).encode()
    ).decode().rstrip("=")
    for variant in [*spare, respaced]:
        with pytest.raises(ValueError, match="not a task token"):
            TaskToken.decode(variant)


def test_the_signing_secret_is_created_once_and_shared(stack: Stack) -> None:
    from shepherd_handlers import pagination, runtime

    store = runtime.engine().ports.store
    first = pagination.Paginator(store)
    second = pagination.Paginator(store)  # another sandbox
    position = pagination.Position(1_700_000_000_000, "wf-1")
    token = first.sign(ALICE, position, (None, None))
    assert second.verify(token, ALICE, (None, None)) == position
    item = store.get(*pagination.SECRET_KEY)
    assert item is not None and len(bytes.fromhex(item["secret"])) == 32


def test_location_carries_the_stage_or_base_path(stack: Stack) -> None:
    for base in ("/v1", "/orders/api", ""):
        status, headers, reply = call(
            stack, "POST", "/workflows", raw=json.dumps(START), base_path=base
        )
        assert status == 202
        expected = f"{base}/workflows/{reply['workflow_id']}"
        assert headers["Location"] == expected and reply["location"] == expected


def test_an_unexpected_exception_is_a_500_with_the_request_id_it_is_logged_with(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shepherd_handlers import api, callbacks, runtime
    from shepherd_handlers.runtime import logger

    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(runtime.engine().catalog, "names", boom)
    monkeypatch.setattr(runtime.engine().callbacks, "callback", boom)
    stream = io.StringIO()
    previous = logger.registered_handler.setStream(stream)  # type: ignore[attr-defined]
    try:
        replies = []
        for handler, event in (
            (api.handler, rest_event("GET", "/definitions", resource="/definitions")),
            (
                callbacks.handler,
                rest_event(
                    "POST",
                    "/tasks/heartbeat",
                    resource="/tasks/heartbeat",
                    headers={"X-Shepherd-Task-Token": "st1.abcdefgh"},
                    body={},
                ),
            ),
        ):
            reply = handler(event, LambdaContext())
            replies.append((event["requestContext"]["requestId"], reply))
    finally:
        logger.registered_handler.setStream(previous)  # type: ignore[attr-defined]
    logged = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    for request_id, reply in replies:
        assert reply["statusCode"] == 500
        error = json.loads(reply["body"])["error"]
        assert error["code"] == "InternalError" and error["request_id"] == request_id
        assert "disk on fire" not in reply["body"]  # internals stay in the log
        (line,) = [x for x in logged if x.get("request_id") == request_id]
        assert line["level"] == "ERROR" and "disk on fire" in line["exception"]


@pytest.mark.parametrize(
    "raw",
    [
        '{"type": "order_fulfilment", "input": {}, "type": "provision_environment"}',
        '{"type": "order_fulfilment", "input": {"order_id": "a", "order_id": "b"}}',
    ],
)
def test_a_key_twice_in_one_object_is_400_not_the_last_one_winning(stack: Stack, raw: str) -> None:
    """Hostile caller: a second `type` used to win silently over the one a reviewer of the
    request read (RFC 8259 leaves duplicates to the parser; Python keeps the last)."""
    status, _, reply = call(stack, "POST", "/workflows", raw=raw)
    assert status == 400 and reply["error"]["code"] == "DuplicateKey", reply
    assert_nothing_written(stack)


def test_an_idempotency_key_header_differing_from_the_body_is_400(stack: Stack) -> None:
    """Hostile caller: the header was ignored when the body had a key, so a proxy or a
    reviewer reading the header saw another request than the one that ran."""
    from shepherd_handlers import api

    body = json.dumps({"type": "order_fulfilment", "input": ORDER, "idempotency_key": "body-key"})
    event = rest_event("POST", "/workflows", resource="/workflows", raw_body=body, caller=ALICE)
    for spelling in ("Idempotency-Key", "idempotency-key"):
        event["headers"][spelling] = "header-key"
        event["multiValueHeaders"][spelling] = ["header-key"]
        reply = api.handler(event, LambdaContext())
        error = json.loads(reply["body"])["error"]
        assert reply["statusCode"] == 400 and error["field"] == "idempotency_key", error
        del event["headers"][spelling], event["multiValueHeaders"][spelling]
    assert_nothing_written(stack)
    # The same key in both, or either alone, starts the workflow.
    event["headers"]["Idempotency-Key"] = "body-key"
    event["multiValueHeaders"]["Idempotency-Key"] = ["body-key"]
    assert api.handler(event, LambdaContext())["statusCode"] == 202


def test_resume_with_an_input_and_no_step_is_400_and_changes_nothing(stack: Stack) -> None:
    """Hostile (or careless) caller: the input was dropped silently and the resume answered
    202, so the operator believed the workflow ran with the fixed input."""
    _, _, accepted = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}
    )
    wf = accepted["workflow_id"]
    assert stack.api("POST", f"/workflows/{wf}/pause")[0] == 202
    for body in ({"input": {"fixed": True}}, {"input": None}):
        status, _, reply = call(
            stack,
            "POST",
            f"/workflows/{wf}/resume",
            raw=json.dumps(body),
            resource="/workflows/{workflow_id}/resume",
        )
        assert status == 400 and reply["error"]["code"] == "ValidationError", reply
        assert "step" in reply["error"]["message"]
    assert stack.api("GET", f"/workflows/{wf}")[2]["status"] == "PAUSED"


def test_a_throttled_store_is_503_with_retry_after_in_the_error_shape(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A throttled start used to be a 500 (the caller could not tell it from a bug); it is a
    503 telling when to retry, and the retry with the same key starts one workflow."""
    from shepherd.errors import StoreUnavailable
    from shepherd_handlers import runtime

    store = runtime.engine().ports.store
    real = store.put_new
    throttled = {"left": 1}

    def put_new(item: dict[str, Any]) -> None:
        if item["sk"] == "#WF" and throttled["left"]:
            throttled["left"] -= 1
            raise StoreUnavailable("PutItem: ThrottlingException", throttled=True)
        real(item)

    monkeypatch.setattr(store, "put_new", put_new)
    raw = json.dumps({"type": "order_fulfilment", "input": ORDER, "idempotency_key": "k-503"})
    status, headers, reply = call(stack, "POST", "/workflows", raw=raw)
    assert status == 503 and reply["error"]["code"] == "StoreUnavailable"
    assert headers["Retry-After"] == "1"
    assert_nothing_written(stack)
    status, _, accepted = call(stack, "POST", "/workflows", raw=raw)
    assert status == 202 and accepted["created"] is True


# ------------------------------------------------------------------ issue 35.1


MATCHING = """\
Name: matching
Steps:
  - Name: first
    Wait: {Seconds: 0}
  - Name: only_if_it_matches
    DependsOn: [first]
    Condition: {Variable: $.input.s, StringMatches: "*a*a*a*a*a*a*a*a*a*a*a*a*b"}
    Wait: {Seconds: 0}
"""


def test_a_pattern_against_a_huge_caller_string_is_decided_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A condition with many stars on the caller's 1 MiB string: the start is accepted, the
    scheduler decides the condition and the supervisor's sweep reads it again, all at once
    (a backtracking match took 46 s on 130,000 characters: a 504, and every sweep repeated
    it). Fails rather than hangs (SIGALRM)."""
    import signal

    from aws_stack import stack_with_definitions

    def _expired(*_: object) -> None:
        raise AssertionError("the pattern is still being matched after 60 s: not linear")

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.alarm(60)
    try:
        with stack_with_definitions(monkeypatch, tmp_path, {"matching.yaml": MATCHING}) as s:
            body = {"type": "matching", "input": {"s": "a" * (1 << 20)}}
            status, _, accepted = s.api("POST", "/workflows", body=body)
            assert status == 202, accepted
            s.run_agents()
            # The Wait step's watch entry falls due within a second of the start (the watch
            # index keeps whole seconds): sweep until it has, a bounded number of times.
            for _ in range(20):
                if s.sweep()["due"]:
                    break
                time.sleep(0.25)
            status, _, view = s.api("GET", f"/workflows/{accepted['workflow_id']}")
            assert status == 200, view
            steps = {step["name"]: step["status"] for step in view["steps"]}
            assert steps["only_if_it_matches"] == "SKIPPED", steps
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
