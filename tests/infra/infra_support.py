"""Helpers for reading a synthesized Shepherd template."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import App, Stack, assertions
from aws_stack import ALICE
from shepherd.observability import (
    ENV_POOL,
    HANDLER_AGENT,
    HANDLER_API,
    HANDLER_CALLBACKS,
    HANDLER_EVENTS,
    HANDLER_STREAM,
    HANDLER_SUPERVISOR,
)
from shepherd_infra import AgentCode, Shepherd, config
from shepherd_infra.application import BUILD_SUBDIR, ShepherdStack, build_app

ALARM_EMAIL = "ops@example.com"
HANDLER_ROLES = {
    HANDLER_API: "api",
    HANDLER_CALLBACKS: "callbacks",
    HANDLER_EVENTS: "events",
    HANDLER_SUPERVISOR: "supervisor",
    HANDLER_STREAM: "relay",
}
EXTRA_POOL = "reporting"
# The `extended` fixture's optional context: a bus name of the user's choice, API logging (for
# an account whose API Gateway CloudWatch role is set), the dashboard, per-method API metrics,
# memory sizes, the table's deletion protection (for an existing table), as the CLI passes them
# (strings).
EXTENDED_CONTEXT = {
    "event_bus_name": "orders-bus",
    "api_logging": "true",
    "dashboard": "true",
    "api_detailed_metrics": "true",
    "pool_memory_mb": json.dumps({EXTRA_POOL: 3008}),
    "api_memory_mb": "1024",
    config.CTX_TABLE_DELETION_PROTECTION: "true",
}
# The `variant` fixture's context: a second stack's name, two webhooks, two mapped event sources,
# the data not kept and the X-Ray SDK's tracer on (issue 36: one synthesis for the tests of
# each, none of which reads what the others change).
SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:crm-key-AbCdEf"
HOOKS = [
    {
        "name": "crm",
        "url": "https://crm.example.com/hooks/shepherd",
        "detail_types": ["WorkflowSucceeded", "WorkflowFailed"],
        "header": "X-Api-Key",
        "secret_arn": SECRET,
        "rate_per_second": 5,
    },
    {"name": "oncall", "url": "https://pager.example.com/in", "detail_types": ["WorkflowFailed"]},
]
MALLORY = "arn:aws:iam::123456789012:role/Mallory"  # may PutEvents on the bus (identity policy)
VARIANT_OWNERS = {"a.one": ALICE, "b.two": MALLORY}
VARIANT_CONTEXT = {
    config.CTX_STACK_NAME: "ShepherdStaging",
    config.CTX_WEBHOOKS: json.dumps(HOOKS),
    config.CTX_EVENT_OWNERS: json.dumps(VARIANT_OWNERS),
    config.CTX_RETAIN_DATA: "false",
    config.CTX_TRACING: "true",
}
# Its agents are ones the examples register: the synth checks that every pool's code
# registers the agents its steps name (shepherd_infra.agent_check).
EXTRA_DEFINITION = f"""\
Name: quarterly_report
Steps:
  - Name: gather
    Agent: verify_environment
    Pool: {EXTRA_POOL}
    TimeoutSeconds: 200
  - Name: publish
    DependsOn: [gather]
    Agent: notify_customer
    Pool: notifications
    TimeoutSeconds: 5
"""

# An ASL state machine among the `extended` fixture's definitions: a Lambda function by ARN, an
# SQS send and a DynamoDB put (issue 38 point 4: the integrations role holds exactly those).
EXTRA_ASL_FILE = "record_order.asl.json"
EXTRA_ASL_FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:CheckStock"
EXTRA_ASL_QUEUE_URL = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"
EXTRA_ASL = {
    "Comment": "A Lambda function by ARN, an SQS send and a DynamoDB put",
    "StartAt": "Check",
    "States": {
        "Check": {"Type": "Task", "Resource": EXTRA_ASL_FUNCTION, "Next": "Notify"},
        "Notify": {
            "Type": "Task",
            "Resource": "arn:aws:states:::sqs:sendMessage",
            "Parameters": {"QueueUrl": EXTRA_ASL_QUEUE_URL, "MessageBody.$": "$"},
            "ResultPath": None,
            "Next": "Record",
        },
        "Record": {
            "Type": "Task",
            "Resource": "arn:aws:states:::dynamodb:putItem",
            "Parameters": {"TableName": "Orders", "Item": {"pk": {"S.$": "$.id"}}},
            "End": True,
        },
    },
}


@dataclass
class Synth:
    stack: ShepherdStack
    template: assertions.Template
    outdir: Path
    tpl: dict[str, Any] = field(default_factory=dict)

    @property
    def resources(self) -> dict[str, Any]:
        return dict(self.tpl["Resources"])

    @property
    def construct(self) -> Shepherd:
        """The `Shepherd` construct the stack holds."""
        return self.stack.shepherd

    @property
    def build_dir(self) -> Path:
        return self.outdir / BUILD_SUBDIR

    def of_type(self, cfn_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.resources.items() if v["Type"] == cfn_type}

    def logical_id(self, construct: Any) -> str:
        return str(self.stack.get_logical_id(construct.node.default_child))

    def function_ids(self, *, relay: bool = False) -> dict[str, str]:
        """Each of Shepherd's functions by part (`api`, ..., `agent:<pool>`, and the event
        relay's when asked), as its logical id."""
        shepherd = self.construct
        named = {
            "api": shepherd.api.api_function,
            "callbacks": shepherd.api.callbacks_function,
            "events": shepherd.events.function,
            "supervisor": shepherd.supervisor.function,
        }
        if relay:
            named["relay"] = shepherd.relay.function
        named.update({f"agent:{name}": pool.function for name, pool in shepherd.pools.items()})
        return {name: self.logical_id(fn) for name, fn in named.items()}

    def props(self, logical_id: str) -> dict[str, Any]:
        return dict(self.resources[logical_id]["Properties"])

    def function_env(self, logical_id: str) -> dict[str, Any]:
        return dict(self.props(logical_id)["Environment"]["Variables"])

    def statements(self, function_logical_id: str) -> list[dict[str, Any]]:
        """Every IAM statement that applies to a function's role, across all its policies."""
        role = self.props(function_logical_id)["Role"]["Fn::GetAtt"][0]
        return self.role_statements(role)

    def role_statements(self, role: str) -> list[dict[str, Any]]:
        """Every IAM statement of a role: its inline policies and the policies attached to it."""
        role_props = self.props(role)
        assert not role_props.get("ManagedPolicyArns"), "function roles carry no managed policy"
        out: list[dict[str, Any]] = []
        for inline in role_props.get("Policies", []):
            out.extend(inline["PolicyDocument"]["Statement"])
        for policy in self.of_type("AWS::IAM::Policy").values():
            if {"Ref": role} in policy["Properties"]["Roles"]:
                out.extend(policy["Properties"]["PolicyDocument"]["Statement"])
        return out


@dataclass(frozen=True)
class Placed:
    """One stack of the `side_by_side` app (tests/infra/conftest.py): its Shepherds, the region
    it is deployed to, and its synthesized template."""

    stack: Stack
    constructs: list[Shepherd]
    region: str
    template: dict[str, Any]


# The `side_by_side` app: (construct id, stack name, region) of each stack holding one Shepherd
# (ShepherdStack), with the same stack name in two regions; and `Pair`, one stack in the first
# region holding two Shepherds (SIDE_BY_SIDE_PAIR).
SIDE_BY_SIDE = (
    ("Blue", "ShepherdBlue", "us-east-1"),
    ("Green", "ShepherdGreen", "us-east-1"),
    ("Europe", "ShepherdBlue", "eu-west-1"),
)
SIDE_BY_SIDE_PAIR = ("Orders", "Returns")


# Every synthesis of the run by what it was made from (issue 36: a synth costs tens of seconds
# of CPU): a test asking for the same definitions and context gets the one already made.
_SYNTHESIZED: dict[tuple[str, str], Synth] = {}


def synthesize(
    outdir: Path, *, definitions_dir: Path | None = None, context: Mapping[str, Any] | None = None
) -> Synth:
    """The app synthesized into `outdir`, once per distinct (definitions, context) in a run: a
    second ask gets the first synthesis (and its outdir). A synthesis that fails is not kept."""
    key = (str(definitions_dir), json.dumps(dict(context or {}), sort_keys=True))
    if key not in _SYNTHESIZED:
        app, stack = build_app(definitions_dir=definitions_dir, context=context, outdir=str(outdir))
        app.synth()  # runs the cdk-nag validation plugins; raises on any unacknowledged finding
        template = assertions.Template.from_stack(stack)
        _SYNTHESIZED[key] = Synth(
            stack=stack, template=template, outdir=outdir, tpl=template.to_json()
        )
    return _SYNTHESIZED[key]


def actions(statement: Mapping[str, Any]) -> list[str]:
    value = statement["Action"]
    return [value] if isinstance(value, str) else list(value)


def resources(statement: Mapping[str, Any]) -> list[Any]:
    value = statement["Resource"]
    return value if isinstance(value, list) else [value]


def flatten(value: Any) -> str:
    """A resource (string or intrinsic) as a comparable string."""
    return json.dumps(value, sort_keys=True)


def refers_to(resource: Any, logical_id: str) -> bool:
    return logical_id in flatten(resource)


def granted(statements: list[dict[str, Any]], action: str) -> Iterator[Any]:
    """Every resource on which `action` is allowed."""
    for statement in statements:
        if statement["Effect"] == "Allow" and action in actions(statement):
            yield from resources(statement)


def index_resource(table_logical_id: str, index: str) -> dict[str, Any]:
    return {"Fn::Join": ["", [{"Fn::GetAtt": [table_logical_id, "Arn"]}, f"/index/{index}"]]}


def function_roles(template: Mapping[str, Any]) -> dict[str, str]:
    """What each function is, from the template alone: `api`, `callbacks`, `events`,
    `supervisor`, or `agent:<pool>` (its handler, and an agent's pool) -> logical ID."""
    roles: dict[str, str] = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        props = resource["Properties"]
        if props["Handler"] == HANDLER_AGENT:
            role = f"agent:{props['Environment']['Variables'][ENV_POOL]}"
        else:
            role = HANDLER_ROLES[props["Handler"]]
        assert role not in roles, f"two functions are {role}"
        roles[role] = logical_id
    return roles


def render(value: Any, synth: Synth | None = None) -> str:
    """A template value as the deployed stack would see it (tests/infra/rehearsal.PSEUDO for
    the pseudo parameters); an attribute of a named queue is its ARN, any other reference
    `<logical id>`."""
    from rehearsal import PSEUDO, resolve

    class Refs(dict[str, str]):
        def __contains__(self, key: object) -> bool:
            return True

        def __missing__(self, key: str) -> str:
            return f"<{key}>"

    refs = Refs(PSEUDO)
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        name = (synth.props(logical_id).get("QueueName") if synth else None) or None
        if attribute == "Arn" and name is not None:
            return f"arn:aws:sqs:{PSEUDO['AWS::Region']}:{PSEUDO['AWS::AccountId']}:{resolve(name, refs)}"
        return f"<{logical_id}.{attribute}>"
    return resolve(value, refs)


def iam_matches(resource_pattern: str, arn: str) -> bool:
    """IAM's wildcards: `*` any run of characters, `?` one character."""
    body = "".join(
        ".*" if c == "*" else "." if c == "?" else re.escape(c) for c in resource_pattern
    )
    return re.fullmatch(body, arn) is not None


def queue_arn_of(synth: Synth, queue: Any) -> str:
    """The ARN a queue construct gets on deploy (rendered from its name)."""
    return render({"Fn::GetAtt": [synth.logical_id(queue), "Arn"]}, synth)


def allowed_on(synth: Synth, statements: list[dict[str, Any]], action: str, arn: str) -> bool:
    """Whether some Allow of `statements` names `action` on `arn` (no condition evaluated)."""
    return any(iam_matches(render(r, synth), arn) for r in granted(statements, action))


def acknowledged(scope: Any) -> dict[str, list[tuple[str, str]]]:
    """Every cdk-nag finding acknowledged under `scope`: rule id -> (construct path, reason)."""
    from aws_cdk import Validations

    found: dict[str, list[tuple[str, str]]] = {}
    for construct in scope.node.find_all():
        for entry in construct.node.metadata:
            if entry.type != Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                continue
            for key, reason in dict(entry.data).items():
                rule = str(key).removeprefix("Annotation::")
                found.setdefault(rule, []).append((construct.node.path, str(reason)))
    return found


def agent_package(src: Path, module: str, definitions: Path) -> Path:
    """A user's agent package under `src`: `module`'s registry registers every agent the
    definitions in `definitions` name (the synth imports it and checks; issue 27 point 4)."""
    names = sorted(
        {
            match
            for path in definitions.glob("*.yaml")
            for match in re.findall(r"\bAgent:\s*([\w.-]+)", path.read_text())
        }
    )
    (src / module).mkdir(parents=True, exist_ok=True)
    (src / module / "__init__.py").write_text(
        "from shepherd import AgentRegistry\n\nregistry = AgentRegistry()\n"
        + "".join(f"registry.register({name!r}, lambda ctx: {{}})\n" for name in names)
    )
    return src


ONE_STEP = (
    "Name: trip\nSteps:\n  - Name: book\n    Agent: book\n    Pool: travel\n"
    "    TimeoutSeconds: 30\n"
)


# Every one-step template of the run by its props (issue 36: three tests read the default one).
_ONE_STEP: dict[str, dict[str, Any]] = {}


def one_step_template(tmp_path: Path, **props: Any) -> dict[str, Any]:
    """The template of a stack holding one `Shepherd(**props)` over a one-step definition
    (its agent packaged as a pool ships it): for tests of a construct setting. Built once per
    distinct props in a run (keyed by their repr); each caller gets its own copy."""
    key = repr(sorted(props.items()))
    if key not in _ONE_STEP:
        definitions = tmp_path / "flows"
        definitions.mkdir(parents=True)
        (definitions / "trip.yaml").write_text(ONE_STEP)
        src = agent_package(tmp_path / "src", "trip_agents", definitions)
        app = App(outdir=str(tmp_path / "cdk.out"))
        stack = Stack(app, "Trips")
        code = AgentCode(path=src, modules=["trip_agents"])
        Shepherd(stack, "Shepherd", definitions_dir=definitions, agents=code, **props)
        _ONE_STEP[key] = dict(assertions.Template.from_stack(stack).to_json())
    return copy.deepcopy(_ONE_STEP[key])
