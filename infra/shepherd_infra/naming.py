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
import re

from aws_cdk import Stack, Token
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
