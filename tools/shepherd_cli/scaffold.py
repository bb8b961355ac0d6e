"""`shepherd init DIR`: a new project that uses Shepherd as a library.

It holds one definition (`statemachines/welcome.yaml`), its agents (`src/<package>/agents.py`),
unit tests on `shepherd.testing`, a CDK app using the `Shepherd` construct, a Makefile
(`make test`, `make demo`, `make synth`) and a README. Its `pyproject.toml` names the agent
modules once (`[tool.shepherd]`), for `shepherd validate`, `shepherd local`, the tests and the
CDK app alike, and depends on Shepherd in a form a whole team can install
(`shepherd_cli.sources`: a version, a wheel copied into the project, or a pinned git URL).
"""

from __future__ import annotations

import json
import keyword
import re
import shutil
from pathlib import Path

from shepherd_cli.sources import DISTRIBUTION, WHEEL_PIN, WHEELS_DIR, Source, SourceError

__all__ = ["DISTRIBUTION", "ScaffoldError", "Source", "SourceError", "files", "scaffold"]

# The CDK CLI the scaffold pins: the one this repository pins (package.json, package-lock.json;
# tests/unit/test_scaffold.py keeps them equal), and the oldest Node it is supported on.
CDK_CLI_VERSION = "2.1149.0"
CDK_CLI_INTEGRITY = "sha512-Cj6iGj/lVCf8iSFNZeSjpTbh42yO1uINg9pSYcBJ3wfTwWRk0xQGu2YAi/iON+RWEWGJlJNT+TNewBx05Wd9Sw=="
NODE_MAJOR = 22
# The uv a project's `make dev` installs with: Shepherd's own (its Makefile's UV_VERSION).
UV_VERSION = "0.13.9"

# The CDK feature flags of the scaffold's cdk.json: the ones Shepherd's own app is built and
# tested with (tests/unit/test_scaffold.py keeps them equal to the repository's cdk.json).
CDK_CONTEXT: dict[str, object] = {
    "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
    "@aws-cdk/core:checkSecretUsage": True,
    "@aws-cdk/core:target-partitions": ["aws"],
    "@aws-cdk/aws-iam:minimizePolicies": True,
    "@aws-cdk/core:validateSnapshotRemovalPolicy": True,
    "@aws-cdk/core:enablePartitionLiterals": True,
    "@aws-cdk/aws-apigateway:disableCloudWatchRole": True,
    "@aws-cdk/aws-apigateway:requestValidatorUniqueId": True,
    "@aws-cdk/aws-apigateway:usagePlanKeyOrderInsensitiveId": True,
    "@aws-cdk/aws-apigateway:authorizerChangeDeploymentLogicalId": True,
    "@aws-cdk/aws-events:eventsTargetQueueSameAccount": True,
    "@aws-cdk/aws-iam:standardizedServicePrincipals": True,
    "@aws-cdk/aws-lambda:useCdkManagedLogGroup": True,
    "@aws-cdk/aws-sqs:enforceSsl": True,
    "@aws-cdk/aws-kms:aliasNameRef": True,
    "@aws-cdk/aws-kms:applyImportedAliasPermissionsToPrincipal": True,
    "@aws-cdk/aws-lambda:createNewPoliciesWithAddToRolePolicy": True,
    "@aws-cdk/aws-dynamodb:resourcePolicyPerReplica": True,
    "@aws-cdk/aws-dynamodb:retainTableReplica": True,
    "@aws-cdk/core:explicitStackTags": True,
    "@aws-cdk/aws-lambda:useDefaultLogRetention": False,
}


class ScaffoldError(ValueError):
    """The target folder or the names are unusable."""


def package_name(folder: Path) -> str:
    name = re.sub(r"\W+", "_", folder.name.lower()).strip("_")
    if not name or name[0].isdigit():
        name = f"app_{name}"
    if keyword.iskeyword(name) or name.startswith("shepherd"):
        name = f"{name}_app"
    return name


def _stack_name(package: str) -> str:
    return "".join(part.capitalize() for part in package.split("_")) or "App"


def _package_json(package: str) -> dict[str, object]:
    return {
        "name": package.replace("_", "-"),
        "private": True,
        "description": "Pins the AWS CDK CLI that synthesizes and deploys infra/ (cdk.json)",
        "engines": {"node": f">={NODE_MAJOR}"},
        "devDependencies": {"aws-cdk": CDK_CLI_VERSION},
    }


def _package_lock(package: str) -> dict[str, object]:
    name = package.replace("_", "-")
    return {
        "name": name,
        "lockfileVersion": 3,
        "requires": True,
        "packages": {
            "": {
                "name": name,
                "engines": {"node": f">={NODE_MAJOR}"},
                "devDependencies": {"aws-cdk": CDK_CLI_VERSION},
            },
            "node_modules/aws-cdk": {
                "version": CDK_CLI_VERSION,
                "integrity": CDK_CLI_INTEGRITY,
                "dev": True,
                "license": "Apache-2.0",
                "bin": {"cdk": "bin/cdk"},
                "engines": {"node": ">= 18.0.0"},
            },
        },
    }


def files(package: str, source: Source) -> dict[str, str]:
    """Every text file of the scaffold, by path relative to its folder."""
    runtime = source.requirement()
    tools = source.requirement("cdk,cli")
    return {
        "pyproject.toml": PYPROJECT.format(package=package, runtime=runtime, tools=tools),
        "Makefile": MAKEFILE.format(
            pip_args=source.pip_args(),
            node_major=NODE_MAJOR,
            uv_version=UV_VERSION,
            pinned_wheel=PINNED_WHEEL if source.wheel is not None else "",
        ),
        "README.md": README.format(
            package=package,
            source=source.describe(),
            dist=DISTRIBUTION,
            version=source.version,
            wheels=WHEELS_DIR,
        ),
        ".gitignore": ".venv/\ncdk.out/\n.shepherd/\n__pycache__/\n*.egg-info/\nnode_modules/\n",
        "package.json": json.dumps(_package_json(package), indent=2) + "\n",
        "package-lock.json": json.dumps(_package_lock(package), indent=2) + "\n",
        "cdk.json": json.dumps(
            {"app": ".venv/bin/python infra/app.py", "context": CDK_CONTEXT}, indent=2
        )
        + "\n",
        "statemachines/welcome.yaml": DEFINITION,
        f"src/{package}/__init__.py": f'"""{package}: workflows on Shepherd."""\n',
        f"src/{package}/agents.py": AGENTS,
        "tests/test_welcome.py": TESTS.format(package=package),
        "infra/app.py": CDK_APP.format(package=package, stack=_stack_name(package)),
    }


def scaffold(folder: Path, source: Source) -> list[Path]:
    """Write the project into `folder` (new, or empty); the files written."""
    if folder.exists() and any(folder.iterdir()):
        raise ScaffoldError(f"{folder} exists and is not empty")
    package = package_name(folder.resolve())
    written = []
    for relative, text in files(package, source).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    pin = source.wheel_pin()
    if source.wheel is not None and pin is not None:  # Shepherd itself, committed with the project
        (folder / WHEELS_DIR).mkdir()
        written.append(Path(shutil.copy2(source.wheel, folder / WHEELS_DIR / source.wheel.name)))
        (folder / WHEEL_PIN).write_text(pin, encoding="utf-8")
        written.append(folder / WHEEL_PIN)
    return written


PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{package}"
version = "0.1.0"
requires-python = ">=3.11"
# What the agents need at run time: Shepherd's runtime (its Lambda layer is built from it).
dependencies = ["{runtime}"]

[project.optional-dependencies]
# The CDK construct (extra `cdk`), the local stack (extra `cli`) and the tests.
dev = ["{tools}", "pytest==9.2.0"]

[tool.setuptools.packages.find]
where = ["src"]

# The one list of agent modules: `shepherd validate` and `shepherd local` run them, the tests
# (MemoryEngine.from_project) and the CDK app (AgentCode.from_project) take them from here.
[tool.shepherd]
definitions = "statemachines"
agent-modules = ["{package}.agents"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

MAKEFILE = """\
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP_ARGS ?= {pip_args}
PORT ?= 8080

.PHONY: dev test demo local synth node

# $(call install,ARGS): ARGS installed into .venv by uv (its downloads in parallel, from its
# cache when it has them), or by pip when uv fails (uv reads no pip.conf). Both take PIP_ARGS.
UV_VERSION := {uv_version}
define install
$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION) \\
\t&& $(BIN)/uv pip install --quiet --python $(BIN)/python $(1) \\
\t|| $(BIN)/python -m pip install --quiet $(1)
endef

$(STAMP): pyproject.toml
\ttest -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
{pinned_wheel}\t$(call install,$(PIP_ARGS) -e '.[dev]')
\ttouch $(STAMP)

dev: $(STAMP)

# Unit tests: the definition and the agents on Shepherd's in-memory engine (milliseconds).
test: $(STAMP)
\t$(BIN)/pytest -q

# Shepherd locally (moto, no AWS account); Ctrl-C stops it.
local: $(STAMP)
\t$(BIN)/shepherd local --port $(PORT)

# One workflow on the local stack: start Shepherd locally, run it to its end, stop everything.
demo: $(STAMP)
\t$(BIN)/shepherd run welcome --input '{{"email": "ada@example.com"}}'

# Node {node_major}+ for the CDK CLI (Node 20 is end-of-life): the machine's own when it is new
# enough, else Node {node_major} from the npm registry (npm's `node` package) into .shepherd/node,
# first on every recipe's PATH.
NODE_DIR := .shepherd/node
export PATH := $(CURDIR)/$(NODE_DIR)/node_modules/.bin:$(PATH)

node: $(NODE_DIR)/.installed

$(NODE_DIR)/.installed:
\t@if node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= {node_major} ? 0 : 1)' 2>/dev/null; then mkdir -p $(NODE_DIR); else echo "Node {node_major} for the CDK CLI into $(NODE_DIR)"; npm install --prefix $(NODE_DIR) --no-audit --no-fund --silent node@{node_major}; fi
\ttouch $@

# The CDK CLI pinned in package.json (and package-lock.json), as Shepherd's own repository
# pins it: every machine synthesizes and deploys with the same CLI.
NODE_STAMP := node_modules/.installed

$(NODE_STAMP): package.json package-lock.json | node
\tnpm ci --no-audit --no-fund
\ttouch $(NODE_STAMP)

# The CloudFormation template (no Docker, no AWS credentials).
synth: $(STAMP) node $(NODE_STAMP)
\tnpx cdk synth --quiet
"""

# A wheel source: the wheel first, checked against its sha256 (`wheels/requirements.txt`), so
# the version requirement after it is met by this file and never by an index's.
PINNED_WHEEL = "\t$(call install,--no-deps --require-hashes -r wheels/requirements.txt)\n"

README = """\
# {package}

Workflows on Shepherd (Scheduler-Agent-Supervisor on AWS serverless).

| path | what |
|---|---|
| `statemachines/welcome.yaml` | the workflow definition: create an account (a VIP's approved by a person first), then send a welcome mail, and tips a day later if asked; the account is deleted if the mail fails for good |
| `src/{package}/agents.py` | the agent functions the definition names |
| `tests/test_welcome.py` | unit tests: the workflow on Shepherd's in-memory engine |
| `infra/app.py` | the CDK app: the `Shepherd` construct with this definition and these agents |

```bash
make test    # the unit tests, in milliseconds
make demo    # start Shepherd locally (no AWS account), run one workflow, stop
make local   # Shepherd locally until Ctrl-C; then: .venv/bin/shepherd start welcome --input '{{"email": "a@b.c"}}' --wait
make synth   # the CloudFormation template (the pinned CDK CLI on Node 22+; no Docker, no credentials)
```

Deploy with `npx cdk deploy` after `make synth` (the CDK CLI `package.json` pins; credentials for
the account; `npx cdk bootstrap` once per account and region). Add a step: name its `Agent` and
`Pool` in the definition and register
the agent with `@registry.agent("...")`; a new pool gets its own queue and Lambda function. A
new agent module goes in `[tool.shepherd] agent-modules` (`pyproject.toml`), the one list
`shepherd validate`, `shepherd local`, the tests and the CDK app read; the synth fails if a
pool's code does not register an agent its steps name.

## Installing Shepherd

Shepherd is the distribution `{dist}` (the import package is `shepherd`).
This project gets it as {source}.

`make dev` installs it into `.venv` (by uv; by pip when uv cannot reach the index), with its
extras `cdk` (the CDK construct) and `cli` (the local stack). Every way below works the same on
a teammate's laptop and in CI:

- **From a package index**, once Shepherd is published there (or on your private index):
  `"{dist}=={version}"` in `pyproject.toml` (and `"{dist}[cdk,cli]=={version}"` in `dev`);
  `make dev PIP_ARGS='--index-url https://...'` for a private index.
- **From a wheel file**, before it is published (Shepherd is not on the public index yet): put
  the wheel in `{wheels}/` with its hash in `{wheels}/requirements.txt`
  (`./{wheels}/<file>.whl --hash=sha256:<sha256sum of it>`) and commit both, keep the version
  requirement above, and `make dev` installs that file, checked against its hash, then the
  project (`PIP_ARGS = --find-links {wheels}` in the `Makefile`). Build one from Shepherd's
  repository with `python -m build` (it writes `dist/*.whl`).
- **From git**, pinned to a commit or a release tag, never a branch:
  `"{dist} @ git+https://github.com/<org>/shepherd.git@<commit>"` (and
  `"{dist}[cdk,cli] @ git+...@<commit>"` in `dev`).
"""

DEFINITION = """\
Name: welcome
Comment: >-
  Create an account and send a welcome mail; delete the account if the mail cannot go. A VIP
  account waits for a person's review first; an account that asks for tips gets them a day later.
InputSchema:
  type: object
  required: [email]
  properties:
    email: {type: string, minLength: 3}
    vip: {type: boolean}
    tips: {type: boolean}
Steps:
  - Name: create_account
    Agent: create_account
    Pool: accounts
    TimeoutSeconds: 30
    Retry: {MaxAttempts: 3, IntervalSeconds: 1, BackoffRate: 2}
    Compensation:
      Agent: delete_account
      Pool: accounts
      TimeoutSeconds: 30
  - Name: vip_review
    DependsOn: [create_account]
    Comment: A person approves a VIP account (POST .../steps/vip_review/approve or /reject).
    Condition: {Variable: $.input.vip, BooleanEquals: true}
    Approval: {TimeoutSeconds: 86400}
  - Name: send_welcome
    DependsOn: [create_account, vip_review]   # after the review, or its skip
    Agent: send_welcome
    Pool: mail
    TimeoutSeconds: 30
    Retry: {MaxAttempts: 2, IntervalSeconds: 1, NonRetryableErrors: [Undeliverable]}
  - Name: a_day_later
    DependsOn: [send_welcome]
    Condition: {Variable: $.input.tips, BooleanEquals: true}
    Wait: {Seconds: 86400}
  - Name: send_tips
    DependsOn: [a_day_later]
    Condition: {Variable: $.input.tips, BooleanEquals: true}
    Agent: send_tips
    Pool: mail
    TimeoutSeconds: 30
"""

AGENTS = '''\
"""The agents of `welcome`. Each gets an AgentContext; what it returns is the step's output.

Pass `ctx.idempotency_key` to the services you call: it is the same for every attempt of a
step, so a retried attempt cannot act twice.
"""

from __future__ import annotations

from typing import Any

from shepherd import AgentContext, AgentRegistry, PermanentError

registry = AgentRegistry()


@registry.agent("create_account")
def create_account(ctx: AgentContext) -> dict[str, Any]:
    return {"account_id": f"acct-{ctx.idempotency_key[:12]}", "email": ctx.input["email"]}


@registry.agent("delete_account")
def delete_account(ctx: AgentContext) -> dict[str, Any]:
    # A compensation: undo what the step may have done (nothing to undo is fine).
    return {"deleted": ctx.step_output["account_id"] if ctx.step_output else None}


@registry.agent("send_welcome")
def send_welcome(ctx: AgentContext) -> dict[str, Any]:
    email = ctx.input["email"]
    if email.endswith("@invalid"):
        raise PermanentError(f"{email} cannot receive mail", name="Undeliverable")
    account = ctx.dependencies["create_account"]["account_id"]
    return {"sent_to": email, "account_id": account}


@registry.agent("send_tips")
def send_tips(ctx: AgentContext) -> dict[str, Any]:
    return {"tips_to": ctx.input["email"]}
'''

TESTS = '''\
"""The workflow on Shepherd's in-memory engine: real engine, manual clock, milliseconds.

`MemoryEngine.from_project` runs the definitions and agent modules `[tool.shepherd]` names;
`overrides` swap an agent for one engine (one test) only. A test answers an Approval step
(`approve`, `reject`), fires a Wait step's timer (`fire_wait`) and reads the path the workflow
took (`outcome.path`, `outcome.skipped`, `outcome.undone`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shepherd import AgentContext
from shepherd.testing import AttemptOutcome, MemoryEngine, StepStatus, WorkflowStatus

from {package}.agents import create_account

PROJECT = Path(__file__).resolve().parents[1]


def test_a_welcome_creates_the_account_and_sends_the_mail() -> None:
    engine = MemoryEngine.from_project(PROJECT)
    outcome = engine.run(engine.start("welcome", {{"email": "ada@example.com"}}))
    assert outcome.status is WorkflowStatus.SUCCEEDED
    assert outcome.output["send_welcome"]["sent_to"] == "ada@example.com"
    assert outcome.path == ("create_account", "send_welcome")
    assert outcome.skipped == ("vip_review", "a_day_later", "send_tips")


def test_an_undeliverable_mail_deletes_the_account() -> None:
    engine = MemoryEngine.from_project(PROJECT)
    outcome = engine.run(engine.start("welcome", {{"email": "nobody@invalid"}}))
    assert outcome.status is WorkflowStatus.COMPENSATED
    mail = outcome.steps["send_welcome"]
    assert mail.error is not None and mail.error.name == "Undeliverable"
    assert outcome.compensations["create_account"].status is StepStatus.SUCCEEDED
    assert outcome.undone == ("create_account",)


def test_a_flaky_step_is_retried() -> None:
    def flaky(ctx: AgentContext) -> dict[str, Any]:
        if ctx.attempt == 1:
            raise ConnectionError("the account service blinked")
        return create_account(ctx)

    engine = MemoryEngine.from_project(PROJECT, overrides={{"create_account": flaky}})
    outcome = engine.run(engine.start("welcome", {{"email": "ada@example.com"}}))
    assert outcome.status is WorkflowStatus.SUCCEEDED
    first, second = outcome.steps["create_account"].attempts
    assert first.outcome is AttemptOutcome.FAILED and second.outcome is AttemptOutcome.SUCCEEDED
    assert first.error is not None and first.error.message == "the account service blinked"


def test_a_vip_waits_for_a_persons_review() -> None:
    engine = MemoryEngine.from_project(PROJECT)
    approved = engine.start("welcome", {{"email": "vip@example.com", "vip": True}})
    engine.run(approved, until_resting=True)            # the review waits for a person
    assert engine.awaiting_approval(approved) == ("vip_review",)
    engine.approve(approved, "vip_review", comment="a known customer")
    assert engine.run(approved).path == ("create_account", "vip_review", "send_welcome")

    rejected = engine.start("welcome", {{"email": "bot@example.com", "vip": True}})
    outcome = engine.run(rejected, approvals={{"vip_review": "reject"}})
    assert outcome.status is WorkflowStatus.COMPENSATED  # rejected: the account is deleted
    assert outcome.undone == ("create_account",)


def test_the_tips_go_out_a_day_later() -> None:
    engine = MemoryEngine.from_project(PROJECT)
    workflow = engine.start("welcome", {{"email": "ada@example.com", "tips": True}})
    engine.run(workflow, until_resting=True)            # resting until a day later
    assert engine.resting(workflow) == ("a_day_later",)
    engine.fire_wait(workflow, "a_day_later")           # no day of waiting: the clock jumps
    outcome = engine.run(workflow)
    assert outcome.steps["send_tips"].status is StepStatus.SUCCEEDED
    assert outcome.path == ("create_account", "send_welcome", "a_day_later", "send_tips")
'''

CDK_APP = '''\
#!/usr/bin/env python3
"""The CDK app (cdk.json): one stack with the Shepherd construct, this project's definitions
and agents. `make synth`, or `npx cdk deploy` (the CLI package.json pins)."""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk import App, CfnOutput, Stack
from shepherd_infra import AgentCode, Shepherd, add_checks

ROOT = Path(__file__).resolve().parents[1]


def build(app: App) -> Stack:
    stack = Stack(app, "{stack}")
    shepherd = Shepherd(
        stack,
        "Shepherd",
        definitions_dir=ROOT / "statemachines",
        # src/ with the modules [tool.shepherd] agent-modules names (pyproject.toml)
        agents=AgentCode.from_project(ROOT, exclude=["*.egg-info"]),
        # The pools deployed (commit it): a pool no definition names any more is retired,
        # not deleted, until released (release_pools=[...]).
        pool_ledger=ROOT / "statemachines" / "shepherd-pools.lock",
    )
    CfnOutput(stack, "ApiUrl", value=shepherd.api_url)
    CfnOutput(stack, "EventBusName", value=shepherd.bus.event_bus_name)
    return stack


if __name__ == "__main__":
    # cdk.json's feature flags also when run as `python infra/app.py` (the CDK CLI passes them).
    app = App(context=json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))["context"])
    build(app)
    add_checks(app)  # cdk-nag: the construct's findings are acknowledged with their reasons
    app.synth()
'''
