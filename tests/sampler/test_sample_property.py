"""The sample of random small reserves against a compact reference of the selection rules.

The reference here knows only the rules, as Bee's ``ReserveSample``
(pkg/storer/sample.go) applies them, and the textbook primitives for the
hashes: a chunk is walked when ``proximity(address, anchor) >= depth``; a
batch below the minimum balance is left out; each batch vouches for a chunk
with one stamp, its stamp of the chunk with the smallest index
(``chunkstamp.LoadWithBatchID``), which must not be newer than the consensus
time; a chunk with several vouching batches enters once, under the smallest
batch id (this project's deterministic pick); the 16 smallest transformed
addresses are the sample. The reserves mix CACs and SOCs, chunks stamped by
several batches and several times by one batch, in any time order, and SOCs
put again with another payload (the last put's data is the chunk's).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import tests.sampler.textbook as textbook
from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.constants import SAMPLE_SIZE
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import make_soc
from chunkstore.swarm.stamp import Stamp
from sampler import InsufficientSample, make_inclusion_proofs, reserve_sample, sample_hash, verify_inclusion_proof

T0 = 1_700_000_000_000_000_000
OWNER = Signer(keccak256(b"property owner"))
SOC_OWNER = Signer(keccak256(b"property soc owner"))
BATCH_IDS = sorted(keccak256(b"property batch %d" % i) for i in range(3))
VALUES = (1000, 1000, 10)  # the third batch is below the balance when one is asked for
MIN_BALANCE = 100

chunk_specs = hs.lists(
    hs.tuples(
        hs.integers(0, 40),  # payload seed: small seeds repeat, giving one chunk several times
        hs.sampled_from((0, 1, 32, 33, 100, 4095, 4096)),  # payload size
        hs.booleans(),  # wrap in a SOC (its id from the seed alone: one SOC, several payloads)
        hs.lists(hs.tuples(hs.integers(0, 2), hs.integers(-3, 3)), min_size=1, max_size=3),  # (batch, time offset)
    ),
    min_size=20,
    max_size=70,
)


@dataclass(frozen=True)
class Held:
    address: bytes
    data: bytes
    is_soc: bool
    stamp: Stamp


def _chunk(seed: int, size: int, is_soc: bool) -> tuple[bytes, bytes]:
    payload = (keccak256(b"payload %d" % seed) * 129)[:size]
    address, data = make_cac(payload)
    if is_soc:
        soc = make_soc(SOC_OWNER, keccak256(b"id %d" % seed), data)
        address, data = soc.address, soc.data
    return address, data


def _reference(held: list[Held], anchor: bytes, depth: int, consensus: int, min_balance: int | None) -> list[tuple]:
    data = {h.address: (h.data, h.is_soc) for h in held}  # a SOC put again with other data: the last put's
    first: dict[tuple[bytes, bytes], Held] = {}  # (address, batch) -> the entry with the smallest index
    for h in held:
        key = (h.address, h.stamp.batch_id)
        if key not in first or h.stamp.index < first[key].stamp.index:
            first[key] = h
    best: dict[bytes, Held] = {}
    for (address, batch_id), h in first.items():
        if textbook.proximity(address, anchor) < depth:
            continue
        if min_balance is not None and VALUES[BATCH_IDS.index(batch_id)] < min_balance:
            continue
        if h.stamp.timestamp_ns > consensus:
            continue
        if address not in best or batch_id < best[address].stamp.batch_id:
            best[address] = h
    out = [(textbook.transformed_address(a, *data[a], anchor), a, h.stamp) for a, h in best.items()]
    return sorted(out, key=lambda t: t[0])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=chunk_specs,
    anchor=hs.binary(min_size=1, max_size=2),
    depth=hs.sampled_from((0, 0, 0, 1, 2)),
    offset=hs.integers(-2, 2),
    with_min=hs.booleans(),
    anchor2=hs.binary(min_size=1, max_size=2),
)
def test_sample_equals_reference(specs, anchor, depth, offset, with_min, anchor2):
    consensus = T0 + offset
    min_balance = MIN_BALANCE if with_min else None
    issuers = [StampIssuer(OWNER, bid, 24, 2) for bid in BATCH_IDS]
    held: list[Held] = []
    puts = []
    for seed, size, is_soc, stamps in specs:
        address, data = _chunk(seed, size, is_soc)
        for b, dt in stamps:
            st = issuers[b].stamp(address, timestamp_ns=T0 + dt)  # a new position each time
            held.append(Held(address, data, is_soc, st))
            puts.append((data, st))
    with tempfile.TemporaryDirectory() as d:
        store = ReserveStore(d, shards=2)
        try:
            for bid, value in zip(BATCH_IDS, VALUES, strict=True):
                store.batches.add(Batch(bid, OWNER.address, 24, 2, False, value, 0))
            store.put_many(puts)
            want = _reference(held, anchor, depth, consensus, min_balance)
            try:
                res = reserve_sample(store, anchor, depth, consensus, min_balance, workers=0)
            except InsufficientSample as exc:
                assert len(want) < SAMPLE_SIZE
                assert exc.found == len(want)
                return
            got = [(it.transformed_address, it.chunk_address, it.stamp) for it in res.items]
            assert got == want[:SAMPLE_SIZE]
            root = sample_hash(res.items)
            assert root == textbook.sample_hash([(t[1], t[0]) for t in want[:SAMPLE_SIZE]])
            for proof in make_inclusion_proofs(res.items, anchor, anchor2):
                verify_inclusion_proof(proof, root, anchor)
        finally:
            store.close()
