"""Helpers of the API tests: stamped chunk builders, a real store in a temp dir, a simple sampler."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import SOC, make_soc

OWNER_KEY = bytes.fromhex("11" * 32)


class Uploader:
    """Signs chunks, SOCs and stamps for one batch, handing out fresh slots."""

    def __init__(self, key: bytes = OWNER_KEY, depth: int = 20, bucket_depth: int = 16, seed: bytes = b"batch") -> None:
        self.signer = Signer(key)
        self.depth = depth
        self.bucket_depth = bucket_depth
        self.batch_id = keccak256(b"api-test " + seed + self.signer.address)

    @property
    def batch_id(self) -> bytes:
        return self.issuer.batch_id

    @batch_id.setter
    def batch_id(self, value: bytes) -> None:
        """Stamp for another batch from now on (a forger reusing someone's batch id), with fresh slots.

        The batch is mutable (``batch()``, ``batch_json()``), so a full bucket wraps to its first
        position, as the reference issuer does: fuzzed uploads may repeat one payload many times.
        """
        self.issuer = StampIssuer(self.signer, value, self.depth, self.bucket_depth, immutable=False)

    def batch_json(self, value: int = 10**15, start: int = 0, immutable: bool = False) -> dict[str, Any]:
        return {
            "batchID": self.batch_id.hex(),
            "owner": self.signer.address.hex(),
            "depth": self.depth,
            "bucketDepth": self.bucket_depth,
            "immutable": immutable,
            "value": str(value),
            "start": start,
        }

    def batch(self, value: int = 10**15) -> Batch:
        return Batch(self.batch_id, self.signer.address, self.depth, self.bucket_depth, False, value, 0)

    def stamp(self, address: bytes, timestamp_ns: int | None = None, position: int | None = None) -> bytes:
        return self.issuer.stamp(address, timestamp_ns=timestamp_ns, position=position).to_bytes()

    def cac(self, payload: bytes | None = None) -> tuple[bytes, bytes, bytes]:
        """(address, data, stamp) of a fresh CAC."""
        payload = os.urandom(64) if payload is None else payload
        address, data = make_cac(payload)
        return address, data, self.stamp(address)

    def soc(self, payload: bytes | None = None, soc_id: bytes | None = None) -> tuple[SOC, bytes]:
        """(SOC, stamp) of a fresh SOC signed by the batch owner."""
        payload = os.urandom(64) if payload is None else payload
        _, wrapped = make_cac(payload)
        s = make_soc(self.signer, soc_id or os.urandom(32), wrapped)
        return s, self.stamp(s.address)


@dataclass
class SimpleItem:
    transformed_address: bytes
    chunk_address: bytes
    chunk_data: bytes
    stamp: Any
    chunk_type: int


@dataclass
class SimpleStats:
    total_iterated: int = 0
    workers: int = 1
    total_duration: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class SimpleResult:
    """What the daemon reads of a sample (the sampler's SampleResult has the same fields)."""

    items: list[SimpleItem]
    stats: SimpleStats
    storage_radius: int = 0
    hash_backend: str = ""  # "": the daemon reports the backend in use


def simple_sample(store: ReserveStore, anchor: bytes, depth: int, consensus_time: int) -> SimpleResult:
    """A one-process sample over the store's index, straight from SPEC.md (first valid stamp wins)."""
    from sampler.errors import InsufficientSample
    from sampler.items import transformed_address

    t0 = time.perf_counter()
    found: dict[bytes, SimpleItem] = {}
    addresses = set()
    for addr, ctype, batch_id, ts in store.iter_neighbourhood(anchor, depth):
        addresses.add(addr)
        if ts > consensus_time or addr in found:
            continue
        data = store.get(addr)
        stamp = next(s for s in store.stamps_of(addr) if s.batch_id == batch_id)
        found[addr] = SimpleItem(transformed_address(addr, data, ctype, anchor), addr, data, stamp, int(ctype))
    if len(found) < 16:
        raise InsufficientSample(len(found))
    items = sorted(found.values(), key=lambda it: it.transformed_address)
    return SimpleResult(items[:16], SimpleStats(len(addresses), 1, time.perf_counter() - t0))


def open_store(path: Path) -> ReserveStore:
    return ReserveStore(path / "store")


ROOT = Path(__file__).resolve().parents[2]


class Daemon:
    """``python -m api.cli serve`` on a free port, its JSON log lines collected from stderr."""

    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.args = args
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.logs: list[dict] = []
        self.raw: list[str] = []
        self.port: int | None = None
        self._listening = threading.Event()
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 90) -> Daemon:
        cmd = [sys.executable, "-m", "api.cli", "serve", "--port", "0", "--log-format", "json", *self.args]
        if "--data-dir" not in self.args:
            cmd += ["--data-dir", str(self.data_dir)]
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not self._listening.wait(0.1):
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited {self.proc.returncode}: {self.raw[-20:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"daemon not listening after {timeout}s: {self.raw[-20:]}")
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.raw.append(line.rstrip())
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            self.logs.append(rec)
            if rec.get("msg") == "listening":
                self.port = rec["port"]
                self._listening.set()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 60) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> int:
        if self.proc is not None and self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                return self.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.wait()
        return self.proc.returncode if self.proc else 0

    def messages(self) -> list[str]:
        return [r.get("msg", "") for r in self.logs]
