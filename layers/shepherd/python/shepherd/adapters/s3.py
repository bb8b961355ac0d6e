"""The PayloadStore port on S3: one bucket, write-once keys, checksums verified on read.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import base64
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from shepherd.errors import StoreUnavailable
from shepherd.payloads import PresignedUpload

# S3 says "no such key" with 404 only to a caller that may list the bucket, 403 to anyone
# else. Every role that reads the bucket may list it (shepherd_infra.payload_store), so a
# missing key is a 404 here and a 403 is always a real denial: a permission mistake (a policy,
# a key policy, an SCP) is a store error, retried and alarmed, never read as "missing", which
# would fail a step or a start for good (issue 35.1).
MISSING = frozenset({"NoSuchKey", "404"})


class S3PayloadStore:
    """Payloads and uploads in one bucket; a missing key is None, any other error
    StoreUnavailable (the caller retries; nothing is decided on it)."""

    def __init__(self, client: Any, bucket: str) -> None:
        self._client = client
        self._bucket = bucket

    def put(self, key: str, data: bytes, sha256: str) -> None:
        """Write an object; S3 checks the body against the sha256 we computed (a corrupted
        upload is refused, not stored)."""
        try:
            self._client.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=data,
                ContentType="application/json",
                ChecksumSHA256=base64.b64encode(bytes.fromhex(sha256)).decode(),
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreUnavailable(f"payload {key} not written: {exc}") from exc

    def get(self, key: str) -> bytes | None:
        try:
            response = self._client.get_object(Bucket=self._bucket, Key=key)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in MISSING:
                return None
            raise StoreUnavailable(f"payload {key} not read: {exc}") from exc
        except BotoCoreError as exc:
            raise StoreUnavailable(f"payload {key} not read: {exc}") from exc
        body: bytes = response["Body"].read()
        return body

    def head(self, key: str, length: int) -> tuple[bytes, int] | None:
        """A ranged GET (`Range: bytes=0-<length - 1>`): S3 sends those bytes only, and says
        the object's size in `Content-Range`. Never more than `length` bytes are read, even
        from a reply that ignored the range."""
        try:
            response = self._client.get_object(
                Bucket=self._bucket, Key=key, Range=f"bytes=0-{max(length, 1) - 1}"
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in MISSING:
                return None
            if code == "InvalidRange":  # an empty object: no byte 0
                return b"", 0
            raise StoreUnavailable(f"payload {key} not read: {exc}") from exc
        except BotoCoreError as exc:
            raise StoreUnavailable(f"payload {key} not read: {exc}") from exc
        body = response["Body"]
        try:
            data: bytes = body.read(length) if length > 0 else b""
        finally:
            body.close()
        whole = str(response.get("ContentRange") or "").rpartition("/")[2]
        size = int(whole) if whole.isdigit() else int(response.get("ContentLength") or 0)
        return data, size

    def url(self, key: str, expires_seconds: int, filename: str | None = None) -> str:
        params = {"Bucket": self._bucket, "Key": key}
        if filename:
            # Signed into the URL: S3 answers with this header, so a browser saves a file.
            params["ResponseContentDisposition"] = f'attachment; filename="{filename}"'
        url: str = self._client.generate_presigned_url(
            "get_object", Params=params, ExpiresIn=expires_seconds
        )
        return url

    def presign_upload(self, key: str, size: int, expires_seconds: int) -> PresignedUpload:
        """A presigned POST of this one key, of exactly `size` bytes (S3 refuses any other
        length), signed locally (no request): the caller posts the form, then the file."""
        post: dict[str, Any] = self._client.generate_presigned_post(
            Bucket=self._bucket,
            Key=key,
            Fields={"Content-Type": "application/json"},
            Conditions=[
                {"Content-Type": "application/json"},
                ["content-length-range", size, size],
            ],
            ExpiresIn=expires_seconds,
        )
        return PresignedUpload(str(post["url"]), {k: str(v) for k, v in post["fields"].items()})

    def delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self._bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise StoreUnavailable(f"payload {key} not deleted: {exc}") from exc
