"""Physical names, for the few resources that need one.

Most resources get no name from the app: CloudFormation generates one from the stack name, the
logical ID and a random suffix, which never collides with another stack and never reuses a
name just deleted (SQS refuses a queue name for 60 s after a delete, so a destroy followed at
once by a deploy would fail on a fixed name). Where a name is required (an event bus) or read by
people (the dashboard), it starts with the stack name, which is unique per account and region,
and continues with the construct path below the stack, so two Shepherds in one stack (once
Shepherd is a construct in someone else's app) differ too.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from aws_cdk import Aws, Fn, Stack, Token
from constructs import Construct

_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")  # and runs of "-", which become one
_HASH_LENGTH = 8


def stack_scoped_name(scope: Construct, *, max_length: int = 256) -> str:
    """`<stack name>-<construct path below the stack>`, e.g. `Shepherd-Shepherd-Events` for the
    construct `Shepherd/Events` of the stack `Shepherd`; only letters, digits, `-` and `_`. Too
    long a name keeps its start and ends with a hash of the whole, so it stays unique."""
    stack = Stack.of(scope)
    below = scope.node.scopes[scope.node.scopes.index(stack) + 1 :]
    path = "-".join(_UNSAFE.sub("-", part.node.id).strip("-") for part in below)
    if Token.is_unresolved(stack.stack_name):  # e.g. a nested stack: CloudFormation joins it
        return f"{stack.stack_name}-{path}" if path else stack.stack_name
    name = f"{stack.stack_name}-{path}" if path else stack.stack_name
    if len(name) <= max_length:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_LENGTH]
    return f"{name[: max_length - _HASH_LENGTH - 1]}-{digest}"


# The first group of the stack's UUID (`arn:...:stack/<name>/<uuid>`): new with every creation of
# the stack, so a stack destroyed and created again at once never asks SQS for a queue name it
# still holds (60 s after a delete).
STACK_UUID_PART = Fn.select(0, Fn.split("-", Fn.select(2, Fn.split("/", Aws.STACK_ID))))
READABLE_MAX = 12  # of the stack's name, at the start of each pool resource's name
QUEUE_INFIX = "-Q-"  # pool names are lower case: "-Q-" and "-D-" never occur in one
DLQ_INFIX = "-D-"
POOL_NAME_MAX = 32  # shepherd.definitions: [a-z][a-z0-9-]{0,31}


@dataclass(frozen=True)
class PoolNames:
    """The names of one deployment's pool resources, derived, never listed: a pool's queue is
    `<base>-Q-<pool>`, its DLQ `<base>-D-<pool>`, its agent function `<base>-<pool>`, where
    `<base>` is `<prefix>-<stack uuid part>` and `<prefix>` a synth-time literal unique to the
    construct (the stack's name, shortened, and a hash of its name and the construct's path).

    The runtime gets two prefixes instead of a list that grows with every pool, and IAM grants
    one pattern (`<prefix>-*-Q-*`) instead of an ARN per pool.
    """

    prefix: str
    base: str

    def queue(self, pool: str) -> str:
        return f"{self.base}{QUEUE_INFIX}{pool}"

    def dlq(self, pool: str) -> str:
        return f"{self.base}{DLQ_INFIX}{pool}"

    def function(self, pool: str) -> str:
        return f"{self.base}-{pool}"

    @property
    def function_prefix(self) -> str:
        return f"{self.base}-"

    @property
    def queue_url_prefix(self) -> str:
        return (
            f"https://sqs.{Aws.REGION}.{Aws.URL_SUFFIX}/{Aws.ACCOUNT_ID}/{self.base}{QUEUE_INFIX}"
        )

    @property
    def queue_pattern(self) -> str:
        """Every pool queue of this deployment (not the DLQs), as an ARN resource pattern."""
        return (
            f"arn:{Aws.PARTITION}:sqs:{Aws.REGION}:{Aws.ACCOUNT_ID}:{self.prefix}-*{QUEUE_INFIX}*"
        )

    @property
    def function_pattern(self) -> str:
        """Every pool function of this deployment, as an ARN pattern."""
        return f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{Aws.ACCOUNT_ID}:function:{self.prefix}-*"


def pool_names(scope: Construct) -> PoolNames:
    """The pool resource names of the construct `scope`."""
    stack = Stack.of(scope)
    below = scope.node.scopes[scope.node.scopes.index(stack) + 1 :]
    path = "/".join(part.node.id for part in below)
    if Token.is_unresolved(stack.stack_name):  # a nested stack: its name is known at deploy
        readable, unique = "shepherd", scope.node.path
    else:
        readable = _UNSAFE.sub("-", stack.stack_name).strip("-")[:READABLE_MAX].strip("-")
        unique = f"{stack.stack_name}/{path}"
    digest = hashlib.sha256(unique.encode()).hexdigest()[:_HASH_LENGTH]
    prefix = f"{readable or 'shepherd'}-{digest}"
    return PoolNames(prefix=prefix, base=f"{prefix}-{STACK_UUID_PART}")


def nag_text(stack: Stack, value: str) -> str:
    """A resource as cdk-nag writes it in a finding's id: `<AWS::Region>` for a pseudo
    parameter or a Ref, `<Id.Attr>` for an attribute, anything else as its JSON."""
    resolved = stack.resolve(value)
    if isinstance(resolved, str):
        return resolved
    parts = resolved["Fn::Join"][1] if "Fn::Join" in resolved else [resolved]
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif "Ref" in part:
            out.append(f"<{part['Ref']}>")
        elif "Fn::GetAtt" in part:
            out.append(f"<{part['Fn::GetAtt'][0]}.{part['Fn::GetAtt'][1]}>")
        else:
            out.append(json.dumps(part, separators=(",", ":")))
    return "".join(out)
