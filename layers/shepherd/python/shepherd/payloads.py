"""Large payloads live in the payload bucket; the item keeps a reference (a claim check).

A payload is stored inline when its canonical JSON is at most the inline threshold, else as an
object under a key derived from the workflow, the step, the attempt, the field and the
content's sha256 (write-once: nothing can overwrite what a reference names). The reference is
the text `@ref {"k":..., "n":..., "h":...}`; JSON text never starts with `@`. Every read
verifies size and hash: a missing or altered object is `PayloadMissing`, never a silent null.
See docs/architecture.md (Large payloads).

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from shepherd import jsonsafe, limits
from shepherd.errors import PermanentError

REF_PREFIX = "@ref "
logger = logging.getLogger("shepherd.payloads")


class PayloadMissing(PermanentError):
    """A referenced payload is gone or does not match its checksum: no retry brings it back,
    so an agent reading it fails its step at once with this error (never a silent null)."""


@dataclass(frozen=True)
class PayloadRef:
    key: str
    size: int
    sha256: str

    def text(self) -> str:
        body = json.dumps({"h": self.sha256, "k": self.key, "n": self.size}, separators=(",", ":"))
        return REF_PREFIX + body


@dataclass(frozen=True)
class Link:
    """How a reader gets a large payload: a short-lived URL, its size and its sha256."""

    url: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Preview:
    """The start of a payload's canonical JSON: `data` is its first bytes (all of them when
    `data` is as long as `size`), `large` whether it lives in the payload bucket."""

    data: bytes
    size: int
    sha256: str
    large: bool

    @property
    def truncated(self) -> bool:
        return len(self.data) < self.size


@dataclass(frozen=True)
class PresignedUpload:
    """A presigned POST: the form `fields` (and the file, last) posted to `url`."""

    url: str
    fields: dict[str, str]


class PayloadStore(Protocol):
    """The payload bucket (S3 on AWS, moto locally, a dict in memory)."""

    def put(self, key: str, data: bytes, sha256: str) -> None: ...

    def get(self, key: str) -> bytes | None:
        """The object's bytes, or None if there is no such object."""
        ...

    def head(self, key: str, length: int) -> tuple[bytes, int] | None:
        """The object's first `length` bytes (fewer if it is shorter) and its whole size,
        reading no more than that (an HTTP Range request on S3), or None if there is no such
        object."""
        ...

    def url(self, key: str, expires_seconds: int, filename: str | None = None) -> str:
        """A presigned GET of the object; with `filename`, one a browser saves as that file
        (the signed response's Content-Disposition)."""
        ...

    def presign_upload(self, key: str, size: int, expires_seconds: int) -> PresignedUpload:
        """A presigned POST of exactly `size` bytes to `key` (content-length-range)."""
        ...

    def delete(self, key: str) -> None: ...


def ref_of(stored: str | None) -> PayloadRef | None:
    """The reference a stored value holds, or None if it is inline (or absent)."""
    if stored is None or not stored.startswith(REF_PREFIX):
        return None
    body = json.loads(stored[len(REF_PREFIX) :])
    return PayloadRef(key=str(body["k"]), size=int(body["n"]), sha256=str(body["h"]))


def stored_size(stored: str | None) -> int:
    """The size of the payload a stored value stands for, without fetching it."""
    if stored is None:
        return 0
    ref = ref_of(stored)
    return ref.size if ref is not None else jsonsafe.size(stored)


def payload_key(workflow_id: str, *parts: object) -> str:
    """`wf/<workflow id>/<part>/...`: from the server's own names, never a caller's."""
    return "/".join(("wf", workflow_id, *(str(p) for p in parts)))


class Payloads:
    """The engine's use of the payload store: offload what is large, resolve what is stored."""

    def __init__(
        self, store: PayloadStore, inline_bytes: int = limits.PAYLOAD_INLINE_BYTES
    ) -> None:
        self.store = store
        self.inline_bytes = inline_bytes

    def keep(self, text: str, key_prefix: str, *, inline_bytes: int | None = None) -> str:
        """What to store in the item for a payload's canonical JSON `text`: itself, or a
        reference to an object written now under `key_prefix/<sha256>` (over `inline_bytes`,
        by default the setting)."""
        data = text.encode("utf-8")
        if len(data) <= (self.inline_bytes if inline_bytes is None else inline_bytes):
            return text
        digest = hashlib.sha256(data).hexdigest()
        ref = PayloadRef(f"{key_prefix}/{digest}", len(data), digest)
        self.store.put(ref.key, data, digest)
        return ref.text()

    def text(self, stored: str) -> str:
        """The payload's JSON text, fetched and verified if it is a reference."""
        ref = ref_of(stored)
        if ref is None:
            return stored
        data = self.store.get(ref.key)
        if data is None:
            raise PayloadMissing(f"payload {ref.key} is missing")
        if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
            raise PayloadMissing(f"payload {ref.key} does not match its checksum")
        return data.decode("utf-8")

    def value(self, stored: str | None) -> Any:
        """The payload as a plain value (None if absent)."""
        return None if stored is None else json.loads(self.text(stored))

    def preview(self, stored: str, length: int) -> Preview:
        """The first `length` bytes of the payload a stored value stands for, reading no more
        of a large one than that (the bucket's object is never fetched whole). Unverified, as
        any part of an object is: its size is checked against the reference, and the sha256
        given is the reference's, for whoever downloads the whole."""
        ref = ref_of(stored)
        if ref is None:
            data = stored.encode("utf-8")
            return Preview(data[:length], len(data), hashlib.sha256(data).hexdigest(), False)
        got = self.store.head(ref.key, length)
        if got is None:
            raise PayloadMissing(f"payload {ref.key} is missing")
        data, size = got
        if size != ref.size or len(data) > length:
            raise PayloadMissing(f"payload {ref.key} does not match its reference's size")
        return Preview(data, size, ref.sha256, True)

    def discard(self, stored: str | None) -> None:
        """Delete the object a superseded reference names (nothing for an inline value).

        Best effort: a failed delete leaves an object nothing references, which the bucket's
        lifecycle rule removes with the workflow's others."""
        ref = ref_of(stored)
        if ref is None:
            return
        try:
            self.store.delete(ref.key)
        except Exception:  # never fail the write that superseded it
            logger.warning("superseded payload not deleted", exc_info=True, extra={"key": ref.key})

    def link(
        self, stored: str | None, expires_seconds: int = 300, filename: str | None = None
    ) -> Link | None:
        """A presigned download of a referenced payload (None for inline or absent), saved
        as `filename` by a browser when given."""
        ref = ref_of(stored)
        if ref is None:
            return None
        return Link(self.store.url(ref.key, expires_seconds, filename), ref.size, ref.sha256)


class NoPayloadStore:
    """No payload bucket configured: small payloads work, a large one is a clear error."""

    def put(self, key: str, data: bytes, sha256: str) -> None:
        raise PayloadStoreMissing(
            f"payload {key} is {len(data)} bytes, over the inline threshold, and no payload "
            "bucket is configured (SHEPHERD_PAYLOAD_BUCKET)"
        )

    def get(self, key: str) -> bytes | None:
        return None

    def head(self, key: str, length: int) -> tuple[bytes, int] | None:
        return None

    def url(self, key: str, expires_seconds: int, filename: str | None = None) -> str:
        raise PayloadStoreMissing("no payload bucket is configured (SHEPHERD_PAYLOAD_BUCKET)")

    def presign_upload(self, key: str, size: int, expires_seconds: int) -> PresignedUpload:
        raise PayloadStoreMissing("no payload bucket is configured (SHEPHERD_PAYLOAD_BUCKET)")

    def delete(self, key: str) -> None:
        return None


class PayloadStoreMissing(PermanentError):
    """A large payload with no payload bucket to put it in (a deployment error)."""


class MemoryPayloadStore:
    """The payload bucket in memory; fails a put or a get on demand (tests, the simulator)."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self.puts = 0
        self.gets = 0
        self.bytes_read = 0  # by get and head: what a reader fetched from the bucket

    def put(self, key: str, data: bytes, sha256: str) -> None:
        with self._lock:
            self.puts += 1
            self.objects[key] = bytes(data)

    def get(self, key: str) -> bytes | None:
        with self._lock:
            self.gets += 1
            data = self.objects.get(key)
            self.bytes_read += len(data or b"")
            return data

    def head(self, key: str, length: int) -> tuple[bytes, int] | None:
        with self._lock:
            self.gets += 1
            data = self.objects.get(key)
            if data is None:
                return None
            self.bytes_read += min(length, len(data))
            return data[:length], len(data)

    def url(self, key: str, expires_seconds: int, filename: str | None = None) -> str:
        named = f"&filename={filename}" if filename else ""
        return f"memory://payloads/{key}?expires={expires_seconds}{named}"

    def presign_upload(self, key: str, size: int, expires_seconds: int) -> PresignedUpload:
        return PresignedUpload("memory://payloads/", {"key": key, "size": str(size)})

    def delete(self, key: str) -> None:
        with self._lock:
            self.objects.pop(key, None)
