"""What a deploy would refuse, refused at synth, with the cause and the fix.

* A function's environment over Lambda's 4 KB (the values as deployed: a reference is counted
  at the longest it can resolve to).
* A stack over CloudFormation's 500 resources (the CDK refuses too, later, without saying what
  to do).
* A template over CloudFormation's 1 MB (checked on the synthesized file).

The first two run as the construct's validation, before anything is written; the template's
size can only be known once it is, so a validation plugin on the construct's Stage reads it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import (
    CfnResource,
    IPolicyValidationContext,
    IPolicyValidationPlugin,
    PolicyValidationPluginReport,
    PolicyViolatingResource,
    PolicyViolation,
    Stack,
    Stage,
    Validations,
)
from constructs import Construct, IValidation

from shepherd_infra.naming import STACK_UUID_PART

LAMBDA_ENVIRONMENT_BYTES = 4 * 1024  # Lambda: "Total size of all environment variables: 4 KB"
STACK_RESOURCES = 500  # CloudFormation: resources declared in a template
TEMPLATE_BYTES = 1_000_000  # CloudFormation: a template body from S3, 1 MB
# queue, DLQ, queue policy, function, role, event source mapping (the pools share a log group)
POOL_RESOURCES = 6
SCHEDULES_RESOURCES = 5  # with any schedule: group, role, its policy, dead-letter queue, policy

# The longest a pseudo parameter resolves to (region `ap-southeast-4`, partition `aws-us-gov`,
# suffix `amazonaws.com.cn`; a stack's name is at most 128 characters, its id an ARN with it).
PSEUDO_LENGTH = {
    "AWS::Region": 14,
    "AWS::AccountId": 12,
    "AWS::Partition": 10,
    "AWS::URLSuffix": 16,
    "AWS::StackName": 128,
    "AWS::StackId": 220,
}
# The longest a Ref to a resource of a type resolves to: a queue's URL (https, host, account
# and a name of up to 80), a table's name (255), a bucket's (63), a bus's (256), a mapping's
# id (36), a function's name (64), a parameter's value (unknown: 4 KB).
REF_LENGTH = {
    "AWS::SQS::Queue": 58 + 80,
    "AWS::DynamoDB::Table": 255,
    "AWS::S3::Bucket": 63,
    "AWS::Events::EventBus": 256,
    "AWS::Lambda::EventSourceMapping": 36,
    "AWS::Lambda::Function": 64,
}
UNKNOWN_LENGTH = 256
ARN_LENGTH = 256


class DeployLimits(Construct):
    """Checks, at synth, a Shepherd's functions' environments and its stack's resource count;
    and registers the template size check on its Stage (once per Stage)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        environments: Mapping[str, Mapping[str, str]],
        pools: int,
        schedules: int = 0,
    ) -> None:
        """`environments`: each function's environment, by the function's path."""
        super().__init__(scope, construct_id)
        self.node.add_validation(_Check(self, environments, pools, schedules))
        stage = Stage.of(scope)
        if stage is not None and stage.node.try_find_child(TemplateSize.MARKER) is None:
            Construct(stage, TemplateSize.MARKER)
            Validations.of(stage).add_plugins(TemplateSize())


@jsii.implements(IValidation)
class _Check:
    def __init__(
        self,
        owner: Construct,
        environments: Mapping[str, Mapping[str, str]],
        pools: int,
        schedules: int = 0,
    ) -> None:
        self._owner = owner
        self._environments = environments
        self._pools = pools
        self._schedules = schedules

    def validate(self) -> list[str]:
        stack = Stack.of(self._owner)
        estimate = Estimate(
            types={
                stack.resolve(stack.get_logical_id(r)): r.cfn_resource_type
                for r in _resources(stack)
            },
            stack_uuid_part=stack.resolve(STACK_UUID_PART),
        )
        errors = [
            e
            for path, env in self._environments.items()
            if (e := _environment_error(path, stack.resolve(env), estimate))
        ]
        resources = _resource_error(stack, self._pools, self._schedules)
        return errors + ([resources] if resources else [])


def _resources(stack: Stack) -> Iterator[CfnResource]:
    """The resources of `stack`'s own template (not those of a nested stack inside it)."""
    for node in stack.node.find_all():
        if isinstance(node, CfnResource) and Stack.of(node) is stack:
            yield node


@dataclass(frozen=True)
class Estimate:
    """How long a resolved template value can be once deployed."""

    types: Mapping[str, str]  # logical ID -> resource type, of the stack's resources
    stack_uuid_part: Any  # naming.STACK_UUID_PART, resolved: 8 characters once deployed

    def length(self, value: Any) -> int:
        if isinstance(value, str):
            return len(value.encode())
        if isinstance(value, int | float | bool):
            return len(json.dumps(value))
        if isinstance(value, dict) and len(value) == 1:
            return self._function(value)
        return len(json.dumps(value)) + UNKNOWN_LENGTH

    def _function(self, value: dict[str, Any]) -> int:
        ((fn, arg),) = value.items()
        if fn == "Ref":
            if arg in PSEUDO_LENGTH:
                return PSEUDO_LENGTH[arg]
            return REF_LENGTH.get(self.types.get(arg, ""), UNKNOWN_LENGTH)
        if fn == "Fn::GetAtt":
            return ARN_LENGTH
        if fn == "Fn::Join":
            separator, parts = arg
            seps = len(separator) * max(len(parts) - 1, 0)
            return seps + sum(self.length(p) for p in parts)
        if value == self.stack_uuid_part:
            return 8
        if fn in ("Fn::Select", "Fn::Split"):  # at most as long as what it is taken from
            return self.length(arg[1])
        return len(json.dumps(value)) + UNKNOWN_LENGTH


def _environment_error(path: str, variables: Mapping[str, Any], estimate: Estimate) -> str | None:
    sizes = {
        name: len(json.dumps(name)) + 1 + 2 + estimate.length(value)
        for name, value in variables.items()
    }
    total = 2 + sum(sizes.values()) + max(len(sizes) - 1, 0)  # as a JSON object
    if total <= LAMBDA_ENVIRONMENT_BYTES:
        return None
    largest = ", ".join(
        f"{name} ({size:,} bytes)"
        for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
    )
    return (
        f"{path}: its environment can reach {total:,} bytes once deployed, and Lambda "
        f"refuses more than {LAMBDA_ENVIRONMENT_BYTES:,} (4 KB) of environment variables. "
        f"Largest: {largest}. Fix: keep large or growing values out of the environment (a "
        "pool's `environment` in `pool_settings`, `event_owners`): put them in a parameter or "
        "a secret the code reads, or in a layer"
    )


def _resource_error(stack: Stack, pools: int, schedules: int = 0) -> str | None:
    counts = Counter(r.cfn_resource_type for r in _resources(stack))
    total = sum(counts.values())
    if total <= STACK_RESOURCES:
        return None
    heaviest = ", ".join(f"{t} {n}" for t, n in counts.most_common(4))
    return (
        f"stack {stack.node.path}: {total} resources, and CloudFormation refuses a stack of "
        f"more than {STACK_RESOURCES} ({heaviest}). Each agent pool takes {POOL_RESOURCES} "
        f"(this Shepherd has {pools}), each schedule 1 (it has {schedules}; their group, role "
        f"and dead-letter queue {SCHEDULES_RESOURCES} more). Fix: move some workflow "
        "definitions, with the pools only they use, to a second Shepherd construct in another "
        "stack (or in a NestedStack of this one), or give pools that do similar work one pool "
        "name"
    )


@jsii.implements(IPolicyValidationPlugin)
class TemplateSize:
    """After synthesis: every template of the Stage within CloudFormation's 1 MB."""

    MARKER = "ShepherdTemplateSizeCheck"

    @property
    def name(self) -> str:
        return "shepherd-deploy-limits"

    @property
    def version(self) -> str | None:
        return "1"

    @property
    def rule_ids(self) -> list[str] | None:
        return ["TemplateSize"]

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        violations = []
        for path in context.template_paths:
            size = Path(path).stat().st_size
            if size > TEMPLATE_BYTES:
                violations.append(
                    PolicyViolation(
                        rule_name="TemplateSize",
                        description=(
                            f"{Path(path).name} is {size:,} bytes, and CloudFormation refuses "
                            f"a template over {TEMPLATE_BYTES:,} (1 MB)"
                        ),
                        fix=(
                            "Move some workflow definitions, with the pools only they use, "
                            "to a second Shepherd construct in another stack or a NestedStack"
                        ),
                        violating_resources=[
                            PolicyViolatingResource(
                                locations=["(the whole template)"],
                                resource_logical_id="Template",
                                template_path=path,
                            )
                        ],
                    )
                )
        return PolicyValidationPluginReport(success=not violations, violations=violations)
