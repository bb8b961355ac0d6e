"""cdk-nag v3 runs as a CDK validation plugin; a finding is acknowledged on a construct with a
written reason, recorded in the construct's metadata (the cloud assembly's tree), not in the
template: written into every resource's Metadata, the reasons made a third of a 50-pool
template and took it over CloudFormation's 1 MB."""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Validations
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from constructs import IConstruct

MIN_REASON_LENGTH = 20


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one finding (`AwsSolutions-IAM5[Resource::*]`) with a reason."""
    if len(reason.strip()) < MIN_REASON_LENGTH:
        raise ValueError(f"{rule}: an acknowledgment needs a real reason, got {reason!r}")
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))


def add_checks(app: App) -> None:
    """AwsSolutions and Serverless packs on every synth; any unacknowledged finding fails it."""
    Validations.of(app).add_plugins(
        AwsSolutionsChecks(app, verbose=True, write_suppressions_to_cloud_formation=False),
        ServerlessChecks(app, verbose=True, write_suppressions_to_cloud_formation=False),
    )
