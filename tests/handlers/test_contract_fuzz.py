"""Fuzz the API against docs/openapi.json with schemathesis, through the real handlers.

Requests go through the local API Gateway (`shepherd_cli.apigw.Gateway` as a WSGI app: the
code the local stack's control process serves) to the API and callbacks handlers, on moto.
Every operation gets schemathesis's default checks (no 5xx, documented status codes, content
types, headers and schemas, schema-invalid data rejected, schema-valid data accepted, an
undeclared method refused, missing or bogus auth refused) over a bounded number of examples
per phase (examples, coverage, fuzzing).

What a schema cannot say, said here once:
* Schema-valid requests may still be refused with 400 where a schema cannot say why: a start
  names a definition and must satisfy its InputSchema (deployment data, not the API's schema);
  a `next_token` is only valid if this deployment issued it to this caller for these filters
  (on `GET /workflows`, on a workflow's `GET .../events` and `GET .../items`, and on `GET
  /approvals`); a time
  range may not end before it starts (`GET /workflows`, `GET /workflows/counts`, `GET
  /workflows/series`; a series' may not start later than now either); and a preview names
  at most one of a step and a compensation, and a step for any field but `input`.
* Generated path ids almost never exist: positive cases put a seeded workflow's id (or a
  waiting callback's token) in place of about half of the generated ones, so the 2xx paths
  are exercised too, and the rest still probe unknown ids.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from aws_stack import ALICE, ROOT, Stack
from hypothesis import HealthCheck, assume, settings
from schemathesis.config import SchemathesisConfig
from shepherd import routes
from shepherd_cli import apigw
from shepherd_cli.openapi import TARGET
from support import ORDER

# The local stand-in for a SigV4 signature (see apigw.Gateway): this value signs as ALICE.
SIGNATURE = "AWS4-HMAC-SHA256 local-stand-in"
EXAMPLES = 40
_DEFAULT_ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
# Schema-invalid data is rejected with a 4xx in the error shape; a body over its route's cap is
# rejected before it is read, with 413 (docs/api.md, Limits), which schemathesis's default list
# leaves out.
_REJECTED = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
CONFIG = SchemathesisConfig.from_dict(
    {
        "checks": {"negative_data_rejection": {"expected-statuses": _REJECTED}},
        "operations": [
            {
                "include-name": name,
                "checks": {
                    "positive_data_acceptance": {"expected-statuses": [*_DEFAULT_ACCEPTED, "400"]}
                },
            }
            for name in (
                "POST /workflows",
                "GET /workflows",
                # A time range whose created_after is later than its created_before is valid
                # JSON Schema (it cannot say one field is later than another) and a 400.
                "GET /workflows/counts",
                # The same for a series, whose range may not start later than now either.
                "GET /workflows/series",
                "GET /workflows/{workflow_id}/events",
                # A path's next_token is only valid for this caller and workflow (issue 42.4).
                "GET /workflows/{workflow_id}/path",
                "GET /approvals",
                # A preview names at most one of step and compensation, and a workflow's own
                # payload is its input (JSON Schema cannot say either of a query): 400.
                "GET /workflows/{workflow_id}/preview",
                # A map's next_token is only valid for this caller, workflow, step and filter.
                "GET /workflows/{workflow_id}/steps/{step}/items",
                # A signal's payload is any JSON, within nesting and size limits a schema of
                # `Any` cannot state (400 past them).
                "POST /workflows/{workflow_id}/signals/{name}",
                # The same for a signal sent by its match (issue 37.3).
                "POST /signals",
            )
        ]
        # The former callback routes (token in the path) answer 410, naming their replacement.
        + [
            {
                "include-name": f"{r.method} {r.resource}",
                "checks": {
                    "positive_data_acceptance": {"expected-statuses": [*_DEFAULT_ACCEPTED, "410"]}
                },
            }
            for r in routes.ROUTES
            if r.deprecated
        ],
    }
)

gateway = apigw.Gateway(
    apigw.handlers(), lambda target: apigw.lambda_context(f"fuzz-{target}"), {SIGNATURE: ALICE}
)
schema = schemathesis.openapi.from_dict(json.loads(TARGET.read_text()), config=CONFIG)
schema.app = apigw.wsgi(gateway)


# A definition with an Approval step, a WaitForSignal step and a schedule, beside the
# examples: the approval, signal and schedule routes' success paths.
APPROVAL = """\
Name: fuzz_review
Steps:
  - Name: first
    Agent: reserve_inventory
    Pool: inventory
    TimeoutSeconds: 10
  - Name: sign_off
    DependsOn: [first]
    Approval: {TimeoutSeconds: 3600}
  - Name: amend
    WaitForSignal: {Name: amended, TimeoutSeconds: 3600}
Schedules:
  - {Name: fuzz_nightly, Expression: "cron(0 2 * * ? *)"}
"""


# A definition with a map step beside them: the items route's success path.
FANOUT = """\
Name: fuzz_fanout
Steps:
  - Name: each
    Agent: reserve_inventory
    Pool: inventory
    TimeoutSeconds: 10
    Map: {ItemsPath: $.input.items, MaxConcurrency: 2}
"""


# A state machine of control states only (no Lambda): the path route's success path.
MACHINE = json.dumps(
    {
        "StartAt": "Init",
        "States": {
            "Init": {"Type": "Pass", "Result": {"n": 1}, "Next": "Done"},
            "Done": {"Type": "Succeed"},
        },
    }
)


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    """The handlers' stack, on a moto whose Query reads its own partition and counts a COUNT
    from it (`shepherd_cli.moto_local` 3, 5 and 8, the local stack's, which
    `tests/e2e/test_moto_local.py` proves answer as plain moto does): plain moto walked every
    item of the table for each of the 256 COUNT queries of `GET /workflows/counts` and the 128
    of `GET /workflows/series`, for each of an operation's examples (issue 36). What the fuzz
    checks is the API's answers, which are the same."""
    from moto import mock_aws
    from shepherd_cli import moto_local

    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "shepherd")
    moto_local.keep_tables_in_transactions(monkeypatch.setattr)
    moto_local.query_partitions(monkeypatch.setattr)
    moto_local.count_queries(monkeypatch.setattr)
    with mock_aws():
        yield Stack(monkeypatch)


@pytest.fixture
def seeded(
    stack: Stack, callback_ship: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> dict[str, str]:
    """ALICE's workflow waiting on a callback step: a real workflow id, a live token, and a
    definition that exists; and her workflow waiting on an Approval step. ALICE is an
    operator (pool and schedule routes reach their success path), and `inventory` has a circuit breaker
    (its circuit route too)."""
    from shepherd.settings import ENV_DEFINITIONS_DIR, ENV_OPERATORS, ENV_POOL_POLICIES
    from shepherd_handlers import runtime

    definitions = tmp_path / "statemachines"
    shutil.copytree(ROOT / "statemachines", definitions)
    (definitions / "fuzz_review.yaml").write_text(APPROVAL)
    (definitions / "fuzz_fanout.yaml").write_text(FANOUT)
    (definitions / "fuzz_machine.asl.json").write_text(MACHINE)
    monkeypatch.setenv(ENV_DEFINITIONS_DIR, str(definitions))
    monkeypatch.setenv(ENV_OPERATORS, ALICE)
    breaker = {
        "FailureRatio": 0.5,
        "MinimumAttempts": 5,
        "WindowSeconds": 60,
        "CooldownSeconds": 30,
    }
    monkeypatch.setenv(ENV_POOL_POLICIES, json.dumps({"inventory": {"CircuitBreaker": breaker}}))
    runtime.engine.cache_clear()
    _, _, review = stack.api(
        "POST", "/workflows", body={"type": "fuzz_review", "input": ORDER}, caller=ALICE
    )
    _, _, accepted = stack.api(
        "POST", "/workflows", body={"type": "order_fulfilment", "input": ORDER}, caller=ALICE
    )
    _, _, fanout = stack.api(
        "POST", "/workflows", body={"type": "fuzz_fanout", "input": ORDER}, caller=ALICE
    )
    _, _, machine = stack.api(
        "POST", "/workflows", body={"type": "fuzz_machine", "input": {}}, caller=ALICE
    )
    stack.run_agents()
    assert callback_ship, "the callback step did not start"
    return {
        "workflow_id": accepted["workflow_id"],
        "token": callback_ship[0],
        "name": "order_fulfilment",
        "pool": "inventory",
        "approval_workflow": review["workflow_id"],
        "step": "sign_off",
        "schedule": "fuzz_nightly",
        "map_workflow": fanout["workflow_id"],
        "machine_workflow": machine["workflow_id"],
    }


@pytest.fixture(scope="module")
def statuses() -> Iterator[dict[str, set[int]]]:
    """Statuses seen per operation: every operation that ran must have reached its success
    path (retry needs a FAILED workflow, resume a PAUSED one: their 2xx paths are tested in
    test_api.py; a step's full error needs a failed step: tested in test_deadline_view.py)."""
    seen: dict[str, set[int]] = {}
    yield seen
    # Deprecated routes only ever answer what replaced them (410).
    replaced = {f"{r.method} {r.resource}" for r in routes.ROUTES if r.deprecated}
    for label, codes in seen.items():
        if label in replaced:
            assert codes <= {410, *range(400, 500)} and 410 in codes, (label, codes)
            continue
        if not label.endswith(("/retry", "/resume", "/error")):
            assert any(200 <= c < 300 for c in codes), f"{label} never succeeded: {codes}"
        assert any(400 <= c < 500 for c in codes), f"{label} never refused: {codes}"


def _use_seeded(case: Any, seeded: dict[str, str]) -> None:
    """Point about half of the positive cases at the seeded workflow, token or definition."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return
    if case.path.endswith("/items") and case.path_parameters:
        # A map step's items: always the workflow with a map, so their success path is
        # reached however the examples fall.
        case.path_parameters["workflow_id"] = seeded["map_workflow"]
        case.path_parameters["step"] = "each"
        return
    if case.path.endswith("/path") and case.path_parameters:
        # A state machine's path: always the workflow of a state machine (a native one has
        # none), so its success path is reached however the examples fall.
        case.path_parameters["workflow_id"] = seeded["machine_workflow"]
        return
    if "/signals/" in case.path and case.path_parameters:
        # A signal: always to the workflow whose step waits for `amended`, so its success
        # path is reached however the examples fall (past 100 kept, 409 TooManySignals).
        case.path_parameters["workflow_id"] = seeded["approval_workflow"]
        case.path_parameters["name"] = "amended"
        return
    if "/steps/" in case.path and case.path_parameters:
        # The approval routes: always the workflow waiting for a person, so their success
        # path is reached however the examples fall (one answer succeeds, the rest are 409).
        case.path_parameters["workflow_id"] = seeded["approval_workflow"]
        case.path_parameters["step"] = seeded["step"]
        return
    if case.path.startswith("/schedules/") and case.path_parameters:
        # A schedule's `name` (not a definition's): about half the cases name the real one.
        generated = case.path_parameters.get("name")
        if isinstance(generated, str) and hashlib.sha256(generated.encode()).digest()[0] % 2:
            case.path_parameters["name"] = seeded["schedule"]
        return
    for name, value in seeded.items():
        generated = case.path_parameters.get(name) if case.path_parameters else None
        if isinstance(generated, str) and hashlib.sha256(generated.encode()).digest()[0] % 2:
            case.path_parameters[name] = value
    # A callback's task token travels in its header.
    header = routes.TASK_TOKEN_HEADER.lower()
    generated = case.headers.get(header) if case.headers else None
    if isinstance(generated, str) and hashlib.sha256(generated.encode()).digest()[0] % 2:
        case.headers[header] = seeded["token"]


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_contract(
    case: Any, seeded: dict[str, str], statuses: dict[str, set[int]]
) -> None:
    _use_seeded(case, seeded)
    # A query parameter whose value is an empty array or null is not on the wire at all
    # (`?a=` needs a value to carry the name): the API receives another request than the case
    # describes, so a negative case made of such a parameter would be judged on a request it
    # never sent.
    assume(not any(v is None or v == [] for v in (case.query or {}).values()))
    response = case.call_and_validate(headers={"Authorization": SIGNATURE})
    statuses.setdefault(case.operation.label, set()).add(response.status_code)
