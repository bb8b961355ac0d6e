"""The in-memory payload store and the S3 adapter (on moto) pass the same contract tests, and
the claim check on top of them keeps small payloads inline and verifies every large one."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws
from s3_without_list import without_list_bucket
from shepherd import jsonsafe
from shepherd.adapters.s3 import S3PayloadStore
from shepherd.errors import StoreUnavailable
from shepherd.payloads import (
    REF_PREFIX,
    MemoryPayloadStore,
    PayloadMissing,
    Payloads,
    PayloadStore,
    payload_key,
    ref_of,
    stored_size,
)

BUCKET = "shepherd-payloads-test"


@pytest.fixture(params=["memory", "s3"])
def store(request: pytest.FixtureRequest) -> Iterator[PayloadStore]:
    """The fake, and S3 as the deployed roles see it (they may list the bucket: a missing key
    is 404)."""
    if request.param == "memory":
        yield MemoryPayloadStore()
        return
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield S3PayloadStore(client, BUCKET)


def test_a_403_is_a_store_error_never_missing() -> None:
    """Issue 35.1: S3 answers 403 to a role that may not read or list (a policy mistake, a key
    policy, an SCP). Read as "missing", it failed a step or a start for good; it is a store
    error, which every caller retries, and never None."""
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        store = S3PayloadStore(without_list_bucket(client), BUCKET)
        for key in ("wf/w1/input", "uploads/u1", "elsewhere/k"):
            with pytest.raises(StoreUnavailable):
                store.get(key)
            with pytest.raises(StoreUnavailable):
                store.head(key, 10)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_put_get_and_delete(store: PayloadStore) -> None:
    data = b'{"big":"' + b"x" * 20_000 + b'"}'
    store.put("wf/1/output/abc", data, _sha(data))
    assert store.get("wf/1/output/abc") == data
    assert store.get("wf/1/output/nothing") is None
    assert "wf/1/output/abc" in store.url("wf/1/output/abc", 60)
    store.delete("wf/1/output/abc")
    assert store.get("wf/1/output/abc") is None


def test_a_presigned_upload_names_exactly_its_key(store: PayloadStore) -> None:
    post = store.presign_upload("uploads/owner/id1", 1234, 900)
    assert post.url and post.fields["key"] == "uploads/owner/id1"
    if isinstance(store, S3PayloadStore):  # the policy: this key, exactly 1234 bytes
        import base64
        import json

        policy = json.loads(base64.b64decode(post.fields["policy"]))
        assert ["content-length-range", 1234, 1234] in policy["conditions"]
        assert {"key": "uploads/owner/id1"} in policy["conditions"]


def test_small_payloads_stay_inline_and_large_ones_become_verified_references(
    store: PayloadStore,
) -> None:
    payloads = Payloads(store, inline_bytes=100)
    small = jsonsafe.dumps({"ok": True})
    assert payloads.keep(small, payload_key("w1", "step", "a", 1, "output")) == small
    large = jsonsafe.dumps({"blob": "é" * 500})
    stored = payloads.keep(large, payload_key("w1", "step", "a", 1, "output"))
    assert stored.startswith(REF_PREFIX)
    ref = ref_of(stored)
    assert ref is not None and ref.size == jsonsafe.size(large) == stored_size(stored)
    assert ref.key == f"wf/w1/step/a/1/output/{ref.sha256}"  # the server's names only
    assert payloads.value(stored) == {"blob": "é" * 500}
    assert payloads.value(small) == {"ok": True}
    link = payloads.link(stored)
    assert link is not None and link.size == ref.size and link.sha256 == ref.sha256
    assert payloads.link(small) is None


def test_a_missing_or_altered_object_is_a_clear_error_never_null(store: PayloadStore) -> None:
    payloads = Payloads(store, inline_bytes=10)
    stored = payloads.keep(jsonsafe.dumps({"v": "y" * 100}), "wf/w2/input")
    ref = ref_of(stored)
    assert ref is not None
    altered = jsonsafe.dumps({"v": "z" * 100}).encode()
    store.put(ref.key, altered, _sha(altered))
    with pytest.raises(PayloadMissing, match="checksum"):
        payloads.value(stored)
    store.delete(ref.key)
    with pytest.raises(PayloadMissing, match="missing"):
        payloads.value(stored)


def test_keys_are_write_once_by_content() -> None:
    """The same content lands on the same key; different content never overwrites it."""
    store = MemoryPayloadStore()
    payloads = Payloads(store, inline_bytes=10)
    first = payloads.keep(jsonsafe.dumps("a" * 50), "wf/w/step/s/1/details")
    second = payloads.keep(jsonsafe.dumps("b" * 50), "wf/w/step/s/1/details")
    assert first != second and len(store.objects) == 2
    assert payloads.value(first) == "a" * 50


def test_head_reads_only_the_first_bytes_and_says_the_whole_size(store: PayloadStore) -> None:
    data = b'{"big":"' + b"x" * 200_000 + b'"}'
    store.put("wf/3/output/abc", data, _sha(data))
    assert store.head("wf/3/output/abc", 4096) == (data[:4096], len(data))
    assert store.head("wf/3/output/abc", 1) == (b"{", len(data))
    assert store.head("wf/3/output/abc", 10 * len(data)) == (data, len(data))  # shorter: whole
    assert store.head("wf/3/output/nothing", 4096) is None
    if isinstance(store, MemoryPayloadStore):
        assert store.bytes_read == 4096 + 1 + len(data)


def test_a_preview_is_the_payloads_start_checked_against_its_reference(
    store: PayloadStore,
) -> None:
    payloads = Payloads(store, inline_bytes=100)
    small = jsonsafe.dumps({"ok": True})
    got = payloads.preview(small, 4)
    assert (got.data, got.size, got.large, got.truncated) == (b'{"ok', len(small), False, True)
    assert got.sha256 == _sha(small.encode())
    text = jsonsafe.dumps({"blob": "é" * 5000})
    stored = payloads.keep(text, "wf/w4/input")
    got = payloads.preview(stored, 1000)
    assert got.data == text.encode()[:1000] and got.size == len(text.encode())
    assert got.large and got.truncated and got.sha256 == _sha(text.encode())
    whole = payloads.preview(stored, 64 * 1024)
    assert whole.data == text.encode() and not whole.truncated
    # An object that is not the size its reference says is refused, as a full read would be.
    ref = ref_of(stored)
    assert ref is not None
    store.put(ref.key, b"[1]", _sha(b"[1]"))
    with pytest.raises(PayloadMissing, match="size"):
        payloads.preview(stored, 1000)
    store.delete(ref.key)
    with pytest.raises(PayloadMissing, match="missing"):
        payloads.preview(stored, 1000)
