"""Helpers of the API tests: stamped chunk builders, a real store in a temp dir, a simple sampler."""

from __future__ import annotations

import os
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
        """Stamp for another batch from now on (a forger reusing someone's batch id), with fresh slots."""
        self.issuer = StampIssuer(self.signer, value, self.depth, self.bucket_depth)

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
