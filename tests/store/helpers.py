"""Shared helpers for the store tests: keys, batches, validly stamped chunks, dumps."""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import make_soc
from chunkstore.swarm.stamp import Stamp

OWNER_KEY = hashlib.sha256(b"chunkstore test batch owner").digest()
SOC_KEY = hashlib.sha256(b"chunkstore test soc owner").digest()
OTHER_KEY = hashlib.sha256(b"chunkstore test stranger").digest()

_signers: dict[bytes, Signer] = {}


def signer(key: bytes = OWNER_KEY) -> Signer:
    if key not in _signers:
        _signers[key] = Signer(key)
    return _signers[key]


def batch_id(n: int) -> bytes:
    return hashlib.sha256(b"batch %d" % n).digest()


def make_batch(n: int = 1, *, depth: int = 20, bucket_depth: int = 16, value: int = 10**15, key: bytes = OWNER_KEY) -> Batch:
    return Batch(
        id=batch_id(n), owner=signer(key).address, depth=depth, bucket_depth=bucket_depth,
        immutable=False, value=value, start=1,
    )


class Stamper:
    """Stamps of one batch by the test key, each in a fresh slot unless told otherwise.

    A ``StampIssuer`` whose clock ticks one nanosecond per stamp from a fixed
    start, so that every stamp is newer than the one before.
    """

    def __init__(self, batch: Batch, key: bytes = OWNER_KEY) -> None:
        self.batch = batch
        ticks = itertools.count(1_700_000_000_000_000_001)
        self.issuer = StampIssuer(
            signer(key), batch.id, batch.depth, batch.bucket_depth, clock=lambda: next(ticks)
        )

    def stamp(self, address: bytes, *, position: int | None = None, ts: int | None = None, bucket: int | None = None) -> Stamp:
        return self.issuer.stamp(address, timestamp_ns=ts, position=position, bucket=bucket)


def random_cac(size: int | None = None, rng: os.urandom = os.urandom) -> tuple[bytes, bytes]:
    """(address, data) of a CAC with a random payload (full 4096 bytes by default)."""
    payload = rng(4096 if size is None else size)
    return make_cac(payload)


def random_soc(size: int = 100, soc_id: bytes | None = None, key: bytes = SOC_KEY) -> tuple[bytes, bytes]:
    _, wrapped = make_cac(os.urandom(size))
    soc = make_soc(signer(key), soc_id or os.urandom(32), wrapped)
    return soc.address, soc.data


def open_store(path: str, shards: int = 4, batches: list[Batch] | None = None) -> ReserveStore:
    store = ReserveStore(path, shards)
    for b in batches or []:
        if b.id not in store.batches:
            store.batches.add(b)
    return store


def dump(store: ReserveStore) -> dict:
    """Every record of every database, to compare states exactly."""
    out = {}
    for i in range(store.shard_count):
        shard = store.shard(i)
        with shard.env.begin() as txn:
            for name, db in (("chunks", shard.chunks), ("tails", shard.tails), ("stamps", shard.stamps),
                             ("slots", shard.slots), ("pending", shard.pending), ("info", shard.info_db)):
                out[(i, name)] = list(txn.cursor(db=db).iternext())
    out["batches"] = [(b.id, b) for b in store.batches]
    return out


# Child processes for the crash and concurrency tests (run with ``python -c``).

# The repository root: children run there, so that ``python -c`` finds the ``tests`` package.
REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTESTED = make_batch(9, depth=6, bucket_depth=0)  # 64 slots, one bucket: puts keep replacing each other
FRESH = make_batch(1)


def child_command(code: str) -> list[str]:
    """argv running Python ``code`` in a fresh interpreter; start it with ``cwd=REPO_DIR``."""
    import sys

    code = f"import tests.store.helpers as storehelpers; {code}"
    return [sys.executable, "-c", code]


def crash_child(path: str, ack_path: str, seed: int) -> None:
    """Put chunks forever, logging each acknowledged put; the parent kills us at random."""
    import random
    import time

    rng = random.Random(seed)
    fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    soc_ids = [bytes([i]) * 32 for i in range(4)]
    clock = [time.time_ns()]

    def now() -> int:
        clock[0] = max(clock[0] + 1, time.time_ns())
        return clock[0]

    def stamped(batch: Batch, positions: int) -> tuple[bytes, bytes, Stamp]:
        kind = rng.random()
        if kind < 0.1:
            addr, data = random_soc(rng.choice((10, 4096)), soc_id=rng.choice(soc_ids))
        elif kind < 0.2:
            addr, data = random_cac(4096)
        else:
            addr, data = random_cac(rng.randrange(0, 200))
        stamp = Stamper(batch).stamp(addr, position=rng.randrange(positions), ts=now())
        return addr, data, stamp

    def log(tag: str, items: list[tuple[bytes, bytes, Stamp]]) -> None:
        lines = "".join(f"{tag} {a.hex()} {(s.batch_id + s.index).hex()} {s.timestamp_ns}\n" for a, _, s in items)
        os.write(fd, lines.encode())

    store = ReserveStore(path)
    os.write(fd, b"R\n")
    done: list[bytes] = []
    while True:
        op = rng.random()
        if op < 0.45:
            items = [stamped(CONTESTED, 64)]
        elif op < 0.75:
            items = [stamped(FRESH, 16)]
        elif op < 0.93:
            items = [stamped(rng.choice((CONTESTED, FRESH)), 16) for _ in range(rng.randrange(2, 10))]
        elif done:
            addr = rng.choice(done)
            os.write(fd, f"d {addr.hex()}\n".encode())  # intent first: the delete may land unacknowledged
            store.delete(addr)
            continue
        else:
            continue
        log("p", items)  # intent: a put may land without its acknowledgement
        if len(items) == 1:
            store.put(items[0][1], items[0][2])
        else:
            store.put_many([(d, s) for _, d, s in items])
        log("P", items)
        done.extend(a for a, _, _ in items)


def writer_child(path: str, seconds: float, seed: int) -> None:
    """Concurrency test writer: batches of fresh chunks, some replacing contested slots."""
    import random
    import time

    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    with ReserveStore(path) as store:
        while time.monotonic() < deadline:
            items = []
            for _ in range(rng.randrange(1, 20)):
                batch = CONTESTED if rng.random() < 0.3 else FRESH
                addr, data = random_cac(rng.choice((10, 300, 4096)))
                items.append((data, Stamper(batch).stamp(addr, position=rng.randrange(16), ts=time.time_ns())))
            store.put_many(items)


def reader_child(path: str, seconds: float, out_path: str) -> None:
    """Concurrency test reader: check snapshot invariants per shard until time runs out."""
    import json
    import time

    from chunkstore.store.admission import classify
    from chunkstore.store.shard import ShardReader
    from chunkstore.swarm.constants import ChunkType

    store = ReserveStore(path, readonly=True)
    readers = [ShardReader(path, i) for i in range(store.shard_count)]
    deadline = time.monotonic() + seconds
    checks, errors = 0, []
    buf = bytearray(4104)
    while time.monotonic() < deadline and len(errors) < 5:
        for i, reader in enumerate(readers):
            with reader.snapshot() as snap:
                txn, shard = snap.txn, reader
                n_chunks = txn.stat(shard.chunks)["entries"]
                n_stamps = txn.stat(shard.stamps)["entries"]
                total = 0
                seen = set()
                for addr, kind, _batch_id, _ts in snap.iter_range():
                    if addr in seen:
                        continue
                    seen.add(addr)
                    data = snap.view(addr)
                    if classify(addr, data) != ChunkType(kind):
                        errors.append(f"shard {i}: chunk {addr.hex()} data does not match its address")
                    n = snap.read_into(addr, buf)
                    if bytes(buf[:n]) != bytes(data):
                        errors.append(f"shard {i}: read_into differs from view for {addr.hex()}")
                    total += n
                    for stamp in snap.stamps_of(addr):
                        held = txn.get(stamp.batch_id + stamp.index, db=shard.slots)
                        if held is None or bytes(held) != addr + stamp.timestamp:
                            errors.append(f"shard {i}: stamp of {addr.hex()} without its slot")
                    checks += 1
                raw = txn.get(b"bytes", db=shard.info_db)
                counter = int.from_bytes(raw, "big") if raw else 0
                if len(seen) != n_chunks or sum(1 for _ in snap.iter_range()) != n_stamps or counter != total:
                    errors.append(
                        f"shard {i}: snapshot counts disagree: {len(seen)} chunks seen vs {n_chunks}, "
                        f"bytes {total} vs counter {counter}"
                    )
        # The store-level API answers from its own snapshots; a chunk listed must be readable.
        for addr, *_ in list(store.iter_neighbourhood(b"", 0))[:50]:
            try:
                store.get(addr)
            except KeyError:
                pass  # replaced since it was listed: allowed, the listing was an older snapshot
    with open(out_path, "w") as f:
        json.dump({"checks": checks, "errors": errors}, f)


def evict(fd: int) -> None:
    """Drop the file open at ``fd`` from the page cache, synced first: dirty pages stay whatever the advice."""
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


@dataclass
class Mapping:
    """One mapping of this process, as ``/proc/self/smaps`` describes it."""

    lo: int
    hi: int
    perms: str
    path: str | None
    fields: dict[str, str] = field(default_factory=dict)  # "Rss" -> "12 kB", "VmFlags" -> "rd mr ...", ...


def smaps() -> Iterator[Mapping]:
    """This process's mappings with their smaps fields."""
    current: Mapping | None = None
    with open("/proc/self/smaps") as lines:
        for line in lines:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5:  # a mapping's first line
                if current is not None:
                    yield current
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                current = Mapping(lo, hi, head[1], head[5] if len(head) == 6 else None)
            elif current is not None and head and head[0].endswith(":"):
                current.fields[head[0][:-1]] = line.split(":", 1)[1].strip()
    if current is not None:
        yield current


def _read_only_maps_of(path: str) -> Iterator[Mapping]:
    target = os.path.realpath(path)
    return (m for m in smaps() if m.path == target and "w" not in m.perms)


def mapping_read_flags(data_file: str) -> set[str]:
    """The read-ahead flags (sr: sequential, rr: random) of this process's read-only mapping of ``data_file``."""
    return {f for m in _read_only_maps_of(data_file) for f in m.fields.get("VmFlags", "").split() if f in ("sr", "rr")}


def mapping_rss_kb(path: str) -> int:
    """Resident kB of this process's read-only mappings of ``path`` (its pages mapped in, from /proc/self/smaps)."""
    return sum(int(m.fields["Rss"].split()[0]) for m in _read_only_maps_of(path))
