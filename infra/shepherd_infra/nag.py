"""cdk-nag v3 runs as a CDK validation plugin; a finding is acknowledged on a construct with a
written reason, recorded in the construct's metadata (the cloud assembly's tree), not in the
template: written into every resource's Metadata, the reasons made a third of a 50-pool
template and took it over CloudFormation's 1 MB."""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Validations
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from constructs import IConstruct

MIN_REASON_LENGTH = 20


# A construct whose acknowledgments also hold for another outside it, by construct path: a
# function's holder and the role made elsewhere that it runs as (the integration pool's).
_ALSO: dict[str, list[IConstruct]] = {}


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one finding (`AwsSolutions-IAM5[Resource::*]`) with a reason."""
    if len(reason.strip()) < MIN_REASON_LENGTH:
        raise ValueError(f"{rule}: an acknowledgment needs a real reason, got {reason!r}")
    for target in (construct, *_ALSO.get(construct.node.path, ())):
        Validations.of(target).acknowledge(Acknowledgment(id=rule, reason=reason))


def acknowledged_with(construct: IConstruct, other: IConstruct) -> None:
    """Every later acknowledgment on `construct` holds for `other` too (a function's holder
    and the role it runs as, made elsewhere: the statements the holder's grants add land in
    that role)."""
    _ALSO.setdefault(construct.node.path, []).append(other)


def add_checks(app: App) -> None:
    """AwsSolutions and Serverless packs on every synth; any unacknowledged finding fails it."""
    Validations.of(app).add_plugins(
        AwsSolutionsChecks(app, verbose=True, write_suppressions_to_cloud_formation=False),
        ServerlessChecks(app, verbose=True, write_suppressions_to_cloud_formation=False),
    )
