"""The integrations role: least privilege from the app's Amazon States Language definitions.

Every `*.asl.json` / `*.asl.yaml` file the app ships is read at synth, and each Task's Lambda
function, service call and `aws-sdk` API becomes exactly the grant `shepherd.asl.grants` derives
(the function named, the queue, topic, table, index, bucket or object the parameters name;
`*` only where a path or an expression gives the resource, or where nothing names one, each
such grant listed as a synth warning naming the file and the state). A Task whose grant cannot
be derived fails the synth, naming the file and the state.

This is the role the integration pool runs as (`shepherd.asl.workflow.INTEGRATIONS_POOL`, the
pool whose built-in agent carries out an ASL state machine's service Tasks, its
`states:startExecution` Tasks and the Lambda functions mapped to it, as supervised units:
`shepherd.asl.engine`). Its inline policy `Integrations` holds the definitions' grants and
nothing else; the engine's own table, queue and payload access is granted with the pool's
function, as every pool's is, in the role's other inline policy (`Shepherd`). An app with no
ASL Task to grant gets no role (its integration pool, if it has one, gets a role of its own).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from aws_cdk import Annotations, Stack, aws_iam
from constructs import Construct
from shepherd.adapters.sdk_models import sdk_knows
from shepherd.asl import asl_files, load_file, workflow_type
from shepherd.asl.grants import DYNAMIC, Env, Plan, plan

from shepherd_infra.nag import acknowledge
from shepherd_infra.naming import nag_text
from shepherd_infra.runtime import InlineRole

WILDCARD_REASON = (
    "Derived from the app's ASL definitions (shepherd.asl.grants): a resource a path or an "
    "expression gives at run time is granted on '*' (EventBridge: every bus), an unqualified "
    "Lambda function with its versions and aliases (':*'), as CDK's LambdaInvoke grants it; "
    "each such grant is listed by the synth, naming the file and the state"
)

# IAM's quota on the inline policies of one role, in characters without whitespace.
ROLE_POLICY_LIMIT = 10_240
# What the role's other policy (`Shepherd`: the engine's table, queues, payloads and logs, as
# every pool function's) takes of that quota, with room to spare: measured 1,135 characters as
# the template writes it, references unresolved (tests/infra/test_infra_integrations.py), about
# twice that once they are.
ENGINE_POLICY_RESERVE = 2_500


def asl_plans(
    definitions_dir: Path, env: Env, workflow_types: Collection[str]
) -> Mapping[Path, Plan]:
    """Each ASL file's plan; a ValueError naming every file and state whose grant cannot be
    derived (all of them at once)."""
    plans: dict[Path, Plan] = {}
    problems: list[str] = []
    for path in asl_files(definitions_dir):
        found = plan(load_file(path), env, workflow_types=workflow_types, knows=sdk_knows)
        problems += [f"{path}: {r.where}: {r.reason}" for r in found.refusals]
        plans[path] = found
    if problems:
        raise ValueError(
            "the integrations role cannot be granted what these Tasks need:\n" + "\n".join(problems)
        )
    return plans


def asl_workflow_types(definitions_dir: Path) -> set[str]:
    return {workflow_type(path) for path in asl_files(definitions_dir)}


class IntegrationsRole(Construct):
    """The role (`role`, None when there is nothing to grant) holding exactly the grants the
    ASL definitions of `definitions_dir` need; `plans` by file, for a user to read or test.
    `pool`: the integration pool's function runs as it (its other inline policy, `Shepherd`,
    then holds the engine's access that function is granted)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        definitions_dir: Path,
        workflow_types: Collection[str],
        pool: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        env = Env(stack.partition, stack.region, stack.account)
        self.plans = asl_plans(definitions_dir, env, workflow_types)
        total = sum(self.plans.values(), Plan())
        self.role: aws_iam.Role | None = None
        statements = total.statements()
        if not statements:
            return
        size = policy_size(stack, statements)
        if size > ROLE_POLICY_LIMIT - ENGINE_POLICY_RESERVE:
            raise ValueError(
                f"the integrations role's policy would be about {size} characters, over IAM's "
                f"{ROLE_POLICY_LIMIT} for a role's inline policies with the engine's access "
                f"beside it ({ENGINE_POLICY_RESERVE} kept for it: the integration pool's "
                f"function runs as this role): the ASL definitions name "
                f"{sum(len(s['Resource']) for s in statements)} resources; deploy some of "
                "them from another stack, or call some services from agents"
            )
        document = aws_iam.PolicyDocument(
            statements=[
                aws_iam.PolicyStatement(actions=[s["Action"]], resources=s["Resource"])
                for s in statements
            ]
        )
        description = "Shepherd integration pool: the ASL definitions' grants"
        self.role = (
            InlineRole(self, "Role", description=description, policies={"Integrations": document})
            if pool
            else aws_iam.Role(
                self,
                "Role",
                assumed_by=aws_iam.ServicePrincipal("lambda.amazonaws.com"),
                description=description,
                inline_policies={"Integrations": document},
            )
        )
        for resource in sorted({r for s in statements for r in s["Resource"] if "*" in r}):
            acknowledge(
                self, f"AwsSolutions-IAM5[Resource::{nag_text(stack, resource)}]", WILDCARD_REASON
            )
        for path, found in self.plans.items():
            for grant in found.wildcards():
                why = (
                    "the resource is given at run time"
                    if grant.why == DYNAMIC
                    else "no parameter names a resource the construct knows"
                )
                Annotations.of(self).add_warning_v2(
                    "shepherd:integration-wildcard",
                    f"{path.name}: {grant.where}: {grant.action} on "
                    f"{nag_text(stack, grant.resource)} ({why})",
                )


def policy_size(stack: Stack, statements: list[dict[str, Any]]) -> int:
    """The policy's length as IAM counts it (no whitespace), pseudo parameters written as
    cdk-nag writes them (`<AWS::AccountId>`: longer than any value they take, so an
    overestimate)."""
    rendered = [{**s, "Resource": [nag_text(stack, r) for r in s["Resource"]]} for s in statements]
    document = {"Version": "2012-10-17", "Statement": rendered}
    return len(json.dumps(document, separators=(",", ":")))
