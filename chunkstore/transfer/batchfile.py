"""Batches as JSON files: what ``--batches FILE.json`` reads and ``export --batches`` writes.

The shape is that of ``POST /batches`` (and of ``GET /batches`` entries):
objects with ``batchID`` (64 hex), ``owner`` (40 hex), ``depth``,
``bucketDepth``, ``immutable``, ``value`` (a decimal string: values outgrow
JSON numbers) and ``start``; ``batchTTL`` is ignored. The file holds a list
of them, or ``{"batches": [...]}`` as ``GET /batches`` answers.
"""

from __future__ import annotations

import json
from typing import Any

from chunkstore.store.batchstore import Batch
from chunkstore.store.errors import InvalidBatch
from chunkstore.swarm.jsontext import parse_json

FIELDS = ("batchID", "owner", "depth", "bucketDepth", "immutable", "value", "start")


def parse_batches(text: str, where: str = "batches file") -> list[Batch]:
    """Batches from JSON text; ``InvalidBatch`` naming the entry and field on any problem."""
    try:
        doc = parse_json(text)
    except ValueError as exc:
        raise InvalidBatch(f"{where}: not JSON ({exc})") from None
    if isinstance(doc, dict) and isinstance(doc.get("batches"), list):
        doc = doc["batches"]
    if not isinstance(doc, list):
        raise InvalidBatch(f"{where}: want a JSON list of batches (or {{\"batches\": [...]}})")
    out = []
    seen: set[bytes] = set()
    for i, obj in enumerate(doc):
        batch = _batch(obj, f"{where}: batch {i}")
        if batch.id in seen:
            raise InvalidBatch(f"{where}: batch {i}: batch {batch.id.hex()} is listed twice")
        seen.add(batch.id)
        out.append(batch)
    return out


def load_batches(path: str) -> list[Batch]:
    with open(path, encoding="utf-8") as f:
        return parse_batches(f.read(), path)


def _batch(obj: Any, where: str) -> Batch:
    if not isinstance(obj, dict):
        raise InvalidBatch(f"{where}: want a JSON object")
    missing = [f for f in FIELDS if f not in obj]
    if missing:
        raise InvalidBatch(f"{where}: missing field(s) {', '.join(missing)}")

    def hexfield(name: str, size: int) -> bytes:
        v = obj[name]
        if not isinstance(v, str) or len(v) != 2 * size:
            raise InvalidBatch(f"{where}: {name} must be {2 * size} hex characters")
        try:
            return bytes.fromhex(v)
        except ValueError:
            raise InvalidBatch(f"{where}: {name} is not hex") from None

    def intfield(name: str) -> int:
        v = obj[name]
        if isinstance(v, bool) or not isinstance(v, int):
            raise InvalidBatch(f"{where}: {name} must be an integer")
        return v

    value = obj["value"]
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        raise InvalidBatch(f"{where}: value must be a non-negative decimal integer string")
    if not isinstance(obj["immutable"], bool):
        raise InvalidBatch(f"{where}: immutable must be true or false")
    batch = Batch(
        id=hexfield("batchID", 32),
        owner=hexfield("owner", 20),
        depth=intfield("depth"),
        bucket_depth=intfield("bucketDepth"),
        immutable=obj["immutable"],
        value=int(value),
        start=intfield("start"),
    )
    try:
        batch.validate()
    except InvalidBatch as exc:
        raise InvalidBatch(f"{where}: {exc}") from None
    return batch


def render_batch(batch: Batch, ttl: int | None = None) -> dict[str, Any]:
    """A batch in the reference node's JSON shape and key order (``GET /batches``; ``batchTTL`` when given)."""
    body: dict[str, Any] = {
        "batchID": batch.id.hex(),
        "value": str(batch.value),
        "start": batch.start,
        "owner": batch.owner.hex(),
        "depth": batch.depth,
        "bucketDepth": batch.bucket_depth,
        "immutable": batch.immutable,
    }
    if ttl is not None:
        body["batchTTL"] = ttl
    return body


def dump_batches(batches: list[Batch]) -> str:
    return json.dumps([render_batch(b) for b in batches], indent=1) + "\n"
