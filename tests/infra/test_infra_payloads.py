"""The payload bucket (issue 12): private, encrypted, TLS only, lifecycle from the retention,
and each function's role reads or writes workflow payloads only as it needs to."""

from __future__ import annotations

from typing import Any

from infra_support import Synth, actions, flatten, granted, refers_to
from shepherd.settings import ENV_PAYLOAD_BUCKET
from shepherd_infra import config

S3_ACTIONS = ("s3:GetObject", "s3:PutObject", "s3:DeleteObject")


def _bucket(synth: Synth) -> tuple[str, dict[str, Any]]:
    logical_id = synth.logical_id(synth.construct.payloads.bucket)
    return logical_id, synth.props(logical_id)


def test_the_bucket_is_private_encrypted_and_tls_only(shepherd: Synth) -> None:
    bucket_id, props = _bucket(shepherd)
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert props["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    assert "VersioningConfiguration" not in props  # write-once keys: nothing to keep versions of
    policies = shepherd.of_type("AWS::S3::BucketPolicy")
    (policy,) = [p for p in policies.values() if refers_to(p["Properties"]["Bucket"], bucket_id)]
    denies = [
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"
    ]
    assert any(
        s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} and s["Action"] == "s3:*"
        for s in denies
    )
    assert shepherd.resources[bucket_id]["DeletionPolicy"] == "RetainExceptOnCreate"


def test_lifecycle_removes_a_workflows_payloads_after_its_retention(shepherd: Synth) -> None:
    _, props = _bucket(shepherd)
    rules = {r["Id"]: r for r in props["LifecycleConfiguration"]["Rules"]}
    retention = shepherd.construct.payloads.expiration_days - config.PAYLOAD_LIVE_DAYS
    assert retention == 30  # the settings' retention, which the items' TTL uses too
    assert rules["workflow-payloads"]["Prefix"] == "wf/"
    assert rules["workflow-payloads"]["ExpirationInDays"] == 30 + config.PAYLOAD_LIVE_DAYS
    assert rules["abandoned-uploads"]["Prefix"] == "uploads/"
    assert rules["abandoned-uploads"]["ExpirationInDays"] == 1
    assert rules["unfinished-multipart"]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": 1
    }
    assert all(r["Status"] == "Enabled" for r in rules.values())


def test_each_role_gets_exactly_the_payload_access_it_needs(shepherd: Synth) -> None:
    bucket_id, _ = _bucket(shepherd)
    # Every role that reads may list the bucket (and nothing more on the bucket itself): S3
    # then answers a missing key 404, so a 403 is always a denial (issue 35.1).
    expected = {
        # links are presigned with its role; uploads: presigned POSTs, read, deleted once used
        "api": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"},
        # a success naming an output_upload reads it and deletes it once used
        "callbacks": {"s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:ListBucket"},
        # a StartWorkflow event naming an input_upload reads and deletes it
        "events": {"s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:ListBucket"},
        "supervisor": set(),
        "relay": set(),
    }
    expected.update(
        {
            f"agent:{n}": {"s3:GetObject", "s3:PutObject", "s3:ListBucket"}
            for n in shepherd.construct.pools
        }
    )
    for name, fn_id in shepherd.function_ids(relay=True).items():
        statements = shepherd.statements(fn_id)
        s3 = {a for s in statements for a in actions(s) if a.startswith("s3:")}
        assert s3 == expected[name], name
        if "s3:ListBucket" in s3:
            (listed,) = granted(statements, "s3:ListBucket")
            assert flatten(listed) == flatten({"Fn::GetAtt": [bucket_id, "Arn"]}), listed
        for action in S3_ACTIONS:
            prefixes = set()
            for resource in granted(statements, action):
                # object-level on wf/* (and uploads/*): never the bucket or another
                assert refers_to(resource, bucket_id)
                text = flatten(resource)
                prefixes.add(
                    next((p for p in ("wf/*", "uploads/*") if text.endswith(f'/{p}"]]}}')), text)
                )
            if action in s3:
                allowed = {"wf/*", "uploads/*"} if name == "api" else {"wf/*"}
                if name in ("callbacks", "events"):  # write under wf/*, read uploads only
                    allowed = {"wf/*"} if action == "s3:PutObject" else {"uploads/*"}
                if action == "s3:DeleteObject":
                    allowed = {"uploads/*"}  # only a used upload is ever deleted
                assert prefixes and prefixes <= allowed, (name, action, prefixes)


def test_every_function_is_told_the_bucket(shepherd: Synth) -> None:
    bucket_id, _ = _bucket(shepherd)
    for fn_id in shepherd.function_ids(relay=True).values():
        assert shepherd.function_env(fn_id)[ENV_PAYLOAD_BUCKET] == {"Ref": bucket_id}
