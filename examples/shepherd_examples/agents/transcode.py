"""Demo agents of `transcode_video`: a simulated media service.

`split_video` plans the chunks; `encode_chunk` runs once per chunk, as the items of the
`encode_chunks` map step (`ctx.item` is the chunk, `ctx.item_index` its place, and
`ctx.idempotency_key` the item's own, `<workflow id>:encode_chunks[<index>]`, the same across
the item's retries); `package_video` joins what they encoded. Encoded chunks and packages are
recorded in the example ledger under those keys, so an undo finds what its item or step stored
even when nobody heard of it (a crash after the effect), and finds nothing when it never ran.

Faults come from the input like the other examples' (`faults.py`); `"encode_chunks[2]"`
targets the item at index 2 alone.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

from shepherd.engine.agent import AgentContext

from shepherd_examples.agents import ledger, registry
from shepherd_examples.agents.faults import after_effect, inject

SERVICE = "media"
# Each profile's bitrate in bits per second: an encoded chunk's size follows from its length.
BITRATES = {"480p": 1_500_000, "720p": 3_000_000, "1080p": 6_000_000}
DEFAULT_PROFILE = "720p"
DEFAULT_CHUNK_SECONDS = 10


def _latency() -> None:
    time.sleep(random.uniform(0.05, 0.2))


def plan_chunks(video: dict[str, Any]) -> list[dict[str, float]]:
    """The chunks of a video (the workflow input): consecutive time ranges of `chunk_seconds`,
    the last one shorter. The same input always gives the same plan."""
    duration = float(video["duration_seconds"])
    size = int(video.get("chunk_seconds", DEFAULT_CHUNK_SECONDS))
    return [
        {"start": float(i * size), "end": float(min(duration, (i + 1) * size))}
        for i in range(math.ceil(duration / size))
    ]


def _encoded_object(video: dict[str, Any], index: int) -> str:
    profile = video.get("profile", DEFAULT_PROFILE)
    return f"encoded/{video['video_id']}/{profile}/chunk-{index:05d}.mp4"


def _size(video: dict[str, Any], seconds: float) -> int:
    return int(seconds * BITRATES[video.get("profile", DEFAULT_PROFILE)] / 8)


@registry.agent("split_video")
def split_video(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx, permanent_name="SourceUnreadable")
    _latency()
    video = ctx.input
    return {
        "video_id": video["video_id"],
        "source": video.get("source", f"s3://uploads/{video['video_id']}.mov"),
        "chunks": plan_chunks(video),
    }


@registry.agent("encode_chunk")
def encode_chunk(ctx: AgentContext) -> dict[str, Any]:
    """One chunk (a map item): encoded once per item key, whatever its retries."""
    inject(ctx, permanent_name="CorruptChunk")
    _latency()
    assert ctx.item_index is not None, "encode_chunk runs as a map's item"
    video, chunk, index = ctx.input, ctx.item, ctx.item_index
    seconds = chunk["end"] - chunk["start"]
    effect = ledger.apply(
        SERVICE,
        ctx.idempotency_key,
        "encode",
        {"object": _encoded_object(video, index), "bytes": _size(video, seconds)},
    )
    after_effect(ctx)
    return {
        "chunk": index,
        "object": effect["object"],
        "seconds": seconds,
        "bytes": effect["bytes"],
    }


@registry.agent("delete_encoded_chunk")
def delete_encoded_chunk(ctx: AgentContext) -> dict[str, Any]:
    """Undo one item: delete the chunk its key encoded, if it encoded one (it may have failed
    before encoding, or encoded and died before saying so)."""
    inject(ctx)
    _latency()
    assert ctx.forward is not None
    encoded = ledger.undo(SERVICE, ctx.forward.idempotency_key, ctx.idempotency_key, "delete_chunk")
    return {"chunk": ctx.item_index, "deleted": None if encoded is None else encoded["object"]}


@registry.agent("package_video")
def package_video(ctx: AgentContext) -> dict[str, Any]:
    """Join the encoded chunks, in order, into one rendition. A chunk the map tolerated as
    failed (`null` in its output) is encoded again here with the software encoder, slower but
    sure, and becomes part of the package (deleting the package deletes it too)."""
    inject(ctx, permanent_name="PackagingFailed")
    _latency()
    video = ctx.input
    encoded: list[dict[str, Any] | None] = ctx.dependencies["encode_chunks"]
    plan = plan_chunks(video)
    fallback = [i for i, chunk in enumerate(encoded) if chunk is None]
    parts = [
        chunk["object"] if chunk is not None else _encoded_object(video, i) + ".sw"
        for i, chunk in enumerate(encoded)
    ]
    size = sum(
        chunk["bytes"] if chunk is not None else _size(video, plan[i]["end"] - plan[i]["start"])
        for i, chunk in enumerate(encoded)
    )
    profile = video.get("profile", DEFAULT_PROFILE)
    manifest = f"packages/{video['video_id']}/{profile}/index.m3u8"
    effect = ledger.apply(
        SERVICE,
        ctx.idempotency_key,
        "package",
        {"manifest": manifest, "parts": len(parts), "bytes": size, "fallback": fallback},
    )
    after_effect(ctx)
    return {
        "manifest": effect["manifest"],
        "chunks": effect["parts"],
        "bytes": effect["bytes"],
        "software_encoded": effect["fallback"],
        "seconds": plan[-1]["end"] if plan else 0.0,
    }


@registry.agent("delete_package")
def delete_package(ctx: AgentContext) -> dict[str, Any]:
    inject(ctx)
    _latency()
    assert ctx.forward is not None
    packaged = ledger.undo(
        SERVICE, ctx.forward.idempotency_key, ctx.idempotency_key, "delete_package"
    )
    return {"deleted": None if packaged is None else packaged["manifest"]}
