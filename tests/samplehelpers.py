"""Shared helpers of the sampler tests: the reference vector's chunks and a
deliberately simple one-process sampler written straight from SPEC.md."""

from __future__ import annotations

from dataclasses import dataclass

from reference_recipe import load_vector  # noqa: F401  (re-exported for the sampler tests)

from chunkstore.bmt import chunk_hash
from chunkstore.cac import make_cac
from chunkstore.keccak import keccak256
from chunkstore.layout import ChunkType
from chunkstore.signer import Signer
from chunkstore.soc import make_soc
from chunkstore.stamp import Stamp, sign_stamp
from sampler.items import SampleItem

VECTOR_KEY = b"0" * 32
VECTOR_BATCH = keccak256(b"The Inverted Jenny")
VECTOR_INDEX = bytes.fromhex("0000000000080303")
VECTOR_TIMESTAMP = bytes.fromhex("0000000000030308")
VECTOR_ANCHOR1 = b"\x64"
VECTOR_ANCHOR2 = b"\x1e"
VECTOR_SAMPLE_HASH = bytes.fromhex("b012904b0c3e6462158b4416556caa888031a79bad46d2ffa7012408c9c38aa8")


@dataclass(frozen=True)
class BuiltChunk:
    address: bytes
    data: bytes
    chunk_type: int


def vector_chunks() -> list[BuiltChunk]:
    """The 16 chunks of the reference regression vector, in recipe order."""
    signer = Signer(VECTOR_KEY)
    out = []
    for i in range(16):
        address, data = make_cac(b"Unstoppable data! Chunk #%d" % (i + 1))
        if i % 2 == 0:
            soc = make_soc(signer, keccak256(b"ID #%d" % (i + 1)), data)
            out.append(BuiltChunk(soc.address, soc.data, ChunkType.SOC))
        else:
            out.append(BuiltChunk(address, data, ChunkType.CAC))
    return out


def vector_stamp(address: bytes) -> Stamp:
    bucket, position = int.from_bytes(VECTOR_INDEX[:4], "big"), int.from_bytes(VECTOR_INDEX[4:], "big")
    return sign_stamp(
        Signer(VECTOR_KEY), address, VECTOR_BATCH, bucket, position, int.from_bytes(VECTOR_TIMESTAMP, "big")
    )


def spec_transformed_address(address: bytes, data: bytes, chunk_type: int, anchor: bytes) -> bytes:
    """SPEC.md's rule, written out independently of sampler.items."""
    if chunk_type == ChunkType.CAC:
        return chunk_hash(data, anchor)
    return keccak256(address + chunk_hash(data[97:], anchor))


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
    _taddr: dict[tuple[bytes, bytes], bytes] | None = None

    def taddr(self, address: bytes, anchor: bytes) -> bytes:
        if self._taddr is None:
            self._taddr = {}
        key = (address, anchor)
        got = self._taddr.get(key)
        if got is None:
            data, ctype = self.chunks[address]
            got = self._taddr[key] = spec_transformed_address(address, data, ctype, anchor)
        return got


def force_batch(store, batch) -> None:
    """Back door: overwrite a batch record, bypassing the rules of ``BatchStore.update``.

    The store refuses owner and bucket-depth changes and shrinking depth, and
    validates stamps on put; this is the only way to hold invalid stamps.
    """
    from chunkstore.batchstore import encode_batch

    bs = store.batches
    with bs._env.begin(write=True) as txn:
        txn.put(batch.id, encode_batch(batch), db=bs._db)


def force_rogue(store, address: bytes, stamp: Stamp) -> None:
    """Back door: mark one stamp entry's chunk type as 0 (rogue) in the index."""
    from chunkstore.layout import stamp_key

    shard = store.shard(store.shard_of(address))
    key = stamp_key(address, stamp.batch_id, stamp.index)
    with shard.env.begin(write=True) as txn:
        value = bytes(txn.get(key, db=shard.stamps))
        txn.put(key, b"\x00" + value[1:], db=shard.stamps)


class SlotCounter:
    """Hands out unused positions per (batch, bucket) so no put evicts another."""

    def __init__(self) -> None:
        self._next: dict[tuple[bytes, int], int] = {}

    def take(self, batch_id: bytes, bucket: int) -> int:
        key = (batch_id, bucket)
        pos = self._next.get(key, 0)
        self._next[key] = pos + 1
        return pos


def build_world(path: str, n: int, seed: int = 1, shards: int = 4) -> World:
    """A store of ``n`` random chunks (CAC and SOC) under five batches:

    A, B: valid; C: low value (50); D: owner changed behind the store's back
    (every D stamp invalid); E: depth lowered behind its back (positions >= 4
    invalid). About 15% of chunks carry a second stamp of another batch; stamp
    times spread over base_time + 0..1000 ns; three stamp entries are rogue.
    """
    import random

    from chunkstore.batchstore import Batch
    from chunkstore.stamp import bucket_of
    from chunkstore.store import ChunkStore

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
    store = ChunkStore(path, shards=shards)
    for b in batches.values():
        store.batches.add(b)
    names = list(spec)
    weights = [spec[k][3] for k in names]
    base = 1_700_000_000_000_000_000
    slots = SlotCounter()
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
            b = batches[bid]
            bucket = bucket_of(address, b.bucket_depth)
            owner = signers[spec[name][0]]
            st = sign_stamp(owner, address, bid, bucket, slots.take(bid, bucket), base + rng.randrange(0, 1001))
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


def simple_sample(world: World, anchor: bytes, depth: int, consensus_time: int, min_balance: int | None) -> Expected:
    """SPEC.md's sample, one chunk at a time, from the tests' own record of the store.

    A stamp counts if its entry is not rogue, its batch is known and not below
    the balance, its time is not after the consensus time, and it is valid.
    A chunk with several such stamps enters once, with the stamp of the
    smallest batch id (then index).
    """
    from chunkstore.errors import InvalidStamp
    from chunkstore.proximity import proximity
    from chunkstore.stamp import validate_stamp

    out = []
    iterated = below = rogue = new = 0
    for address, (data, ctype) in world.chunks.items():
        if proximity(address, anchor) < depth:
            continue
        valid = []
        for st in world.stamps[address]:
            iterated += 1
            b = world.batches[st.batch_id]
            if min_balance is not None and b.value < min_balance:
                below += 1
                continue
            if (address, st.batch_id, st.index) in world.rogue:
                rogue += 1
                continue
            if st.timestamp_ns > consensus_time:
                new += 1
                continue
            try:
                validate_stamp(st, address, b.owner, b.depth, b.bucket_depth)
            except InvalidStamp:
                continue
            valid.append(st)
        if valid:
            best = min(valid, key=lambda s: (s.batch_id, s.index))
            out.append((world.taddr(address, anchor), address, data, best, ctype))
    out.sort(key=lambda t: t[0])
    return Expected(out, iterated, below, rogue, new)
