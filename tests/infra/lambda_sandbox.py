"""A stand-in for the Lambda Python runtime's bootstrap, run as `python -I -S lambda_sandbox.py
'<sys.path as JSON>'` by the deploy rehearsal (rehearsal.py). Standard library only: nothing else
is importable until the paths of the rebuilt function filesystem are on sys.path.

Like a Lambda sandbox it imports the handler named by `_HANDLER` once (init) and then serves
invocations, one per line of stdin (`{"event": ..., "remaining_ms": ...}`), until stdin closes.
Replies go, one JSON line each, to what was stdout; the handler's own prints (Powertools logs,
EMF metrics) are moved to stderr so they cannot corrupt the protocol.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
import uuid
from typing import Any

# Modules whose origin the rehearsal checks: each must come from the layer that ships it.
PROBED = ("boto3", "botocore", "aws_lambda_powertools", "pydantic", "shepherd", "shepherd_handlers")


class Context:
    """The attributes of the Lambda context object that handlers and Powertools read."""

    def __init__(self, remaining_ms: int) -> None:
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "rehearsal")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.invoked_function_arn = (
            f"arn:aws:lambda:{os.environ.get('AWS_REGION', 'us-east-1')}:123456789012:function:"
            f"{self.function_name}"
        )
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self._deadline = time.monotonic() + remaining_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _origins() -> dict[str, str | None]:
    """Where each probed module was loaded from (None: not imported yet)."""
    return {
        name: getattr(sys.modules[name], "__file__", None) if name in sys.modules else None
        for name in PROBED
    }


def main() -> int:
    sys.path[:0] = json.loads(sys.argv[1])
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)

    def reply(message: dict[str, Any]) -> None:
        replies.write(json.dumps(message, default=str) + "\n")
        replies.flush()

    module_name, _, attribute = os.environ["_HANDLER"].rpartition(".")
    try:
        handler = getattr(importlib.import_module(module_name), attribute)
    except Exception:  # Lambda reports any init failure (Runtime.ImportModuleError)
        reply({"ok": False, "phase": "init", "error": traceback.format_exc()})
        return 1
    reply({"ok": True, "phase": "init", "sys_path": sys.path, "origins": _origins()})
    for line in sys.stdin:
        request = json.loads(line)
        try:
            result = handler(request["event"], Context(int(request.get("remaining_ms", 60_000))))
        except Exception:  # an invocation error is a reply, as in Lambda
            reply({"ok": False, "phase": "invoke", "error": traceback.format_exc()})
        else:
            # Clients are built on first use: boto3 is imported by the first invocation.
            reply({"ok": True, "phase": "invoke", "result": result, "origins": _origins()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
