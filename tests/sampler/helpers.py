"""Shared helpers of the sampler tests: the reference vector's chunks and a
deliberately simple one-process sampler written straight from SPEC.md.

The simple sampler checks chunks and stamps with ``textbook`` (its own BMT,
keccak from ``sha3`` and signature recovery with ``coincurve``), never with
the code under test; ``chunkstore`` is used here only to *build* stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tests.sampler.textbook as textbook
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.constants import SAMPLE_SIZE, ChunkType
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import make_soc
from chunkstore.swarm.stamp import Stamp, sign_stamp
from chunkstore.testing import recipe
from sampler.items import SampleItem
from tests.swarm.recipe import load_vector  # noqa: F401  (re-exported for the sampler tests)

VECTOR_KEY = recipe.KEY
VECTOR_BATCH = recipe.BATCH_ID
VECTOR_INDEX = recipe.INDEX
VECTOR_TIMESTAMP = recipe.TIMESTAMP
VECTOR_ANCHOR1 = recipe.ANCHOR1
VECTOR_ANCHOR2 = recipe.ANCHOR2
VECTOR_SAMPLE_HASH = recipe.EXPECTED_SAMPLE_ADDRESS


@dataclass(frozen=True)
class BuiltChunk:
    address: bytes
    data: bytes
    chunk_type: int


def vector_chunks() -> list[BuiltChunk]:
    """The 16 chunks of the reference regression vector, in recipe order."""
    return [BuiltChunk(c.address, c.data, c.chunk_type) for c in recipe.recipe_chunks()]


def vector_stamp(address: bytes) -> Stamp:
    bucket, position = int.from_bytes(VECTOR_INDEX[:4], "big"), int.from_bytes(VECTOR_INDEX[4:], "big")
    return sign_stamp(recipe.SIGNER, address, VECTOR_BATCH, bucket, position, int.from_bytes(VECTOR_TIMESTAMP, "big"))


def spec_transformed_address(address: bytes, data: bytes, chunk_type: int, anchor: bytes) -> bytes:
    """SPEC.md's rule, by the textbook primitives (independent of sampler.items and chunkstore.swarm.bmt.reference)."""
    return textbook.transformed_address(address, data, chunk_type == ChunkType.SOC, anchor)


def vector_sample() -> list[SampleItem]:
    items = []
    for ch in vector_chunks():
        items.append(
            SampleItem(
                transformed_address=spec_transformed_address(ch.address, ch.data, ch.chunk_type, VECTOR_ANCHOR1),
                chunk_address=ch.address,
                chunk_data=ch.data,
                stamp=vector_stamp(ch.address),
                chunk_type=ch.chunk_type,
            )
        )
    items.sort(key=lambda it: it.transformed_address)
    return items


# ------------------------------------------------------------------ random stores


@dataclass
class World:
    """A store built by the tests plus the tests' own record of what is in it.

    ``batches`` holds the batch records as the store now has them (after any
    back-door change); ``rogue`` the (address, batch id, index) stamp entries
    whose index type byte was overwritten with 0.
    """

    path: str
    store: object
    chunks: dict[bytes, tuple[bytes, int]]
    stamps: dict[bytes, list[Stamp]]
    batches: dict[bytes, object]
    rogue: set[tuple[bytes, bytes, bytes]]
    base_time: int
    _taddr: dict[tuple[bytes, bytes], bytes] = field(default_factory=dict)
    _valid: dict[tuple, bool] = field(default_factory=dict)  # textbook verdicts: they do not depend on the anchor

    def taddr(self, address: bytes, anchor: bytes) -> bytes:
        key = (address, anchor)
        got = self._taddr.get(key)
        if got is None:
            data, ctype = self.chunks[address]
            got = self._taddr[key] = spec_transformed_address(address, data, ctype, anchor)
        return got

    def chunk_valid(self, address: bytes) -> bool:
        data, ctype = self.chunks[address]
        key = ("chunk", address, data, ctype)
        if key not in self._valid:
            try:
                textbook.check_chunk(address, data, ctype == ChunkType.SOC)
                self._valid[key] = True
            except textbook.Invalid:
                self._valid[key] = False
        return self._valid[key]

    def stamp_valid(self, address: bytes, st: Stamp, batch) -> bool:
        key = ("stamp", address, st.to_bytes(), batch.owner, batch.depth, batch.bucket_depth)
        if key not in self._valid:
            try:
                textbook.check_stamp(address, st.batch_id, st.index, st.timestamp, st.signature,
                                     batch.owner, batch.depth, batch.bucket_depth)  # fmt: skip
                self._valid[key] = True
            except textbook.Invalid:
                self._valid[key] = False
        return self._valid[key]


def force_batch(store, batch) -> None:
    """Back door: overwrite a batch record, bypassing the rules of ``BatchStore.update``.

    The store refuses owner and bucket-depth changes and shrinking depth, and
    validates stamps on put; this is the only way to hold invalid stamps.
    """
    from chunkstore.store.batchstore import encode_batch

    bs = store.batches
    with bs._env.begin(write=True) as txn:
        txn.put(batch.id, encode_batch(batch), db=bs._db)


def force_rogue(store, address: bytes, stamp: Stamp) -> None:
    """Back door: mark one stamp entry's chunk type as 0 (rogue) in the index."""
    from chunkstore.store.layout import stamp_key

    shard = store.shard(store.shard_of(address))
    key = stamp_key(address, stamp.batch_id, stamp.index)
    with shard.env.begin(write=True) as txn:
        value = bytes(txn.get(key, db=shard.stamps))
        txn.put(key, b"\x00" + value[1:], db=shard.stamps)


def _shard_txn(store, address: bytes):
    shard = store.shard(store.shard_of(address))
    return shard, shard.env.begin(write=True)


def force_entry(store, address: bytes, stamp: Stamp, chunk_type: int) -> None:
    """Back door: write one stamp entry as given (any index, signature or type byte), no slot, no checks."""
    from chunkstore.store.layout import stamp_key, stamp_value

    shard, txn = _shard_txn(store, address)
    with txn:
        txn.put(stamp_key(address, stamp.batch_id, stamp.index),
                stamp_value(chunk_type, stamp.timestamp, stamp.signature), db=shard.stamps)  # fmt: skip


def force_data(store, address: bytes, data: bytes) -> None:
    """Back door: store ``data`` under ``address`` whatever it hashes to (head and tail as the layout cuts them)."""
    from chunkstore.store.layout import HEAD_SIZE

    shard, txn = _shard_txn(store, address)
    with txn:
        txn.put(address, data[:HEAD_SIZE], db=shard.chunks)
        if len(data) > HEAD_SIZE:
            txn.put(address, data[HEAD_SIZE:], db=shard.tails)
        else:
            txn.delete(address, db=shard.tails)


def force_unknown_batch(store, batch_id: bytes) -> None:
    """Back door: delete a batch record but keep its stamps (they now name an unknown batch)."""
    bs = store.batches
    with bs._env.begin(write=True) as txn:
        assert txn.delete(batch_id, db=bs._db)


def faulty_backend(monkeypatch, wrong: dict[bytes, bytes]) -> None:
    """Make the accelerated path answer ``wrong[t]`` where the right answer is ``t`` (the reference path stays right).

    Only phase 1 run in this process (``workers=0``) sees the patch.
    """
    import numpy as np

    from chunkstore.swarm.bmt import backend as hashing

    real, real_at = hashing.transformed_addresses, hashing.transformed_addresses_at

    def spoil(out, n: int) -> None:
        for i in range(n):
            bad = wrong.get(out[i].tobytes())
            if bad is not None:
                out[i] = np.frombuffer(bad, np.uint8)

    def broken(buf, lengths, offsets, soc_addresses, is_soc, prefix, out, *, reference=False):
        real(buf, lengths, offsets, soc_addresses, is_soc, prefix, out, reference=reference)
        if not reference:
            spoil(out, len(lengths))

    def broken_at(head_at, head_len, tail_at, tail_len, soc_addresses, is_soc, prefix, out):
        real_at(head_at, head_len, tail_at, tail_len, soc_addresses, is_soc, prefix, out)
        spoil(out, len(head_len))

    # Both ways the accelerated path hashes: rows in a buffer, and chunks where they lie (the direct scan).
    monkeypatch.setattr(hashing, "transformed_addresses", broken)
    monkeypatch.setattr(hashing, "transformed_addresses_at", broken_at)


def build_world(path: str, n: int, seed: int = 1, shards: int = 4) -> World:
    """A store of ``n`` random chunks (CAC and SOC) under five batches:

    A, B: valid; C: low value (50); D: owner changed behind the store's back
    (every D stamp invalid); E: depth lowered behind its back (positions >= 4
    invalid). About 15% of chunks carry a second stamp of another batch; stamp
    times spread over base_time + 0..1000 ns; three stamp entries are rogue.
    """
    import random

    from chunkstore.reserve import ReserveStore
    from chunkstore.store.batchstore import Batch
    from chunkstore.swarm.postage import StampIssuer

    rng = random.Random(seed)
    signers = [Signer(keccak256(b"signer %d" % i)) for i in range(3)]
    spec = {  # name: (owner, bucket depth, value, weight)
        b"A": (0, 6, 1000, 35),
        b"B": (1, 4, 1000, 20),
        b"C": (0, 6, 50, 10),
        b"D": (2, 4, 1000, 15),
        b"E": (2, 4, 1000, 20),
    }
    ids = {name: keccak256(b"batch " + name) for name in spec}
    batches = {
        ids[name]: Batch(ids[name], signers[o].address, 22, bd, False, value, 0)
        for name, (o, bd, value, _) in spec.items()
    }
    store = ReserveStore(path, shards=shards)
    for b in batches.values():
        store.batches.add(b)
    names = list(spec)
    weights = [spec[k][3] for k in names]
    base = 1_700_000_000_000_000_000
    issuers = {
        ids[name]: StampIssuer(signers[owner], ids[name], batches[ids[name]].depth, bd)
        for name, (owner, bd, _, _) in spec.items()
    }
    chunks: dict[bytes, tuple[bytes, int]] = {}
    stamps: dict[bytes, list[Stamp]] = {}
    puts = []
    for _ in range(n):
        size = rng.choice((0, 1, 31, 32, 33, 100, 1000, 4095, 4096, rng.randrange(0, 4097)))
        payload = rng.randbytes(size)
        address, data = make_cac(payload)
        ctype = ChunkType.CAC
        if rng.random() < 0.3:
            soc = make_soc(signers[rng.randrange(3)], rng.randbytes(32), data)
            address, data, ctype = soc.address, soc.data, ChunkType.SOC
        first = rng.choices(names, weights)[0]
        chosen = [first]
        if rng.random() < 0.15:
            chosen.append(rng.choice([x for x in names if x != first]))
        chunks[address] = (data, ctype)
        # Equal payloads (the empty one above all) give one chunk under several stamps.
        stamps.setdefault(address, [])
        for name in chosen:
            bid = ids[name]
            st = issuers[bid].stamp(address, timestamp_ns=base + rng.randrange(0, 1001))
            stamps[address].append(st)
            puts.append((data, st))
    store.put_many(puts)
    from dataclasses import replace

    d, e = ids[b"D"], ids[b"E"]
    batches[d] = replace(batches[d], owner=signers[1].address)
    batches[e] = replace(batches[e], depth=6)
    force_batch(store, batches[d])
    force_batch(store, batches[e])
    rogue = set()
    for address in rng.sample(sorted(stamps), 3):
        st = stamps[address][0]
        force_rogue(store, address, st)
        rogue.add((address, st.batch_id, st.index))
    return World(path, store, chunks, stamps, batches, rogue, base)


@dataclass
class Expected:
    items: list[tuple[bytes, bytes, bytes, Stamp, int]]  # (taddr, address, data, stamp, type), all eligible, sorted
    iterated: int
    below: int
    rogue: int
    new: int
    passing: dict[bytes, set[bytes]]  # address -> batches of its entries that pass the index-only filters

    def duplicates(self) -> int:
        """Candidates the sampler must skip as duplicates: for each of the first 15 items (the 16th
        ends the sample), the further batches under which the same chunk passed phase 1."""
        return sum(
            sum(1 for b in self.passing[address] if b > stamp.batch_id)
            for _, address, _, stamp, _ in self.items[: SAMPLE_SIZE - 1]
        )


def simple_sample(
    world: World,
    anchor: bytes,
    depth: int,
    consensus_time: int,
    min_balance: int | None,
    overlay: bytes | None = None,
    radius: int = 0,
) -> Expected:
    """SPEC.md's sample, one chunk at a time, from the tests' own record of the store.

    A chunk is walked if ``proximity(address, anchor) >= depth`` and (given an
    overlay) ``proximity(address, overlay) >= radius``, as the reference walks
    its reserve from the storage radius. A stamp counts if its entry is not
    rogue and its batch is known and not below the balance; of a batch's
    stamps of the chunk only the one with the smallest index counts (as the
    reference loads it), and only if its time is not after the consensus time
    and it is valid; the chunk must be valid too. A chunk with several such
    stamps (of several batches) enters once, with the smallest batch id's.
    """
    out = []
    passing: dict[bytes, set[bytes]] = {}
    iterated = below = rogue = new = 0
    for address, (data, ctype) in world.chunks.items():
        if textbook.proximity(address, anchor) < depth:
            continue
        if overlay is not None and textbook.proximity(address, overlay) < radius:
            continue
        by_batch: dict[bytes, list[Stamp]] = {}
        for st in world.stamps[address]:
            iterated += 1
            b = world.batches.get(st.batch_id)
            if min_balance is not None and b is not None and b.value < min_balance:
                below += 1
                continue
            if (address, st.batch_id, st.index) in world.rogue:
                rogue += 1
                continue
            by_batch.setdefault(st.batch_id, []).append(st)
            if st.timestamp_ns > consensus_time:
                new += 1
                continue
            passing.setdefault(address, set()).add(st.batch_id)
        valid = []
        for batch_id, sts in by_batch.items():
            st = min(sts, key=lambda s: s.index)  # the one stamp a batch vouches with
            b = world.batches.get(batch_id)
            if st.timestamp_ns > consensus_time or b is None or not world.stamp_valid(address, st, b):
                continue
            valid.append(st)
        if not valid or not world.chunk_valid(address):
            continue
        best = min(valid, key=lambda s: (s.batch_id, s.index))
        out.append((world.taddr(address, anchor), address, data, best, ctype))
    out.sort(key=lambda t: t[0])
    return Expected(out, iterated, below, rogue, new, passing)
