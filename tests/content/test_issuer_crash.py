"""SIGKILL an uploader at random moments: the node's issuer must never hand a position out twice.

The child uploads random files through ``UploadSession`` (the node stamps
every chunk) and logs each group the store acknowledged, with every chunk's
slot. The parent kills it with SIGKILL at random moments, starts another
one on the same store, and so on. Afterwards:

- every acknowledged chunk is still stored under its acknowledged slot: had
  a restarted issuer handed out a position again, the newer stamp would
  have evicted the older chunk from its slot (the slot rule);
- no two acknowledged chunks share a slot;
- each bucket's count covers every acknowledged position in it, and the
  store verifies clean.

An issuer that kept its counts in memory, or wrote them after the chunks,
fails the first check at the first restart.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from chunkstore.reserve import ReserveStore
from chunkstore.store.verify import verify_store
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.stamp import make_index
from tests.content.helpers import NODE_KEY, node_batch

ROUNDS = int(os.environ.get("CHUNKSTORE_ISSUER_CRASH_ROUNDS", "5"))
REPO = Path(__file__).resolve().parents[2]
DEPTH, BUCKET_DEPTH = 14, 6  # 64 buckets of 256 positions: buckets fill at the same pace as the batch


def child(path: str, batch_hex: str, log_path: str, seed: int) -> None:
    """Upload random files forever through the node's session, logging every acknowledged group."""
    import io

    from chunkstore.content import NodeStamper, UploadSession, write_file

    class Log:
        def __init__(self, out) -> None:
            self.out = out

        def stored(self, session, addresses, results) -> None:
            for address in addresses:
                stamp = next(s for s in store.stamps_of(address) if s.batch_id == batch.id)
                self.out.write(f"{address.hex()} {stamp.index.hex()} {stamp.timestamp_ns}\n")
            self.out.flush()

        def finished(self, session, reference) -> None:
            pass

        def aborted(self, session, error) -> None:
            pass

    rng = random.Random(seed)
    store = ReserveStore(path)
    batch = store.batches.get(bytes.fromhex(batch_hex))
    stamper = NodeStamper(store, Signer(NODE_KEY))
    with open(log_path, "a") as out:
        print("ready", flush=True)
        while True:
            session = UploadSession(store, stamper, batch.id, group_size=rng.choice([4, 16, 64]), observers=[Log(out)])
            data = rng.randbytes(rng.randrange(1, 40) * 4096 + rng.randrange(4096))
            session.finish(write_file(io.BytesIO(data), session, level=rng.choice([0, 1])))


def test_a_killed_uploader_never_reuses_a_position(tmp_path):
    path = str(tmp_path / "store")
    log_path = str(tmp_path / "acks.log")
    signer = Signer(NODE_KEY)
    batch = node_batch(signer, depth=DEPTH, bucket_depth=BUCKET_DEPTH, immutable=True)
    with ReserveStore(path) as store:
        store.batches.add(batch)
    rng = random.Random(1234)
    code = (f"from tests.content.test_issuer_crash import child; "
            f"child({path!r}, {batch.id.hex()!r}, {log_path!r}, {{seed}})")
    for round_ in range(ROUNDS):
        proc = subprocess.Popen([sys.executable, "-c", code.format(seed=round_)], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "ready", (line, proc.stderr.read() if proc.stderr else "")
        time.sleep(rng.uniform(0.3, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    acks: dict[bytes, tuple[bytes, int]] = {}
    with open(log_path) as f:
        for line in f:
            parts = line.split()
            if line.endswith("\n") and len(parts) == 3:
                acks[bytes.fromhex(parts[0])] = (bytes.fromhex(parts[1]), int(parts[2]))  # the latest stamp wins
    assert len(acks) > 100, "the children acknowledged too little to show anything"
    with ReserveStore(path) as store:
        slots: dict[bytes, bytes] = {}
        highest: dict[int, int] = {}
        for address, (index, ts) in acks.items():
            held = {s.index: s.timestamp_ns for s in store.stamps_of(address) if s.batch_id == batch.id}
            assert index in held and held[index] >= ts, f"chunk {address.hex()} lost its slot {index.hex()}"
            assert slots.setdefault(index, address) == address, f"slot {index.hex()} handed out twice"
            bucket, position = int.from_bytes(index[:4], "big"), int.from_bytes(index[4:], "big")
            highest[bucket] = max(highest.get(bucket, -1), position)
        counts = store.issuers.bucket_counts(batch.id, BUCKET_DEPTH)
        for bucket, position in highest.items():
            assert counts[bucket] > position, (bucket, counts[bucket], position)
        assert make_index(0, 0)  # the index layout the log uses
    report = verify_store(path)
    assert report.ok, report.problems[:5]
