"""S3 as a role without `s3:ListBucket` sees it: a key that does not exist answers 403, not 404.

moto answers 404 whoever asks, so without this every test passed while the deployed functions
(which have no ListBucket, by design) read a missing upload as "S3 unavailable, retry".
"""

from __future__ import annotations

from typing import Any

# What S3 sends instead of NoSuchKey when the caller may not list the bucket: GetObject has a
# body (AccessDenied), HeadObject none (its code is the bare status).
DENIED = {"GetObject": "AccessDenied", "HeadObject": "403"}


def deny_missing_keys(http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
    """An `after-call.s3` hook: rewrite a 404 of GetObject/HeadObject into S3's 403."""
    code = DENIED.get(model.name)
    if code is None or http_response.status_code != 404:
        return
    parsed["Error"] = {"Code": code, "Message": "Access Denied"}
    parsed.setdefault("ResponseMetadata", {})["HTTPStatusCode"] = 403


HOOK_ID = "s3-without-list-bucket"


def _events(session_or_client: Any) -> Any:
    return getattr(session_or_client, "events", None) or session_or_client.meta.events


def without_list_bucket(session_or_client: Any) -> Any:
    """Hook a boto3 session (every S3 client made from it later) or one S3 client."""
    _events(session_or_client).register("after-call.s3.*", deny_missing_keys, unique_id=HOOK_ID)
    return session_or_client


def with_list_bucket(session_or_client: Any) -> None:
    """Take the hook away again (boto3's default session outlives a test)."""
    _events(session_or_client).unregister("after-call.s3.*", unique_id=HOOK_ID)
