"""A fresh random reserve, end to end: written in the reference node's export format, loaded by
``chunkstore import``, sampled by the running daemon's ``GET /rchash``, and compared with the textbook
sampler (tests/sampler/textbook.py, which shares no code with the store or the sampler).

This is the path an operator's reserve takes (export on Bee, import here, the redistribution round
asks for the sample), so it is checked as a whole, not only piece by piece: several batches of
different owners, depths and values (one below ``--min-batch-balance``), CACs of every size and SOCs,
chunks stamped by two batches, stamp times on both sides of the consensus time, and anchors at depth.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass

import pytest

import tests.sampler.textbook as textbook
from api.cli import import_main
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.constants import SAMPLE_SIZE
from chunkstore.swarm.soc import make_soc
from chunkstore.transfer.batchfile import dump_batches
from tests.api.daemonproc import Daemon
from tests.store.helpers import OTHER_KEY, OWNER_KEY, Stamper, make_batch, signer
from tests.transfer.helpers import Entry, entry, in_process_budget_args, write_tar

T0 = 1_750_000_000_000_000_000  # stamp times are T0 .. T0 + SPREAD
SPREAD = 1_000_000
MIN_BALANCE = 10**13
THIRD_KEY = hashlib.sha256(b"end-to-end third owner").digest()


@dataclass(frozen=True)
class Record:
    address: bytes
    data: bytes
    is_soc: bool
    batch_id: bytes
    index: bytes
    timestamp: int
    value: int


def _reserve(seed: int) -> tuple[list[Entry], list[Record], list]:
    rng = random.Random(seed)
    batches = [
        (make_batch(101, depth=22, bucket_depth=16, value=10**15), OWNER_KEY),
        (make_batch(102, depth=20, bucket_depth=16, value=10**12, key=OTHER_KEY), OTHER_KEY),  # below MIN_BALANCE
        (make_batch(103, depth=24, bucket_depth=18, value=10**14, key=THIRD_KEY), THIRD_KEY),
    ]
    stampers = [Stamper(b, key) for b, key in batches]
    entries, records = [], []
    seen: set[bytes] = set()
    for i in range(360):
        if rng.random() < 0.12:
            _, wrapped = make_cac(rng.randbytes(rng.randrange(1, 4097)))
            soc = make_soc(signer(OTHER_KEY if i % 2 else THIRD_KEY), rng.randbytes(32), wrapped)
            address, data, is_soc = soc.address, soc.data, True
        else:
            size = rng.choice([0, 1, 31, 32, 33, 4095, 4096, rng.randrange(4097)])
            address, data = make_cac(rng.randbytes(size))
            is_soc = False
        if address in seen:  # an empty payload again, say: one chunk is one chunk
            continue
        seen.add(address)
        # most chunks under one batch, some under two (the sample keeps the smallest batch id)
        chosen = rng.sample(range(3), 2 if rng.random() < 0.15 else 1)
        for k in chosen:
            batch = batches[k][0]
            ts = T0 + rng.randrange(SPREAD)
            stamp = stampers[k].stamp(address, ts=ts)
            entries.append(entry(address, data, stamp))
            records.append(Record(address, data, is_soc, batch.id, stamp.index, ts, batch.value))
    rng.shuffle(entries)
    return entries, records, [b for b, _ in batches]


def _textbook(records: list[Record], anchor: bytes, depth: int, consensus_time: int) -> list[tuple]:
    """SPEC.md's sample from the records alone: (taddr, address, batch id) of the 16 smallest."""
    best: dict[bytes, tuple] = {}
    for r in records:
        if textbook.proximity(r.address, anchor) < depth:
            continue
        if r.value < MIN_BALANCE or r.timestamp > consensus_time:
            continue
        textbook.check_chunk(r.address, r.data, r.is_soc)
        key = (r.batch_id, r.index)
        if r.address not in best or key < best[r.address][0]:
            best[r.address] = (key, textbook.transformed_address(r.address, r.data, r.is_soc, anchor))
    items = sorted((taddr, address, key[0]) for address, (key, taddr) in best.items())
    return items[:SAMPLE_SIZE]


@pytest.fixture(scope="module", params=[7, 8])
def imported(request, tmp_path_factory):
    """The reserve of one seed, imported into a data dir and served."""
    tmp = tmp_path_factory.mktemp(f"e2e-{request.param}")
    entries, records, batches = _reserve(request.param)
    write_tar(str(tmp / "export.tar"), entries, reference_quirks=True)
    (tmp / "batches.json").write_text(dump_batches(batches))
    data = tmp / "data"
    # the budget from this process's own size: in a whole test run it has grown past the default's
    assert import_main([str(tmp / "export.tar"), "--data-dir", str(data), "--batches", str(tmp / "batches.json"),
                        "--workers", "0", *in_process_budget_args()]) == 0  # fmt: skip
    daemon = Daemon(data, "--min-batch-balance", str(MIN_BALANCE))
    try:
        daemon.wait_ready()
        yield daemon, records
    finally:
        daemon.stop()


@pytest.mark.parametrize(
    ("depth", "consensus_offset"),
    [(0, SPREAD), (0, SPREAD // 2), (1, SPREAD), (2, 3 * SPREAD // 4)],
)
def test_daemon_sample_of_an_imported_reserve_equals_the_textbook(imported, depth, consensus_offset):
    daemon, records = imported
    rng = random.Random(depth * 1000 + consensus_offset)
    compared = 0
    for _ in range(2):
        anchor1, anchor2 = rng.randbytes(32), rng.randbytes(32)
        consensus_time = T0 + consensus_offset
        expected = _textbook(records, anchor1, depth, consensus_time)
        if len(expected) < SAMPLE_SIZE:
            status, body = daemon.request("GET", f"/rchash/{depth}/{anchor1.hex()}/{anchor2.hex()}"
                                                 f"?consensusTime={consensus_time}")  # fmt: skip
            assert status == 422, body
            continue
        got = daemon.json(f"/rchash/{depth}/{anchor1.hex()}/{anchor2.hex()}?consensusTime={consensus_time}"
                          "&verbose=true")  # fmt: skip
        assert [(bytes.fromhex(i["transformedAddress"]), bytes.fromhex(i["chunkAddress"]),
                 bytes.fromhex(i["batchID"])) for i in got["items"]] == expected  # fmt: skip
        assert got["hash"] == textbook.sample_hash([(address, taddr) for taddr, address, _ in expected]).hex()
        proofs = got["proofs"]
        for name in ("proof1", "proof2", "proofLast"):
            proof = proofs[name]
            # each witness carries a sampled chunk's stamp: its batch is one the sample kept for that chunk
            stamped = proof["postageProof"]["postageId"]
            assert stamped in {batch.hex() for _, _, batch in expected}, json.dumps(proof)[:300]
        compared += 1
    assert compared, "every anchor had too few chunks: the case checks nothing"
