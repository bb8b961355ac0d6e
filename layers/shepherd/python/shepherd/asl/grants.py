"""Least privilege from a state machine: the IAM statements its Tasks need when Shepherd's
integration pool carries them out (pure; `shepherd_infra.integrations` makes the role).

It follows how Step Functions generates a state machine's role ("How Step Functions
generates IAM policies for integrated services"): a resource the definition names
*statically* is granted alone; one a `.$` path, an intrinsic function or a JSONata
expression gives (*dynamic*) is granted on `*` (EventBridge: on every bus,
`arn:<partition>:events:*:*:event-bus/*`, as Step Functions does). Two places are narrower
than Step Functions' generated policies, on purpose:

* each Task is granted the action it calls (`dynamodb:PutItem`), not every item action of the
  table (Step Functions grants GetItem, PutItem, UpdateItem and DeleteItem together);
* a Lambda function named with a version or an alias (`NAME:prod`, or lambda:invoke's
  `Qualifier`) is granted that qualified ARN alone; an unqualified one gets the function and
  its versions and aliases (`NAME` and `NAME:*`), as CDK's LambdaInvoke grants a function
  (`resourceArnsForGrantInvoke`), so a version invoked through it keeps working (Step
  Functions' own example lists the function ARN alone).

`aws-sdk:<service>:<action>` becomes `<IAM prefix>:<Action>` (a few APIs are authorized by
another action: `lambda:Invoke` by `lambda:InvokeFunction`, S3's `HeadObject` by
`s3:GetObject`, ...) on the resource its parameters name where the service's resource is
known here (DynamoDB tables and indexes, SQS queues, SNS topics, S3 buckets and objects, Lambda
functions, EventBridge buses, Step Functions state machines and executions, Secrets Manager
secrets, SSM parameters); on `*` otherwise, and such grants are listed (`Plan.wildcards`).

`states:startExecution` grants nothing in IAM: Shepherd starts the named state machine as a
child *workflow* of the same deployment (the engine's own table access), so the name must be
one of the app's definitions (`workflow_types`); a Task naming one that is not is refused.

A Task whose grant cannot be derived is refused (`Plan.refusals`, naming the state): the CDK
construct fails the synth with them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from . import integrations, jsonata, lambdas, services
from .document import JSONATA, State, StateMachine

NAMED, DYNAMIC, UNNAMED = "named", "dynamic", "unnamed"
# Whether the SDK knows `(boto3 service, Operation)`: None if it does, else why not.
Knows = Callable[[str, str], str | None]


@dataclass(frozen=True)
class Env:
    """Where unqualified names live: the deploying stack's partition, region and account
    (CDK tokens in the construct, plain text in tests)."""

    partition: str = "aws"
    region: str = "us-east-1"
    account: str = "123456789012"


@dataclass(frozen=True)
class Grant:
    """One action on one resource, and the state that needs it."""

    action: str
    resource: str
    where: str
    why: str = NAMED  # NAMED: the definition names it; DYNAMIC: a path or expression gives it;
    # UNNAMED: no parameter names a resource the construct knows (an aws-sdk call)


@dataclass(frozen=True)
class Refusal:
    where: str
    reason: str


@dataclass(frozen=True)
class Child:
    """A state machine a Task starts (None: a path or an expression gives it)."""

    where: str
    machine: str | None


@dataclass(frozen=True)
class Plan:
    grants: tuple[Grant, ...] = ()
    children: tuple[Child, ...] = ()
    refusals: tuple[Refusal, ...] = ()

    def __add__(self, other: Plan) -> Plan:
        return Plan(
            self.grants + other.grants,
            self.children + other.children,
            self.refusals + other.refusals,
        )

    def statements(self) -> list[dict[str, Any]]:
        """The IAM statements: one per action, its resources sorted (`*` alone where any
        state's grant of that action is `*`)."""
        by_action: dict[str, set[str]] = {}
        for grant in self.grants:
            by_action.setdefault(grant.action, set()).add(grant.resource)
        out = []
        for action in sorted(by_action):
            found = by_action[action]
            resources = ["*"] if "*" in found else sorted(found)
            out.append({"Effect": "Allow", "Action": action, "Resource": resources})
        return out

    def wildcards(self) -> list[Grant]:
        """The grants on `*` or a pattern because nothing static names the resource."""
        return [g for g in self.grants if g.why != NAMED]


def plan(
    machine: StateMachine,
    env: Env | None = None,
    *,
    workflow_types: Collection[str] | None = None,
    knows: Knows | None = None,
) -> Plan:
    """What every Task of `machine` (Parallel branches and Map processors included) needs.
    `workflow_types`: the app's definitions, which `states:startExecution` may start (None:
    not checked); `knows`: whether the SDK has an aws-sdk call's API (None: not checked)."""
    builder = _Builder(env or Env(), workflow_types, knows)
    for state in tasks(machine):
        builder.task(state)
    return Plan(tuple(builder.grants), tuple(builder.children), tuple(builder.refusals))


def tasks(machine: StateMachine) -> Iterator[State]:
    """Every Task state, depth first through Parallel branches and Map item processors."""
    for state in machine.states.values():
        if state.type == "Task":
            yield state
        for branch in state.branches:
            yield from tasks(branch)


# --- parameters ----------------------------------------------------------------------------


class _Dynamic:
    def __repr__(self) -> str:
        return "<dynamic>"


_RUNTIME = _Dynamic()  # a value only known when the state runs


def _arguments(state: State) -> Any:
    """The Task's parameters as written: a template object, or _RUNTIME when the whole of them
    is an expression."""
    if state.query_language == JSONATA:
        args = state.get("Arguments")
        return _RUNTIME if jsonata.is_expression(args) else (args or {})
    return state.get("Parameters") or {}


def _field(args: Any, name: str) -> Any:
    """A parameter's static value, _RUNTIME when a path or an expression gives it, None when
    it is not there."""
    if args is _RUNTIME or jsonata.is_expression(args):
        return _RUNTIME
    if not isinstance(args, dict):
        return None
    if f"{name}.$" in args:
        return _RUNTIME
    value = args.get(name)
    return _RUNTIME if jsonata.is_expression(value) else value


# --- ARNs ----------------------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_QUALIFIER = re.compile(r"[A-Za-z0-9_$-]+")
_ARN = re.compile(r"arn:[a-z-]+:([a-z0-9-]+):([a-z0-9-]*):([0-9]*):(.+)")


def _function_arns(reference: str, qualifier: Any, env: Env) -> list[str] | None:
    """`NAME`, `NAME:Q`, `ACCOUNT:function:NAME[:Q]` or a function ARN -> what invoking it
    needs; None when it is none of those."""
    parts = reference.split(":")
    partition, region, account = env.partition, env.region, env.account
    if reference.startswith("arn:"):
        if len(parts) not in (7, 8) or parts[2] != "lambda" or parts[5] != "function":
            return None
        partition, region, account, rest = parts[1], parts[3], parts[4], parts[6:]
    elif len(parts) in (3, 4) and parts[1] == "function":
        account, rest = parts[0], parts[2:]
    elif len(parts) in (1, 2):
        rest = parts
    else:
        return None
    name, own = rest[0], (rest[1] if len(rest) == 2 else None)
    if not _NAME.fullmatch(name) or (own is not None and not _QUALIFIER.fullmatch(own)):
        return None
    base = f"arn:{partition}:lambda:{region}:{account}:function:{name}"
    chosen = own or (qualifier if isinstance(qualifier, str) else None)
    if chosen and chosen != "$LATEST":
        return [f"{base}:{chosen}"]
    return [base, f"{base}:*"]


def _queue_arn(url: str, env: Env) -> str | None:
    """`https://sqs.<region>.amazonaws.com/<account>/<name>` (or the legacy and local forms)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    segments = [s for s in parts.path.split("/") if s]
    if parts.scheme not in ("http", "https") or len(segments) != 2:
        return None
    account, name = segments
    if not account.isdigit() or not _NAME.fullmatch(name):
        return None
    host = parts.hostname or ""
    match = re.fullmatch(r"(?:sqs\.)?([a-z0-9-]+)(?:\.queue)?\.amazonaws\.com(?:\.cn)?", host)
    region = env.region
    if host == "queue.amazonaws.com":
        region = "us-east-1"
    elif match and match.group(1) not in ("sqs", "queue"):
        region = match.group(1)
    return f"arn:{env.partition}:sqs:{region}:{account}:{name}"


def _table_arn(value: str, env: Env) -> str | None:
    if value.startswith("arn:"):
        match = _ARN.fullmatch(value)
        ok = match and match.group(1) == "dynamodb" and re.fullmatch(r"table/[\w.-]+", match[4])
        return value if ok else None
    if not re.fullmatch(r"[A-Za-z0-9_.-]{3,255}", value):
        return None
    return f"arn:{env.partition}:dynamodb:{env.region}:{env.account}:table/{value}"


def _service_arn(value: str, service: str) -> str | None:
    match = _ARN.fullmatch(value)
    return value if match and match.group(1) == service else None


def _bus_arn(value: str, env: Env) -> str | None:
    if value.startswith("arn:"):
        return _service_arn(value, "events")
    if not re.fullmatch(r"[A-Za-z0-9/_.-]+", value):
        return None
    return f"arn:{env.partition}:events:{env.region}:{env.account}:event-bus/{value}"


def _literal(text: str) -> str:
    """An S3 key as an IAM resource: `*`, `?` and `$` are IAM's, escaped as `${*}` etc."""
    return re.sub(r"[*?$]", lambda m: "${" + m.group(0) + "}", text)


# --- the IAM names of aws-sdk calls --------------------------------------------------------

# boto3's service name -> the IAM service prefix, where they differ.
IAM_PREFIX = {
    "stepfunctions": "states",
    "elbv2": "elasticloadbalancing",
    "sesv2": "ses",
    "dynamodbstreams": "dynamodb",
    "s3control": "s3",
    "iot-data": "iot",
}
# Services whose IAM actions are not their API names (API Gateway's management APIs are
# authorized by HTTP verbs on resource paths).
NOT_DERIVED = {
    "apigateway": "API Gateway's management API is authorized by HTTP verbs on resource paths",
    "apigatewayv2": "API Gateway's management API is authorized by HTTP verbs on resource paths",
    "apigatewaymanagementapi": "it is authorized by execute-api:ManageConnections on a stage",
}
# APIs authorized by another IAM action than their own name, or refused with the reason.
IAM_ACTIONS: dict[tuple[str, str], tuple[str, ...] | str] = {
    ("lambda", "Invoke"): ("lambda:InvokeFunction",),
    ("lambda", "InvokeWithResponseStream"): ("lambda:InvokeFunction",),
    ("sqs", "SendMessageBatch"): ("sqs:SendMessage",),
    ("sqs", "DeleteMessageBatch"): ("sqs:DeleteMessage",),
    ("sqs", "ChangeMessageVisibilityBatch"): ("sqs:ChangeMessageVisibility",),
    ("sns", "PublishBatch"): ("sns:Publish",),
    ("s3", "HeadObject"): ("s3:GetObject",),
    ("s3", "HeadBucket"): ("s3:ListBucket",),
    ("s3", "ListObjects"): ("s3:ListBucket",),
    ("s3", "ListObjectsV2"): ("s3:ListBucket",),
    ("s3", "CopyObject"): "CopyObject is authorized by s3:GetObject on its source and "
    "s3:PutObject on its target, which the construct does not derive",
    ("dynamodb", "TransactWriteItems"): "a transaction is authorized by each item's own "
    "action (PutItem, UpdateItem, ...), which the construct does not derive",
    ("dynamodb", "TransactGetItems"): "a transaction is authorized by dynamodb:GetItem on "
    "each item's table, which the construct does not derive",
}


# --- the builder ---------------------------------------------------------------------------


@dataclass
class _Builder:
    env: Env
    workflow_types: Collection[str] | None
    knows: Knows | None
    grants: list[Grant] = field(default_factory=list)
    children: list[Child] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)

    def refuse(self, state: State, reason: str) -> None:
        self.refusals.append(Refusal(state.where, reason))

    def grant(self, state: State, action: str, resource: str, why: str = NAMED) -> None:
        self.grants.append(Grant(action, resource, state.where, why))

    def task(self, state: State) -> None:
        resource = state.raw["Resource"]
        if jsonata.is_expression(resource):
            self.refuse(state, "a Resource computed at run time: nothing to grant it on")
            return
        base = resource.removesuffix(lambdas.WAIT_FOR_TOKEN)
        if base == lambdas.INVOKE:
            self.lambda_invoke(state)
        elif integrations.is_start_execution(resource):
            self.start_execution(state)
        elif services.is_service(resource):
            self.service(state, resource)
        elif not base.startswith("arn:") or _function_arns(base, None, self.env) is not None:
            arns = _function_arns(base, None, self.env)
            if arns is None:
                self.refuse(state, f"'{resource}' is not a Lambda function")
                return
            for arn in arns:
                self.grant(state, "lambda:InvokeFunction", arn)
        else:
            self.refuse(
                state, f"'{resource}' is neither a Lambda function nor a service integration"
            )

    def lambda_invoke(self, state: State) -> None:
        args = _arguments(state)
        self.function(state, _field(args, "FunctionName"), _field(args, "Qualifier"))

    def function(self, state: State, name: Any, qualifier: Any) -> None:
        for arn, why in self.functions(state, name, qualifier) or ():
            self.grant(state, "lambda:InvokeFunction", arn, why)

    def functions(self, state: State, name: Any, qualifier: Any) -> list[tuple[str, str]] | None:
        if name is None:
            self.refuse(state, "FunctionName is required: it names the function to grant")
            return None
        if name is _RUNTIME:
            return [("*", DYNAMIC)]
        arns = _function_arns(str(name), qualifier, self.env)
        if arns is None:
            self.refuse(state, f"FunctionName '{name}' is not a Lambda function name or ARN")
            return None
        return [(arn, NAMED) for arn in arns]

    def start_execution(self, state: State) -> None:
        machine = _field(_arguments(state), "StateMachineArn")
        if machine is None:
            self.refuse(state, "StateMachineArn is required: it names the child workflow")
        elif machine is _RUNTIME:
            self.children.append(Child(state.where, None))
        else:
            name = integrations.machine_name(str(machine))
            if self.workflow_types is not None and name not in self.workflow_types:
                self.refuse(
                    state,
                    f"starts state machine '{name}', which is not a definition of this app: "
                    "Shepherd runs it as a child workflow of that name (known: "
                    f"{', '.join(sorted(self.workflow_types)) or 'none'})",
                )
                return
            self.children.append(Child(state.where, name))

    def service(self, state: State, resource: str) -> None:
        call = services.parse(resource)  # validation refused what does not parse
        args = _arguments(state)
        if not call.sdk:
            self.optimized(state, call, args)
            return
        if call.service in NOT_DERIVED:
            self.refuse(state, f"'{resource}': {NOT_DERIVED[call.service]}")
            return
        if self.knows is not None:
            unknown = self.knows(call.service, call.operation)
            if unknown is not None:
                self.refuse(state, f"'{resource}': {unknown}")
                return
        prefix = IAM_PREFIX.get(call.service, call.service)
        actions = IAM_ACTIONS.get((prefix, call.operation), (f"{prefix}:{call.operation}",))
        if isinstance(actions, str):
            self.refuse(state, f"'{resource}': {actions}")
            return
        found = self.sdk_resources(state, prefix, call.operation, args)
        if found is None:
            found = [("*", UNNAMED)]
        for action in actions:
            for arn, why in found:
                self.grant(state, action, arn, why)

    def optimized(self, state: State, call: services.ServiceCall, args: Any) -> None:
        action = f"{call.service}:{call.operation}"
        found: list[tuple[str, str]] | None
        if call.service == "sqs":
            found = self.named(state, _field(args, "QueueUrl"), "QueueUrl", _queue_arn)
        elif call.service == "sns":
            found = self.topic(state, args)
        elif call.service == "events":
            found = self.buses(state, args)
        elif call.service == "dynamodb":
            found = self.table(state, call.operation, args)
        else:  # s3 getObject | putObject
            found = self.s3(state, call.operation, args)
        for arn, why in found or ():
            self.grant(state, action, arn, why)

    # --- resources -----------------------------------------------------------------------

    def named(
        self, state: State, value: Any, name: str, arn_of: Callable[[str, Env], str | None]
    ) -> list[tuple[str, str]] | None:
        """The ARN a required parameter names; `*` when it is dynamic; a refusal (None) when
        it is missing or names nothing."""
        if value is None:
            self.refuse(state, f"{name} is required: it names the resource to grant")
            return None
        if value is _RUNTIME:
            return [("*", DYNAMIC)]
        arn = arn_of(str(value), self.env) if isinstance(value, str) else None
        if arn is None:
            self.refuse(state, f"{name} {value!r} names no resource the construct can grant")
            return None
        return [(arn, NAMED)]

    def topic(self, state: State, args: Any) -> list[tuple[str, str]] | None:
        topic = _field(args, "TopicArn")
        if topic is not None:
            return self.named(state, topic, "TopicArn", lambda v, _: _service_arn(v, "sns"))
        if _field(args, "TargetArn") is not None or _field(args, "PhoneNumber") is not None:
            return [("*", UNNAMED)]  # as Step Functions grants a TargetArn or PhoneNumber
        self.refuse(state, "sns:publish names no TopicArn, TargetArn or PhoneNumber")
        return None

    def buses(self, state: State, args: Any) -> list[tuple[str, str]] | None:
        every = f"arn:{self.env.partition}:events:*:*:event-bus/*"
        entries = _field(args, "Entries")
        if entries is None:
            self.refuse(state, "Entries is required: each names the event bus to grant")
            return None
        if entries is _RUNTIME or not isinstance(entries, list):
            return [(every, DYNAMIC)]
        out = []
        for entry in entries:
            bus = _field(entry, "EventBusName")
            if bus is _RUNTIME or not isinstance(entry, dict):
                out.append((every, DYNAMIC))
                continue
            arn = _bus_arn(str(bus if bus is not None else "default"), self.env)
            if arn is None:
                self.refuse(state, f"EventBusName {bus!r} is not an event bus name or ARN")
                return None
            out.append((arn, NAMED))
        return out

    def table(self, state: State, operation: str, args: Any) -> list[tuple[str, str]] | None:
        found = self.named(state, _field(args, "TableName"), "TableName", _table_arn)
        if not found or found[0][1] != NAMED or operation not in ("Query", "Scan"):
            return found
        index = _field(args, "IndexName")
        if index is None:
            return found
        table = found[0][0]
        if index is _RUNTIME:
            return [(f"{table}/index/*", DYNAMIC)]
        return [(f"{table}/index/{index}", NAMED)]

    def s3(self, state: State, operation: str, args: Any) -> list[tuple[str, str]] | None:
        bucket = _field(args, "Bucket")
        if bucket is None:
            self.refuse(state, "Bucket is required: it names the resource to grant")
            return None
        if bucket is _RUNTIME:
            return [("*", DYNAMIC)]
        if not isinstance(bucket, str) or not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,62}", bucket):
            self.refuse(state, f"Bucket {bucket!r} is not a bucket name")
            return None
        arn = f"arn:{self.env.partition}:s3:::{bucket}"
        key = _field(args, "Key")
        if key is None:
            return [(arn, NAMED)]
        if key is _RUNTIME:
            return [(f"{arn}/*", DYNAMIC)]
        return [(f"{arn}/{_literal(str(key))}", NAMED)]

    def sdk_resources(
        self, state: State, prefix: str, operation: str, args: Any
    ) -> list[tuple[str, str]] | None:
        """The resources an aws-sdk call names, for the services whose resources are known
        here; None: nothing names one (the grant is on `*`, listed)."""
        if prefix == "dynamodb":
            return self.dynamodb(state, operation, args)
        simple: Mapping[str, tuple[str, Callable[[str, Env], str | None]]] = {
            "sqs": ("QueueUrl", _queue_arn),
            "sns": ("TopicArn", lambda v, _: _service_arn(v, "sns")),
            "states": ("StateMachineArn", lambda v, _: _service_arn(v, "states")),
            "secretsmanager": ("SecretId", _secret_arn),
            "ssm": ("Name", _parameter_arn),
        }
        if prefix in simple:
            name, arn_of = simple[prefix]
            if prefix == "states" and _field(args, name) is None:
                name, arn_of = "ExecutionArn", lambda v, _: _service_arn(v, "states")
            value = _field(args, name)
            return None if value is None else (self.named(state, value, name, arn_of) or [])
        if prefix == "s3":
            return (
                None if _field(args, "Bucket") is None else (self.s3(state, operation, args) or [])
            )
        if prefix == "lambda":
            name = _field(args, "FunctionName")
            if name is None:
                return None
            return self.functions(state, name, _field(args, "Qualifier")) or []
        if prefix == "events" and operation == "PutEvents":
            return self.buses(state, args) or []
        return None

    def dynamodb(self, state: State, operation: str, args: Any) -> list[tuple[str, str]] | None:
        """An aws-sdk DynamoDB call's tables: `TableName`, or a batch's `RequestItems` keys."""
        if _field(args, "TableName") is not None:
            return self.table(state, operation, args) or []
        items = _field(args, "RequestItems")  # BatchGetItem, BatchWriteItem
        if items is _RUNTIME:
            return [("*", DYNAMIC)]
        if not isinstance(items, dict):
            return None
        out = []
        for key in items:
            if key.endswith(".$") or jsonata.is_expression(key):
                return [("*", DYNAMIC)]
            arn = _table_arn(key, self.env)
            if arn is None:
                self.refuse(state, f"RequestItems names {key!r}, not a table")
                return []
            out.append((arn, NAMED))
        return out


def _secret_arn(value: str, env: Env) -> str | None:
    """A secret's ARN, or its name: its ARN ends in `-` and six random characters."""
    if value.startswith("arn:"):
        return _service_arn(value, "secretsmanager")
    if not re.fullmatch(r"[A-Za-z0-9/_+=.@-]+", value):
        return None
    return f"arn:{env.partition}:secretsmanager:{env.region}:{env.account}:secret:{value}-??????"


def _parameter_arn(value: str, env: Env) -> str | None:
    if value.startswith("arn:"):
        return _service_arn(value, "ssm")
    if not re.fullmatch(r"[A-Za-z0-9/_.-]+", value):
        return None
    return f"arn:{env.partition}:ssm:{env.region}:{env.account}:parameter/{value.lstrip('/')}"
