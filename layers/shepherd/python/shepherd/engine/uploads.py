"""Presigned uploads (POST /payloads): a payload larger than a request may carry.

`create` records an upload item (owner, object key, declared size and sha256, expiry; the
table's TTL removes it) and returns a presigned POST of exactly that many bytes to a key the
server made: `uploads/<hash of the owner>/<upload id>`, valid `limits.UPLOAD_SECONDS`.

`start` turns an upload into a workflow's input. The upload must belong to the caller
(else UploadNotFound, as for a workflow), be unused (UploadUsed) and unexpired (UploadExpired);
its object must exist and match the declared size and sha256 (UploadRejected) and be strict
JSON within the caps and the definition's InputSchema. Then, in order:

1. the upload item is claimed for the workflow id by one conditional write
   (`used_by` missing): two starts naming one upload cannot both win;
2. the input is stored under the workflow's own keys (the claim check) and the workflow is
   created by its one conditional put;
3. the upload object is deleted (the lifecycle rule on `uploads/` removes it otherwise).

The workflow id is fixed before step 1 (from the idempotency key, else from the upload id),
so a start that fails between 1 and 2 is finished by repeating it: the claim names that id.
A replay with the same idempotency key after success returns the same workflow.

`take_output` turns an upload into a callback's output (`POST /tasks/success` with
`output_upload`) under the same checks: the callback's caller must own it, and it is claimed
for the attempt the token names (`task:<workflow>:<kind>:<step>:<attempt>`), so a callback
that dies after the claim is finished by repeating it, and no other success can use it.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shepherd import business_keys, jsonsafe, limits
from shepherd.conditions import Eq, Missing, Update, all_of
from shepherd.engine.scheduler import Scheduler, StartResult
from shepherd.errors import (
    ConditionFailed,
    IdempotencyConflict,
    InputInvalid,
    StoreUnavailable,
    UploadExpired,
    UploadNotFound,
    UploadRejected,
    UploadUsed,
)
from shepherd.ids import derived_id
from shepherd.keys import UPLOAD_SK, WF_SK, upload_object_key, upload_pk, wf_pk
from shepherd.model import WorkflowRecord
from shepherd.payloads import PresignedUpload

logger = logging.getLogger("shepherd.uploads")


@dataclass(frozen=True)
class Upload:
    upload_id: str
    key: str
    size: int
    sha256: str | None
    expires_at: int  # epoch ms
    post: PresignedUpload


def upload_request_hash(wf_type: str, upload_id: str, tags: Mapping[str, str] | None = None) -> str:
    """The request hash of a start from an upload: its type, the upload it names and its
    tags, if any."""
    request: dict[str, Any] = {"input_upload": upload_id, "type": wf_type}
    if tags:
        request["tags"] = dict(tags)
    text = jsonsafe.dumps(request)
    return hashlib.sha256(text.encode()).hexdigest()


def upload_workflow_id(owner: str, upload_id: str) -> str:
    """The workflow id of a start from an upload with no idempotency key."""
    return hashlib.sha256(f"upload\0{owner}\0{upload_id}".encode()).hexdigest()[:32]


class Uploads:
    """Presigned uploads and the starts and callback outputs that use them."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def create(self, owner: str, size: int, sha256: str | None) -> Upload:
        """Record an upload item and presign its POST (the size is checked by the caller's model
        too; here as the engine's own guard)."""
        if not 1 <= size <= limits.MAX_UPLOAD_BYTES:
            raise InputInvalid(f"size must be 1..{limits.MAX_UPLOAD_BYTES} bytes", "size")
        upload_id = secrets.token_hex(16)  # keys.UPLOAD_ID_PATTERN
        key = upload_object_key(owner, upload_id)
        now = self.scheduler.ports.clock.now_ms()
        expires_at = now + limits.UPLOAD_SECONDS * 1000
        post = self.scheduler.ports.payloads.store.presign_upload(key, size, limits.UPLOAD_SECONDS)
        item = {
            "pk": upload_pk(upload_id),
            "sk": UPLOAD_SK,
            "owner": owner,
            "key": key,
            "size": size,
            "upload_expires_at": expires_at,
            "created_at": now,
            # the table's TTL (epoch seconds): gone a day after it expired, used or not
            "expires_at": expires_at // 1000 + 24 * 3600,
        }
        if sha256 is not None:
            item["sha256"] = sha256.lower()
        self.scheduler.ports.store.put_new(item)
        return Upload(upload_id, key, size, item.get("sha256"), expires_at, post)

    def start(
        self,
        wf_type: str,
        upload_id: str,
        *,
        idempotency_key: str | None = None,
        owner: str = "local",
        tags: Mapping[str, str] | None = None,
    ) -> StartResult:
        """A workflow whose input is the upload's object (see the module docstring)."""
        store = self.scheduler.ports.store
        definition = self.scheduler.catalog.current(wf_type)
        tags = business_keys.checked_tags(tags)
        workflow_id = (
            derived_id(owner, idempotency_key)
            if idempotency_key
            else upload_workflow_id(owner, upload_id)
        )
        rhash = upload_request_hash(wf_type, upload_id, tags)
        upload = self.load(upload_id, owner, "input_upload")
        existing_item = store.get(wf_pk(workflow_id), WF_SK)
        if existing_item is not None:
            existing = WorkflowRecord.from_item(existing_item)
            if existing.request_hash != rhash:
                if idempotency_key:
                    raise IdempotencyConflict(existing.workflow_id)
                raise UploadUsed(upload_id, str(upload.get("used_by", existing.workflow_id)))
            return StartResult(existing, created=False)  # an idempotent replay
        self.usable(upload, upload_id, workflow_id, "input_upload")
        payload = self.value(upload, upload_id, "input_upload")
        input_json = self.scheduler.validated_input(
            definition, payload, max_bytes=limits.MAX_UPLOAD_BYTES, parsed=True
        )
        if upload.get("used_by") is None:
            self.claim(upload_id, owner, workflow_id, "input_upload")
        result = self.scheduler.create(
            definition,
            workflow_id,
            input_json,
            rhash=rhash,
            owner=owner,
            idempotency_key=idempotency_key,
            tags=tags,
        )
        self.discard(upload)
        return result

    def load(self, upload_id: str, owner: str, field: str) -> dict[str, Any]:
        """The upload item, if it is the caller's (else UploadNotFound, as for a workflow)."""
        upload = self.scheduler.ports.store.get(upload_pk(upload_id), UPLOAD_SK)
        if upload is None or upload.get("owner") != owner:
            raise UploadNotFound(upload_id, field)
        return upload

    def usable(self, upload: dict[str, Any], upload_id: str, claimant: str, field: str) -> None:
        """Unused and unexpired, or already claimed by this very claimant (a repeat, which may
        finish after the expiry: the claim was in time)."""
        used_by = upload.get("used_by")
        if used_by is not None and used_by != claimant:
            raise UploadUsed(upload_id, str(used_by), field)
        if used_by is None and self.scheduler.ports.clock.now_ms() >= int(
            upload["upload_expires_at"]
        ):
            raise UploadExpired(upload_id, field)

    def value(self, upload: dict[str, Any], upload_id: str, field: str) -> Any:
        """The upload's object as a JSON value: present, of the declared size and sha256, strict
        JSON within the depth limit."""
        data = self.scheduler.ports.payloads.store.get(str(upload["key"]))
        if data is None:
            raise UploadRejected(
                "UploadMissing", "nothing was uploaded for this upload_id", upload_id, field
            )
        declared = int(str(upload["size"]))
        if len(data) != declared:
            raise UploadRejected(
                "UploadMismatch",
                f"the object is {len(data)} bytes; the upload declared {declared}",
                upload_id,
                field,
            )
        digest = upload.get("sha256")
        if digest is not None and hashlib.sha256(data).hexdigest() != digest:
            raise UploadRejected(
                "UploadMismatch", "the object does not match the declared sha256", upload_id, field
            )
        try:
            return jsonsafe.parse(data, what=f"the upload ({field})")
        except jsonsafe.JsonRejected as exc:
            raise InputInvalid(exc.message, field) from None

    def take_output(self, upload_id: str, owner: str, claimant: str) -> tuple[str, dict[str, Any]]:
        """A callback's output from an upload: its canonical JSON and the upload item, checked but
        not yet claimed (the caller checks the output's caps first, then claims)."""
        upload = self.load(upload_id, owner, "output_upload")
        self.usable(upload, upload_id, claimant, "output_upload")
        return jsonsafe.canonical(self.value(upload, upload_id, "output_upload")), upload

    def discard(self, upload: dict[str, Any]) -> None:
        """Delete a used upload's object (its copy lives under the owner's keys now)."""
        try:
            self.scheduler.ports.payloads.store.delete(str(upload["key"]))
        except StoreUnavailable:
            logger.warning("upload object not deleted; the lifecycle rule will", exc_info=True)

    def claim(self, upload_id: str, owner: str, claimant: str, field: str) -> None:
        """Mark the upload used by `claimant` (a workflow id, or an attempt): one conditional
        write, so it is single-use."""
        try:
            self.scheduler.ports.store.update(
                upload_pk(upload_id),
                UPLOAD_SK,
                Update(set={"used_by": claimant, "used_at": self.scheduler.ports.clock.now_ms()}),
                all_of(Eq("owner", owner), Missing("used_by")),
            )
        except ConditionFailed as lost:
            current = lost.current or {}
            if current.get("used_by") != claimant:
                raise UploadUsed(upload_id, str(current.get("used_by")), field) from None
