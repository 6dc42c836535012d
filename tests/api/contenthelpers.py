"""Helpers of the content API tests: an app with a node key and a node-owned batch, tars, multipart bodies."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient

from api.app import make_app
from api.config import Config
from chunkstore.reserve import ReserveStore
from chunkstore.swarm.signer import Signer

NODE_KEY = bytes.fromhex("44" * 32)
BATCH = bytes.fromhex("ab" * 32)
TESTDATA = Path(__file__).resolve().parents[1] / "testdata"
API_VECTORS = json.loads((TESTDATA / "manifest" / "bee_api_vectors.json").read_text())
FILE_VECTORS = json.loads((TESTDATA / "bee_file_vectors.json").read_text())


def content_app(tmp_path: Path, **cfg: Any) -> tuple[Any, ReserveStore]:
    """An app over a fresh store with the node key ``NODE_KEY``; ``cfg`` goes to ``Config``."""
    store = ReserveStore(tmp_path / "store")

    async def no_sample(anchor: bytes, depth: int, ct: int) -> Any:
        raise AssertionError("no sampling in the content tests")

    config = Config(data_dir=tmp_path, **cfg)
    app = make_app(store, config, overlay=bytes(range(32)), sample_fn=no_sample, close_store=True,
                   signer=Signer(NODE_KEY))
    return app, store


async def register_batch(client: TestClient, batch_id: bytes = BATCH, depth: int = 20, immutable: bool = False,
                         bucket_depth: int = 16, **extra: Any) -> dict[str, Any]:
    """``POST /batches`` without an owner: a batch the node owns."""
    body = {"batchID": batch_id.hex(), "depth": depth, "bucketDepth": bucket_depth, "immutable": immutable,
            "value": "100000000000", "start": 0, **extra}
    r = await client.post("/batches", json=body)
    assert r.status == 201, await r.text()
    return dict(await r.json())


def upload_headers(batch_id: bytes = BATCH, **extra: str) -> dict[str, str]:
    return {"Swarm-Postage-Batch-Id": batch_id.hex(), **extra}


def make_tar(files: Iterable[tuple[str, bytes]], fmt: int = tarfile.USTAR_FORMAT, kinds: dict[str, bytes] | None = None) -> bytes:
    """A tar of ``(name, data)`` entries; ``kinds`` gives non-regular entries a type flag."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if kinds and name in kinds:
                info.type = kinds[name]
                info.size = 0
                tar.addfile(info)
                continue
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def make_multipart(files: Iterable[tuple[str, bytes, str]], boundary: str = "chunkstoreBoundary7") -> bytes:
    """A multipart/form-data body as Bee's tests write one: ``name`` is the path, the part has its type."""
    out = bytearray()
    for path, data, content_type in files:
        out += f"--{boundary}\r\n".encode()
        out += f'Content-Disposition: form-data; name="{path}"\r\n'.encode()
        if content_type:
            out += f"Content-Type: {content_type}\r\n".encode()
        out += f"Content-Length: {len(data)}\r\n\r\n".encode()
        out += data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out)


@dataclass
class Ctx:
    client: TestClient
    store: ReserveStore
    tmp: Path
