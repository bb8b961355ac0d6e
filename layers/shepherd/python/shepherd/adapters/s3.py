"""The PayloadStore port on S3: one bucket, write-once keys, checksums verified on read.

Internal: not part of Shepherd's public API (that is `shepherd.__all__`).
"""

from __future__ import annotations

import base64
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from shepherd.errors import StoreUnavailable


class S3PayloadStore:
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
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise StoreUnavailable(f"payload {key} not read: {exc}") from exc
        except BotoCoreError as exc:
            raise StoreUnavailable(f"payload {key} not read: {exc}") from exc
        body: bytes = response["Body"].read()
        return body

    def url(self, key: str, expires_seconds: int) -> str:
        url: str = self._client.generate_presigned_url(
            "get_object",
            Params={"Bucket": self._bucket, "Key": key},
            ExpiresIn=expires_seconds,
        )
        return url

    def delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self._bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise StoreUnavailable(f"payload {key} not deleted: {exc}") from exc
