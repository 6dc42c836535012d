"""``--demo``: a demo batch and a few thousand random stamped chunks, so ``/rchash`` has a reserve.

The batch owner is a secp256k1 key generated once and kept in the data dir
(``demo-owner.key``, hex, mode 0600); the batch id is
``keccak("chunkstore demo batch" | owner)``, depth 20, bucket depth 16 (the
network's), mutable, value 10^15, start block 0. Every tenth chunk is a SOC
signed by the same key; the rest are CACs with random payloads of random
length. Stamps take fresh slots of the batch and the current time, so a
sample with the default consensus time (now) sees them all.

The fill only runs on a store without chunks; on later starts the batch is
re-registered if missing and nothing else happens.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.constants import NETWORK_BUCKET_DEPTH
from chunkstore.swarm.errors import BucketFull, SwarmError
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.proximity import proximity
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import make_soc

log = logging.getLogger(__name__)

KEY_FILE = "demo-owner.key"
DEPTH = 20
BUCKET_DEPTH = NETWORK_BUCKET_DEPTH
VALUE = 10**15
SOC_EVERY = 10
BATCH = 250  # chunks per store commit


@dataclass(frozen=True)
class DemoReport:
    batch_id: bytes
    owner: bytes
    cacs: int
    socs: int
    filled: bool
    seconds: float


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically and durably, readable by the owner only.

    The directory is synced after the rename: until then a power loss can
    lose the new name, and a node key lost that way comes back as another
    identity that no longer owns the node's batches. A write that fails
    (a full disk) leaves no temporary file behind.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            data = text.encode()
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def demo_signer(data_dir: Path) -> Signer:
    """The demo batch owner's key: read from the data dir, or generated and kept there."""
    path = Path(data_dir) / KEY_FILE
    if path.exists():
        raw = path.read_text().strip()
        try:
            return Signer(bytes.fromhex(raw))
        except ValueError as exc:
            raise ValueError(f"{path}: not a 64-hex secp256k1 private key ({exc})") from None
    signer = Signer.generate()
    write_private(path, signer.secret.hex() + "\n")
    return signer


def demo_batch_id(owner: bytes) -> bytes:
    return keccak256(b"chunkstore demo batch", owner)


def ensure_demo_batch(store: ReserveStore, signer: Signer) -> Batch:
    batch_id = demo_batch_id(signer.address)
    try:
        return store.batches.get(batch_id)
    except SwarmError:  # unknown batch: register it below
        pass
    batch = Batch(
        id=batch_id,
        owner=signer.address,
        depth=DEPTH,
        bucket_depth=BUCKET_DEPTH,
        immutable=False,
        value=VALUE,
        start=0,
    )
    store.batches.add(batch)
    return batch


def fill_demo(
    store: ReserveStore,
    data_dir: Path,
    chunks: int = 3000,
    *,
    stop: threading.Event | None = None,
    seed: int | None = None,
) -> DemoReport:
    """Register the demo batch; on an empty store, write ``chunks`` random stamped chunks."""
    t0 = time.perf_counter()
    signer = demo_signer(data_dir)
    batch = ensure_demo_batch(store, signer)
    if int(store.stats().get("chunks", 0)) > 0:
        log.info("demo: store already holds chunks; not filling", extra={"fields": {"batch_id": batch.id.hex()}})
        return DemoReport(batch.id, signer.address, 0, 0, False, time.perf_counter() - t0)
    rng = random.Random(seed)
    # With a storage radius, only chunks of the node's neighbourhood are accepted.
    overlay, radius = store.reserve.overlay, store.reserve.radius
    # Immutable issuing: a full bucket skips the chunk rather than overwrite an earlier one.
    issuer = StampIssuer(signer, batch.id, DEPTH, BUCKET_DEPTH, immutable=True)
    cacs = socs = 0
    pending: list[tuple[bytes, bytes]] = []

    def flush() -> None:
        # one durable commit per group instead of one per chunk; a SOC body is
        # read as a SOC by the store because its stamp only fits that reading
        if pending:
            store.put_many(pending)
            pending.clear()

    for i in range(chunks):
        if stop is not None and stop.is_set():
            break
        size = rng.choice((4096, 4096, rng.randint(1, 4096)))
        payload = rng.randbytes(size)
        is_soc = i % SOC_EVERY == SOC_EVERY - 1
        if is_soc:
            _, wrapped = make_cac(payload)
            soc = make_soc(signer, rng.randbytes(32), wrapped)
            address, data = soc.address, soc.data
        else:
            address, data = make_cac(payload)
        if radius and proximity(overlay, address) < radius:
            continue
        try:
            stamp = issuer.stamp(address).to_bytes()
        except BucketFull:
            continue  # does not happen at demo sizes
        pending.append((data, stamp))
        socs += is_soc
        cacs += not is_soc
        if len(pending) >= BATCH:
            flush()
            log.info("demo: filling", extra={"fields": {"written": cacs + socs, "of": chunks}})
    flush()
    seconds = time.perf_counter() - t0
    log.info(
        "demo: filled",
        extra={"fields": {"batch_id": batch.id.hex(), "owner": signer.address.hex(), "cacs": cacs, "socs": socs,
                          "seconds": round(seconds, 2)}},
    )
    return DemoReport(batch.id, signer.address, cacs, socs, True, seconds)
