"""moto's server for the local stack, with every DynamoDB request applied whole.

moto's UpdateItem on an item that does not exist yet first puts an item holding only its
keys, then applies the update expression to it in place; its server answers requests in
threads, so a read landing in between sees the keys and nothing else. DynamoDB applies a
write to an item atomically: no reader ever sees part of one. Since a step's item is created
by its first write (an UpdateItem: issue 16), the local stack met the difference: a
`GET /workflows/{id}` read a step item with no `status` and answered 500 in `make demo`.
Serializing moto's DynamoDB requests gives back the atomicity the engine relies on (an
emulator's throughput is all it costs); docs/architecture.md lists the gap with moto's others.

Run as `python -m shepherd_cli.moto_local -H 127.0.0.1 -p PORT` (moto_server's arguments).
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

from moto.dynamodb.responses import DynamoHandler
from moto.server import main


def serialized(call_action: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`call_action` (one request's work in a moto response handler) one request at a time."""
    lock = threading.Lock()

    @functools.wraps(call_action)
    def one_at_a_time(handler: Any) -> Any:
        with lock:
            return call_action(handler)

    return one_at_a_time


def serialize_dynamodb() -> None:
    """Make moto's DynamoDB requests atomic in this process (before its server starts)."""
    DynamoHandler.call_action = serialized(DynamoHandler.call_action)  # type: ignore[method-assign]


if __name__ == "__main__":
    serialize_dynamodb()
    main(sys.argv[1:])
