"""Approvers that can never answer are refused when the definition loads (issue 35.1): an
approver is compared exactly with the caller's principal, and a role's callers are known as
`arn:aws:iam::<account>:role/<Role>` (no session, no path), so a wildcard, a session ARN or a
role ARN with a path passed validation and then matched nobody, silently."""

from __future__ import annotations

from typing import Any

import pytest
from shepherd.definitions import parse_definition
from shepherd.errors import DefinitionError


def _definition(*approvers: str) -> dict[str, Any]:
    return {
        "Name": "wf",
        "Steps": [
            {"Name": "sign_off", "Approval": {"TimeoutSeconds": 60, "Approvers": list(approvers)}}
        ],
    }


@pytest.mark.parametrize(
    ("approver", "why"),
    [
        ("*", "approvers are compared exactly, with no wildcards"),
        ("arn:aws:iam::123456789012:role/*", "with no wildcards"),
        (
            "arn:aws:sts::123456789012:assumed-role/FraudTeam/alice",
            "a role's sessions answer as the role: write arn:aws:iam::123456789012:role/FraudTeam",
        ),
        (
            "arn:aws:iam::123456789012:role/teams/fraud/FraudTeam",
            "known by its name without its path: write arn:aws:iam::123456789012:role/FraudTeam",
        ),
        ("arn:aws:iam::123456789012:user/bob ", "it contains white space"),
    ],
)
def test_an_approver_no_caller_can_be_is_refused_naming_the_field(approver: str, why: str) -> None:
    with pytest.raises(DefinitionError) as err:
        parse_definition(_definition("arn:aws:iam::123456789012:user/ok", approver), "wf.yaml")
    message = str(err.value)
    assert "wf.yaml: Steps[0] (sign_off).Approval.Approvers: Approvers[1]:" in message
    assert why in message


@pytest.mark.parametrize(
    "approver",
    [
        "arn:aws:iam::123456789012:role/FraudTeam",
        "arn:aws:iam::123456789012:user/bob",
        "arn:aws:iam::123456789012:user/division/bob",  # a user is known with its path
        "arn:aws-us-gov:iam::123456789012:role/FraudTeam",
        "bob",  # a caller name on the local stack
    ],
)
def test_an_approver_a_caller_can_be_is_accepted(approver: str) -> None:
    parsed = parse_definition(_definition(approver), "wf.yaml")
    approval = parsed.steps[0].approval
    assert approval is not None and approval.approvers == (approver,)
