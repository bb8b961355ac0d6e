"""Are the AWS calls a function makes allowed by its own role in the synthesized template?

Calls are recorded from the SDK itself (a botocore `before-parameter-build` hook on each engine
client: service, operation and the parameters the code passed), then mapped to what IAM
authorizes (action and resource ARN), and checked against the Allow/Deny statements of the
policies attached to that function's role, with IAM's wildcard matching. The template's ARNs are
resolved with the physical names the test resources had (moto's), so "the table" in a call and
`Fn::GetAtt [Table, Arn]` in a statement are the same string.

How operations map to IAM (service authorization reference): a TransactWriteItems is authorized
item by item by PutItem / UpdateItem / ConditionCheckItem / DeleteItem on each item's table;
SendMessageBatch is sqs:SendMessage; a Query with an IndexName needs the index's ARN; PutEvents
needs each entry's bus. An operation this module cannot map fails the check, so a new kind of
call is looked at rather than waved through.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

REGION = "us-east-1"
ACCOUNT = "123456789012"


@dataclass(frozen=True)
class Call:
    function: str  # who made it: "api", "agent:inventory", ...
    service: str  # the IAM prefix: dynamodb, sqs, events
    operation: str  # the API operation: TransactWriteItems, ...
    params: Mapping[str, Any]


@dataclass
class Recorder:
    """Collects every call made by hooked clients, attributed to the function acting now."""

    calls: list[Call] = field(default_factory=list)
    current: str | None = None

    def hook(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        if self.current is None:
            raise AssertionError(f"{model.name}: an engine call outside any handler")
        service_model = model.service_model
        service = service_model.signing_name or service_model.endpoint_prefix
        self.calls.append(Call(self.current, service, model.name, dict(params)))

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-parameter-build.*.*", self.hook)
        return client

    @contextlib.contextmanager
    def acting_as(self, function: str) -> Iterator[None]:
        previous, self.current = self.current, function
        try:
            yield
        finally:
            self.current = previous


# --------------------------------------------------------------------------- calls -> IAM


def table_arn(name: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"


def queue_arn(url_or_name: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{url_or_name.rstrip('/').rsplit('/', 1)[-1]}"


def bus_arn(name_or_arn: str | None) -> str:
    if name_or_arn and name_or_arn.startswith("arn:"):
        return name_or_arn
    return f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{name_or_arn or 'default'}"


_TRANSACT_ITEM_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "ConditionCheck": "ConditionCheckItem",
    "Delete": "DeleteItem",
    "Get": "GetItem",
}
_SQS_BATCHES = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
_DYNAMODB_SINGLE = {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "DescribeTable"}
_SQS_SINGLE = {
    "SendMessage",
    "ReceiveMessage",
    "DeleteMessage",
    "ChangeMessageVisibility",
    "GetQueueAttributes",
}
_S3_OBJECT = {"GetObject", "PutObject", "DeleteObject"}


def required(call: Call) -> list[tuple[str, str]]:
    """(IAM action, resource ARN) pairs that must all be allowed for `call` to succeed."""
    p, op = call.params, call.operation
    if call.service == "dynamodb":
        if op in _DYNAMODB_SINGLE:
            return [(f"dynamodb:{op}", table_arn(p["TableName"]))]
        if op in ("Query", "Scan"):
            arn = table_arn(p["TableName"])
            return [
                (f"dynamodb:{op}", f"{arn}/index/{p['IndexName']}" if "IndexName" in p else arn)
            ]
        if op in ("TransactWriteItems", "TransactGetItems"):
            pairs = []
            for item in p["TransactItems"]:
                ((kind, body),) = item.items()
                pairs.append(
                    (f"dynamodb:{_TRANSACT_ITEM_ACTIONS[kind]}", table_arn(body["TableName"]))
                )
            return pairs
        if op in ("BatchWriteItem", "BatchGetItem"):
            return [(f"dynamodb:{op}", table_arn(name)) for name in p["RequestItems"]]
    if call.service == "sqs":
        if op in _SQS_BATCHES:
            return [(f"sqs:{_SQS_BATCHES[op]}", queue_arn(p["QueueUrl"]))]
        if op in _SQS_SINGLE:
            return [(f"sqs:{op}", queue_arn(p["QueueUrl"]))]
        if op == "GetQueueUrl":
            return [("sqs:GetQueueUrl", queue_arn(p["QueueName"]))]
    return _other(call)


def _other(call: Call) -> list[tuple[str, str]]:
    """S3 object calls and EventBridge's PutEvents."""
    p, op = call.params, call.operation
    if call.service == "s3" and op in _S3_OBJECT:
        return [(f"s3:{op}", f"arn:aws:s3:::{p['Bucket']}/{p['Key']}")]
    if call.service == "events" and op == "PutEvents":
        return [("events:PutEvents", bus_arn(e.get("EventBusName"))) for e in p["Entries"]]
    raise AssertionError(f"{call.service}:{op}: teach iam_check which IAM action it needs")


# --------------------------------------------------------------------------- the template


class TemplateIam:
    """The template's policies, with ARNs resolved against the physical names of the test
    resources (`names`: logical ID -> name; unnamed resources keep their logical ID)."""

    def __init__(
        self,
        template: Mapping[str, Any],
        names: Mapping[str, str],
        *,
        pseudo: Mapping[str, str] | None = None,
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        """`pseudo`: values of pseudo parameters beyond the region, account and partition
        (the stack's id, which pool queues' names end in). `aliases`: a name the test resources
        had -> the name the template gives that resource (a moto queue named after the local
        stack's scheme is the template's `<base>-Q-<pool>`), applied to what a call asks for."""
        self.resources: dict[str, Any] = dict(template["Resources"])
        self.names = dict(names)
        self.pseudo = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            **(pseudo or {}),
        }
        self.aliases = dict(aliases or {})

    def alias(self, arn: str) -> str:
        """`arn` with its last name replaced by the template's name for it, if it has one."""
        head, sep, name = arn.rpartition(":")
        return f"{head}{sep}{self.aliases.get(name, name)}"

    def _name(self, logical_id: str) -> str:
        return self.names.get(logical_id, logical_id)

    def _arn(self, logical_id: str) -> str:
        cfn_type = self.resources[logical_id]["Type"]
        name = self._name(logical_id)
        return {
            "AWS::DynamoDB::Table": table_arn(name),
            "AWS::SQS::Queue": queue_arn(name),
            "AWS::Events::EventBus": bus_arn(name),
            "AWS::Logs::LogGroup": f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:*",
            "AWS::Lambda::Function": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
            "AWS::S3::Bucket": f"arn:aws:s3:::{name}",
        }.get(cfn_type, f"arn:aws:cloudformation-resource:{REGION}:{ACCOUNT}:{logical_id}")

    def _ref(self, logical_id: str) -> str:
        if logical_id in self.pseudo:
            return self.pseudo[logical_id]
        if self.resources[logical_id]["Type"] == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{self._name(logical_id)}"
        return self._name(logical_id)

    def resolve(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref":
                return self._ref(arg)
            if fn == "Fn::GetAtt" and arg[1] == "Arn":
                return self._arn(arg[0])
            if fn == "Fn::GetAtt" and arg[1] == "StreamArn":  # a table's stream
                return f"{self._arn(arg[0])}/stream/*"
            if fn == "Fn::Join":
                return str(arg[0]).join(self.resolve(part) for part in arg[1])
            if fn == "Fn::Select":  # of an Fn::Split
                ((split, (separator, text)),) = arg[1].items()
                assert split == "Fn::Split", value
                return self.resolve(text).split(separator)[int(arg[0])]
        raise AssertionError(f"iam_check cannot resolve {value!r}")

    def statements(self, function_logical_id: str) -> list[dict[str, Any]]:
        """Every statement of every policy attached to the function's role."""
        role = self.resources[function_logical_id]["Properties"]["Role"]["Fn::GetAtt"][0]
        role_props = self.resources[role].get("Properties", {})
        assert not role_props.get("ManagedPolicyArns"), "managed policies are not checked"
        documents = [p["PolicyDocument"] for p in role_props.get("Policies", [])]
        for resource in self.resources.values():
            if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role} in resource[
                "Properties"
            ].get("Roles", []):
                documents.append(resource["Properties"]["PolicyDocument"])
        return [s for document in documents for s in _as_list(document["Statement"])]

    def allows(
        self,
        statements: Sequence[Mapping[str, Any]],
        action: str,
        arn: str,
        leading_keys: Sequence[str] = (),
    ) -> bool:
        """IAM's evaluation for one request: an explicit Deny wins, else some Allow must
        match. An Allow with a Condition is not counted (conservative), except the one
        condition it evaluates: `ForAllValues:StringLike` on `dynamodb:LeadingKeys`, for a
        single-item DynamoDB call whose partition keys (`leading_keys`) all match it."""
        allowed = False
        for statement in statements:
            if not (
                _matches_any(statement, "Action", action, ignore_case=True)
                and (_matches_any(statement, "Resource", arn, resolve=self.resolve))
            ):
                continue
            if statement["Effect"] == "Deny":
                return False
            unconditional = "Condition" not in statement
            if statement["Effect"] == "Allow" and (
                unconditional or _leading_keys_match(statement, leading_keys)
            ):
                allowed = True
        return allowed


def _leading_keys_match(statement: Mapping[str, Any], keys: Sequence[str]) -> bool:
    """The statement's condition is only a LeadingKeys StringLike that every key matches."""
    condition = statement["Condition"]
    if list(condition) != ["ForAllValues:StringLike"] or not keys:
        return False
    tests = condition["ForAllValues:StringLike"]
    if list(tests) != ["dynamodb:LeadingKeys"]:
        return False
    globs = _as_list(tests["dynamodb:LeadingKeys"])
    return all(any(_pattern(g, ignore_case=False).match(k) for g in globs) for k in keys)


def leading_keys(call: Call) -> list[str]:
    """The partition keys a single-item DynamoDB call touches (none for other calls)."""
    if call.service != "dynamodb":
        return []
    item = call.params.get("Item") or call.params.get("Key") or {}
    pk = item.get("pk", {})
    return [pk["S"]] if isinstance(pk, dict) and "S" in pk else []


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@functools.cache
def _pattern(glob: str, *, ignore_case: bool) -> re.Pattern[str]:
    """IAM's wildcards: `*` any run of characters, `?` one character; nothing else special.
    Cached: the checks match each call against the same few hundred globs (issue 36)."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile(f"^{body}$", re.IGNORECASE if ignore_case else 0)


def _matches_any(
    statement: Mapping[str, Any],
    key: str,
    value: str,
    *,
    ignore_case: bool = False,
    resolve: Any = str,
) -> bool:
    if f"Not{key}" in statement:
        raise AssertionError(f"iam_check does not evaluate Not{key}: {statement}")
    return any(
        _pattern(resolve(glob), ignore_case=ignore_case).match(value)
        for glob in _as_list(statement.get(key, []))
    )


def violations(calls: Sequence[Call], iam: TemplateIam, functions: Mapping[str, str]) -> list[str]:
    """Every (call, action, resource) the calling function's role does not allow."""
    found = []
    for call in calls:
        statements = iam.statements(functions[call.function])
        for action, arn in required(call):
            if not iam.allows(statements, action, iam.alias(arn), leading_keys(call)):
                found.append(f"{call.function}: {call.operation} needs {action} on {arn}")
    return sorted(set(found))
