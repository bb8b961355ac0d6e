"""AWS service integrations as Step Functions names them (pure: which call a Task's resource
means, what its parameters become, how its result and its errors come back).

Resources (the developer guide's "Service integrations"):

* an optimized integration, `arn:aws:states:::<service>:<action>[.pattern]`: the ones built are
  `sqs:sendMessage`, `sns:publish`, `events:putEvents`, `dynamodb:getItem|putItem|updateItem|
  deleteItem|query` and `s3:getObject|putObject` (the last two are the SDK's; Step Functions
  lists them under `aws-sdk:s3`, and both spellings are accepted);
* `arn:aws:states:::aws-sdk:<service>:<action>[.waitForTaskToken]`: any API of any service the
  SDK knows, with Step Functions' PascalCase parameter names.

Integrations that Step Functions runs as `.sync` jobs (ECS, Glue, Batch, CodeBuild, Athena, ...)
are refused when a state machine is validated: nothing here polls a job (`refusal`).

Errors keep Step Functions' names: an optimized integration's are `<Service>.<Code>` with the
service as the guide writes it (`DynamoDB.ConditionalCheckFailedException`,
`SQS.QueueDoesNotExistException`); an `aws-sdk` call's carry the service's SDK client name in
PascalCase (`DynamoDb.ConditionalCheckFailedException`, `S3.NoSuchKeyException`). Both end in
`Exception`, added where the service's own code lacks it, as the guide says.

The calls themselves are made by `shepherd.adapters.services` (boto3).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .errors import StatesError

PREFIX = "arn:aws:states:::"
SDK = "aws-sdk:"
WAIT_FOR_TOKEN = ".waitForTaskToken"  # noqa: S105 - a resource suffix, not a secret
PERMISSIONS = "States.Permissions"

# Optimized integrations: resource service -> (boto3 service, error prefix, actions built).
OPTIMIZED: dict[str, tuple[str, str, frozenset[str]]] = {
    "sqs": ("sqs", "SQS", frozenset({"sendMessage"})),
    "sns": ("sns", "SNS", frozenset({"publish"})),
    "events": ("events", "EventBridge", frozenset({"putEvents"})),
    "dynamodb": (
        "dynamodb",
        "DynamoDB",
        frozenset({"getItem", "putItem", "updateItem", "deleteItem", "query"}),
    ),
    "s3": ("s3", "S3", frozenset({"getObject", "putObject"})),
}

# Services whose Step Functions integration is a job run with `.sync`: refused by name, with
# the reason, rather than run without waiting for the job.
SYNC_JOBS = frozenset(
    {
        "ecs",
        "eks",
        "glue",
        "batch",
        "codebuild",
        "athena",
        "emr",
        "elasticmapreduce",
        "emr-containers",
        "emr-serverless",
        "sagemaker",
        "databrew",
        "mediaconvert",
        "bedrock",
        "glue-databrew",
    }
)

# The `aws-sdk` service names Step Functions uses that differ from boto3's.
SDK_SERVICE_ALIASES = {
    "sfn": "stepfunctions",
    "eventbridge": "events",
    "cloudwatchlogs": "logs",
    "cloudwatch": "cloudwatch",
    "apigateway": "apigateway",
    "elasticloadbalancingv2": "elbv2",
    "acmpca": "acm-pca",
    "costexplorer": "ce",
    "lambda": "lambda",
}


@dataclass(frozen=True)
class ServiceCall:
    """What a Task's resource names: a boto3 service and operation, and how it is reported."""

    resource: str
    service: str  # boto3's service name
    action: str  # Step Functions' action name (camelCase)
    sdk: bool  # an `aws-sdk:` call (generic) rather than an optimized integration
    callback: bool  # `.waitForTaskToken`
    error_prefix: str  # `<Service>` of `<Service>.<Code>`; "" until the SDK names it

    @property
    def operation(self) -> str:
        """The API's operation name (`sendMessage` -> `SendMessage`)."""
        return self.action[:1].upper() + self.action[1:]


def is_service(resource: str) -> bool:
    """Whether a Task's resource is a service integration (not Lambda, not states:)."""
    if not resource.startswith(PREFIX):
        return False
    rest = resource[len(PREFIX) :]
    return not rest.startswith(("lambda:", "states:"))


def refusal(resource: str) -> str | None:
    """Why a service resource cannot run here (None: it can). Checked at validation, so a
    state machine that names an integration that is not built is refused naming the state."""
    if not is_service(resource):
        return None
    try:
        call = parse(resource)
    except StatesError as exc:
        return exc.cause
    if call.service in SYNC_JOBS or call.service.split("-")[0] in SYNC_JOBS:
        return (
            f"'{resource}' is a job Step Functions runs with .sync; Shepherd does not run "
            f"{call.service} jobs yet: start it from an agent"
        )
    return None


def parse(resource: str) -> ServiceCall:
    """The call a service resource names; a StatesError for a resource no integration has."""
    if not resource.startswith(PREFIX):
        raise StatesError(PERMISSIONS, f"'{resource}' is not a service integration")
    rest = resource[len(PREFIX) :]
    callback = rest.endswith(WAIT_FOR_TOKEN)
    rest = rest.removesuffix(WAIT_FOR_TOKEN)
    if rest.endswith((".sync", ".sync:2")) or ".sync" in rest:
        service = rest.removeprefix(SDK).split(":", 1)[0]
        raise StatesError(
            PERMISSIONS,
            f"'{resource}': the .sync pattern of {service} (a job Step Functions polls) is not "
            "built in Shepherd",
        )
    if rest.startswith(SDK):
        parts = rest[len(SDK) :].split(":")
        if len(parts) != 2 or not all(re.fullmatch(r"[A-Za-z0-9-]+", p) for p in parts):
            raise StatesError(PERMISSIONS, f"'{resource}' is not aws-sdk:<service>:<action>")
        service, action = parts
        boto = SDK_SERVICE_ALIASES.get(service.lower(), service.lower())
        return ServiceCall(resource, boto, action, True, callback, "")
    parts = rest.split(":")
    if len(parts) != 2:
        raise StatesError(PERMISSIONS, f"'{resource}' is not <service>:<action>")
    service, action = parts
    known = OPTIMIZED.get(service)
    if known is None:
        if service in SYNC_JOBS:
            return ServiceCall(resource, service, action, False, callback, service)
        raise StatesError(
            PERMISSIONS,
            f"'{resource}': the {service} integration is not built; "
            f"use arn:aws:states:::aws-sdk:{service}:{action}",
        )
    boto, prefix, actions = known
    if action not in actions:
        raise StatesError(
            PERMISSIONS,
            f"'{resource}': {service} integrates {', '.join(sorted(actions))}; "
            f"use arn:aws:states:::aws-sdk:{service}:{action}",
        )
    return ServiceCall(resource, boto, action, False, callback, prefix)


# --- parameters ----------------------------------------------------------------------------

# Optimized integrations serialize these parameters when a state machine gives them as JSON
# (Step Functions does: a MessageBody object is sent as its JSON text).
_SERIALIZED = {
    ("sqs", "sendMessage"): ("MessageBody",),
    ("sns", "publish"): ("Message",),
}


def prepare(call: ServiceCall, parameters: Any) -> dict[str, Any]:
    """The API request a state's parameters make (before the SDK's own name matching)."""
    if parameters is None:
        parameters = {}
    if not isinstance(parameters, dict):
        raise StatesError(
            "States.Runtime", f"the parameters of {call.resource} must be a JSON object"
        )
    request = dict(parameters)
    if not call.sdk:
        for name in _SERIALIZED.get((call.service, call.action), ()):
            if name in request and not isinstance(request[name], str):
                request[name] = json.dumps(request[name], separators=(",", ":"))
        if call.service == "events" and isinstance(request.get("Entries"), list):
            request["Entries"] = [
                {
                    **entry,
                    **(
                        {"Detail": json.dumps(entry["Detail"], separators=(",", ":"))}
                        if isinstance(entry, dict)
                        and "Detail" in entry
                        and not isinstance(entry["Detail"], str)
                        else {}
                    ),
                }
                for entry in request["Entries"]
            ]
    return request


# --- errors --------------------------------------------------------------------------------

# Error codes that the query-protocol services return in another spelling than the one Step
# Functions reports.
_CODE_ALIASES = {
    "AWS.SimpleQueueService.NonExistentQueue": "QueueDoesNotExist",
    "NoSuchKey": "NoSuchKey",
}


def pascal_client(service_id: str) -> str:
    """The SDK client name Step Functions prefixes an aws-sdk error with (`DynamoDB` ->
    `DynamoDb`, `ACM PCA` -> `AcmPca`, `SQS` -> `Sqs`, `EventBridge` -> `EventBridge`)."""
    words = re.split(r"[\s_-]+", service_id.strip())
    out = []
    for word in words:
        if not word:
            continue
        # A run of capitals is one word with only its first capital kept, except the last
        # capital of a run that starts a lower-case word ("SQSQueue" -> "SqsQueue").
        pieces = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", word)
        out.append("".join(p[:1].upper() + p[1:].lower() for p in pieces))
    return "".join(out)


def error_name(prefix: str, code: str) -> str:
    """`<Service>.<Code>Exception`, the suffix added where the code lacks it."""
    code = _CODE_ALIASES.get(code, code)
    code = code.split(".")[-1] or "Unknown"
    if not code.endswith("Exception"):
        code += "Exception"
    return f"{prefix}.{code}"


# --- results -------------------------------------------------------------------------------


def shape_result(response: Any, *, optimized: bool) -> Any:
    """A response as Step Functions returns it: the API's members as the SDK names them (map
    keys such as a DynamoDB item's attribute names are data and stay as they are), timestamps
    as ISO 8601 text, bytes as text (as the SDK integration gives an object's body); an
    optimized integration adds the SDK's `SdkHttpMetadata` and `SdkResponseMetadata`."""
    meta = response.get("ResponseMetadata", {}) if isinstance(response, dict) else {}
    body = _plain({k: v for k, v in response.items() if k != "ResponseMetadata"})
    if not optimized:
        return body
    headers = {str(k): str(v) for k, v in (meta.get("HTTPHeaders") or {}).items()}
    body["SdkHttpMetadata"] = {
        "AllHttpHeaders": {k: [v] for k, v in headers.items()},
        "HttpHeaders": headers,
        "HttpStatusCode": int(meta.get("HTTPStatusCode", 200)),
    }
    body["SdkResponseMetadata"] = {"RequestId": str(meta.get("RequestId", ""))}
    return body


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_plain(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    read = getattr(value, "read", None)
    if callable(read):  # a streaming body (s3 getObject)
        return _plain(read())
    iso = getattr(value, "isoformat", None)
    if callable(iso):
        return iso()
    if type(value).__name__ == "Decimal":
        return int(value) if value == int(value) else float(value)
    return value
