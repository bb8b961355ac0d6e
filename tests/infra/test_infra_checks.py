"""cdk-nag (AwsSolutions + Serverless) and cfn-lint on the synthesized template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import App, Stack, aws_sqs
from cfnlint.api import lint
from infra_support import Synth, acknowledged
from shepherd_infra.nag import MIN_REASON_LENGTH, acknowledge, add_checks

# Every finding the app acknowledges, reviewed. A new acknowledgment must be added here on purpose.
REVIEWED = {
    "AwsSolutions-IAM5[Resource::*]",
    "AwsSolutions-COG4",
    "AwsSolutions-APIG3",
    # API logging is opt-in (it needs the account's API Gateway CloudWatch role).
    "AwsSolutions-APIG1",
    "AwsSolutions-APIG6",
    "Serverless-APIGWAccessLogging",
    "AwsSolutions-APIG2",  # bodies are validated by the handlers alone (one schema, one shape)
    "Serverless-LambdaDLQ",
    "Serverless-LambdaAsyncFailureDestination",
    "Serverless-LambdaEventSourceMappingDestination",
    "Serverless-SQSRedrivePolicy",
    "AwsSolutions-SQS3",  # the event relay's on-failure queue is the end of the line
    "Serverless-SNSRedrivePolicy",
    "AwsSolutions-IAM5[Resource::<ShepherdSupervisorFunctionD43BAEA4.Arn>:*]",
    # The payload bucket: object-level grants on its `wf/*` prefix; no server access logs.
    "AwsSolutions-IAM5[Resource::<ShepherdPayloadsBucketCFC9AA81.Arn>/wf/*]",
    # ... and the API's on `uploads/*` (POST /payloads: keys made per caller at run time).
    "AwsSolutions-IAM5[Resource::<ShepherdPayloadsBucketCFC9AA81.Arn>/uploads/*]",
    "AwsSolutions-S1",
    # X-Ray and ListEventSourceMappings take no resource (the roles' policies are inline now).
    "Serverless-LambdaStarPermissions",
    # The supervisor is traced on request only (525,600 traces a month on an idle stack).
    "Serverless-LambdaTracing",
    # One pattern for every pool queue of the deployment (`-Q-`; not the DLQs, `-D-`) ...
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sqs:<AWS::Region>:<AWS::AccountId>:"
    "Shepherd-277b11e5-*-Q-*]",
    # ... and the API's pause/resume: conditioned on the deployment's pool functions.
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:"
    "event-source-mapping:*]",
}


def test_synth_passes_both_nag_packs(shepherd: Synth, extended: Synth) -> None:
    # The fixtures synthesized with the packs registered: any unacknowledged finding raises.
    for synth in (shepherd, extended):
        report = json.loads((synth.outdir / "validation-report.json").read_text(encoding="utf-8"))
        assert report["pluginReports"] == []


def test_nag_packs_do_fail_an_unacknowledged_finding(tmp_path: Path) -> None:
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Probe")
    aws_sqs.Queue(stack, "NoDlq", enforce_ssl=True)  # AwsSolutions-SQS3 / Serverless redrive
    add_checks(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = (tmp_path / "validation-report.json").read_text(encoding="utf-8")
    assert "AwsSolutions-SQS3" in report
    assert "Serverless-SQSRedrivePolicy" in report


def test_every_acknowledgment_is_reviewed_and_has_a_reason(shepherd: Synth) -> None:
    found = acknowledged(shepherd.stack)
    for rule, where in found.items():
        for path, reason in where:
            assert len(reason.strip()) >= MIN_REASON_LENGTH, (path, rule)
    assert set(found) == REVIEWED
    # In the cloud assembly's tree, not in the template (a third of a 50-pool template).
    assert not any("cdk_nag" in r.get("Metadata", {}) for r in shepherd.resources.values())


def test_an_acknowledgment_without_a_reason_is_refused() -> None:
    app = App()
    stack = Stack(app, "Probe")
    with pytest.raises(ValueError, match="real reason"):
        acknowledge(stack, "AwsSolutions-SQS3", "because")


def test_cfn_lint_finds_no_errors(shepherd: Synth, extended: Synth, tmp_path: Path) -> None:
    for name, synth in (("default", shepherd), ("extended", extended)):
        path = tmp_path / f"{name}.template.json"
        path.write_text(json.dumps(synth.tpl, indent=1), encoding="utf-8")
        matches = lint(path.read_text(encoding="utf-8"), regions=["us-east-1"])
        errors = [m for m in matches if m.rule.id.startswith("E")]
        assert errors == [], "\n".join(str(m) for m in errors)
