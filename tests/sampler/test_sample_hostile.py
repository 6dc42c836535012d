"""The sampler against stores built to trip it, checked by the textbook sampler.

- the reference node's 16 regression chunks in a real store, sampled end to end;
- a chunk stamped twice by one batch whose first entry is rogue: the proof
  must carry the second stamp (phase 2 sees exactly what phase 1 saw);
- a store whose 120 smallest transformed addresses are all ineligible, in
  every way the validator knows (index filters, stamp rules, signature bytes,
  chunk data), sampled with k=1 so every shard runs dry and rescans.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

import pytest

import tests.sampler.textbook as textbook
from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.constants import SAMPLE_SIZE, ChunkType
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import make_soc
from chunkstore.swarm.stamp import Stamp, bucket_of
from sampler import check_sample, make_inclusion_proofs, reserve_sample, sample_hash, verify_inclusion_proof
from tests.sampler.helpers import (
    VECTOR_ANCHOR1,
    VECTOR_ANCHOR2,
    VECTOR_BATCH,
    VECTOR_KEY,
    VECTOR_SAMPLE_HASH,
    VECTOR_TIMESTAMP,
    World,
    force_batch,
    force_data,
    force_entry,
    force_rogue,
    force_unknown_batch,
    simple_sample,
    vector_chunks,
    vector_sample,
    vector_stamp,
)

# ------------------------------------------------------------------ the regression vector


def test_textbook_reproduces_the_regression_vector():
    """The tests' own primitives reach bee's sample hash: they are a reference worth comparing to."""
    pairs = []
    owner = Signer(VECTOR_KEY).address
    for ch in vector_chunks():
        is_soc = ch.chunk_type == ChunkType.SOC
        textbook.check_chunk(ch.address, ch.data, is_soc)
        st = vector_stamp(ch.address)
        textbook.check_stamp(ch.address, st.batch_id, st.index, st.timestamp, st.signature, owner, 20, 0)
        pairs.append((textbook.transformed_address(ch.address, ch.data, is_soc, VECTOR_ANCHOR1), ch.address))
    pairs.sort()
    assert textbook.sample_hash([(a, t) for t, a in pairs]) == VECTOR_SAMPLE_HASH


@pytest.mark.parametrize("workers", [0, 2])
def test_regression_vector_end_to_end(tmp_path, workers):
    """bee's 16 chunks stored and sampled by reserve_sample: the sample hash is bee's ``b012904b...c38aa8``.

    All 16 stamps share one batch slot (bucket 0, position 0x80303), which the
    store's slot rule allows once: the first goes in by ``put``, the others
    through the back door, as a node that synced them would hold them.
    """
    owner = Signer(VECTOR_KEY)
    # bucket depth 0: every address is in bucket 0; depth 20 puts position 0x80303 in range
    batch = Batch(VECTOR_BATCH, owner.address, 20, 0, False, 1000, 0)
    consensus = int.from_bytes(VECTOR_TIMESTAMP, "big")
    store = ReserveStore(tmp_path / "s", shards=4)
    try:
        store.batches.add(batch)
        chunks = vector_chunks()
        first = chunks[0]
        store.put(first.data, vector_stamp(first.address))
        for ch in chunks[1:]:
            force_data(store, ch.address, ch.data)
            force_entry(store, ch.address, vector_stamp(ch.address), ch.chunk_type)
        result = reserve_sample(store, VECTOR_ANCHOR1, 0, consensus, workers=workers)
        assert sample_hash(result.items) == VECTOR_SAMPLE_HASH
        want = vector_sample()
        assert [(it.transformed_address, it.chunk_address, it.chunk_data, it.stamp, int(it.chunk_type))
                for it in result.items] == [
            (it.transformed_address, it.chunk_address, it.chunk_data, it.stamp, int(it.chunk_type)) for it in want
        ]  # fmt: skip
        assert make_inclusion_proofs(result.items, VECTOR_ANCHOR1, VECTOR_ANCHOR2) == make_inclusion_proofs(
            want, VECTOR_ANCHOR1, VECTOR_ANCHOR2
        )
        check_sample(result.items, VECTOR_ANCHOR1, store.batches, consensus)
    finally:
        store.close()


# ------------------------------------------------------------------ a rogue first entry

T0 = 1_000_000
OWNER = Signer(keccak256(b"hostile owner"))
OTHER = Signer(keccak256(b"hostile other"))


@pytest.mark.parametrize("soc", [False, True], ids=["cac", "soc"])
@pytest.mark.parametrize("workers", [0, 2])
def test_rogue_first_entry_stays_out_of_the_proof(tmp_path, soc, workers):
    """Chunk X stamped twice by batch B (indexes i0 < i1); the i0 entry is rogue (type byte 0).

    Phase 1 skips the rogue entry, so X enters the sample through i1: its
    item, and the postage proof made from it, must carry the i1 stamp.
    """
    bid = keccak256(b"the one batch")
    store = ReserveStore(tmp_path / "s", shards=2)
    try:
        store.batches.add(Batch(bid, OWNER.address, 20, 2, False, 1000, 0))
        issuer = StampIssuer(OWNER, bid, 20, 2)
        rng = random.Random(11)
        puts = []

        def stamp(address, ts=T0):
            return issuer.stamp(address, timestamp_ns=ts)

        for _ in range(15):
            address, data = make_cac(rng.randbytes(200))
            puts.append((data, stamp(address)))
        address, data = make_cac(b"chunk X")
        if soc:
            x = make_soc(OTHER, keccak256(b"x"), data)
            address, data = x.address, x.data
        first, second = stamp(address), stamp(address, T0 + 1)
        assert first.index < second.index
        puts += [(data, first), (data, second)]
        store.put_many(puts)
        force_rogue(store, address, first)

        res = reserve_sample(store, b"\x77", 0, T0 + 10, workers=workers)
        (item,) = [it for it in res.items if it.chunk_address == address]
        assert item.stamp == second
        assert res.stats.rogue_chunks == 1
        proofs = make_inclusion_proofs(res.items, b"\x77", bytes([res.items.index(item)]))
        assert item.stamp in [p.stamp for p in proofs]  # anchor2 = the item's position: r1 picks it
        check_sample(res.items, b"\x77", store.batches, T0 + 10)
    finally:
        store.close()


# ------------------------------------------------------------------ a hostile store

ANCHOR = bytes.fromhex("3c" * 32)
BASE = 1_700_000_000_000_000_000
CONSENSUS = BASE + 1000
HOSTILE = 120  # the smallest transformed addresses, all ineligible
N_CHUNKS = 1600

SIGNERS = [Signer(keccak256(b"hostile signer %d" % i)) for i in range(3)]
BATCHES = {  # name: (owner, bucket depth, value)
    "G": (0, 4, 1000),
    "H": (1, 4, 1000),  # a second valid batch, for chunks held under two
    "LOW": (0, 4, 50),  # below the balance asked for
    "WRONG": (2, 4, 1000),  # owner changed behind the store's back
    "SHALLOW": (2, 4, 1000),  # depth lowered behind its back: positions >= 4 invalid
    "GONE": (1, 4, 1000),  # record deleted behind its back: unknown batch
}
IDS = {name: keccak256(b"hostile batch " + name.encode()) for name in BATCHES}


def _sig(kind: str, sig: bytes, other: bytes) -> bytes:
    """Signature bytes spoiled in one of the ways a stamp can carry bad bytes."""
    if kind == "sig-v26":
        return sig[:64] + b"\x1a"
    if kind == "sig-v35":
        return sig[:64] + b"\x23"
    if kind == "sig-v-swap":
        return sig[:64] + bytes([55 - sig[64]])  # 27 <-> 28: the other candidate key
    if kind == "sig-r-flip":
        return bytes([sig[0] ^ 1]) + sig[1:]
    if kind == "sig-zero":
        return bytes(65)
    if kind == "sig-s-zero":
        return sig[:32] + bytes(32) + sig[64:]
    if kind == "sig-other-digest":
        return other  # a good signature by the owner, over another chunk's stamp
    raise AssertionError(kind)


SIG_KINDS = ["sig-v26", "sig-v35", "sig-v-swap", "sig-r-flip", "sig-zero", "sig-s-zero", "sig-other-digest"]
# Every way a chunk's entries can all be ineligible: index-only filters, stamp rules, bad bytes, bad data.
SPOILERS = ["below-balance", "rogue", "too-new", "wrong-owner", "position", "unknown-batch", "bucket",
            *SIG_KINDS, "corrupt-data", "three-bad-entries", "one-batch-two-bad-entries",
            # A batch vouches with its stamp of smallest index only (Bee's LoadWithBatchID):
            # a later valid stamp of the same batch does not stand in for a spoilt first one.
            "bad-sig-then-valid", "too-new-then-valid"]  # fmt: skip
# Eligible chunks with a trap, placed right after the spoiled ones (so they are in the sample).
TRAPS = ["rogue-then-valid", "valid-then-too-new", "two-batches", "sig-v31", "two-batches-first-bad"]


# Spoilers (and traps) that leave exactly one entry passing the index filters, with an invalid stamp.
STAMP_SPOILERS = {"wrong-owner", "position", "unknown-batch", "bucket", *SIG_KINDS, "one-batch-two-bad-entries",
                  "bad-sig-then-valid", "two-batches-first-bad"}  # fmt: skip


@dataclass
class Hostile:
    world: World
    kinds: dict[bytes, str]  # address -> spoiler or trap name
    stored_taddr: dict[bytes, bytes]  # address -> transformed address of the bytes as stored (what phase 1 hashes)


def _build(path) -> Hostile:
    rng = random.Random(2024)
    batches = {
        IDS[n]: Batch(IDS[n], SIGNERS[o].address, 22, bd, False, v, 0) for n, (o, bd, v) in BATCHES.items()
    }
    store = ReserveStore(path, shards=4)
    for b in batches.values():
        store.batches.add(b)
    issuers = {IDS[n]: StampIssuer(SIGNERS[o], IDS[n], 22, bd) for n, (o, bd, _) in BATCHES.items()}

    # Chunks first, then order them by transformed address to aim the spoilers.
    chunks: dict[bytes, tuple[bytes, int]] = {}
    for _ in range(N_CHUNKS):
        address, data = make_cac(rng.randbytes(rng.choice((1, 40, 500, 4096, rng.randrange(0, 4097)))))
        ctype = ChunkType.CAC
        if rng.random() < 0.3:
            s = make_soc(SIGNERS[rng.randrange(3)], rng.randbytes(32), data)
            address, data, ctype = s.address, s.data, ChunkType.SOC
        chunks[address] = (data, ctype)
    taddr = {a: textbook.transformed_address(a, d, t == ChunkType.SOC, ANCHOR) for a, (d, t) in chunks.items()}
    order = sorted(chunks, key=taddr.__getitem__)
    threshold = taddr[order[HOSTILE]]
    kinds: dict[bytes, str] = {}
    for i, address in enumerate(order[:HOSTILE]):
        kinds[address] = SPOILERS[i % len(SPOILERS)]
    for i, address in enumerate(order[HOSTILE : HOSTILE + 2 * len(TRAPS)]):
        kinds[address] = TRAPS[i % len(TRAPS)]

    stamps: dict[bytes, list[Stamp]] = {a: [] for a in chunks}
    rogue: set[tuple[bytes, bytes, bytes]] = set()
    stored = dict(chunks)
    later: list = []  # back-door changes, made after the puts

    def stamp(address, name, ts=None, bucket=None, position=None):
        ts = BASE + rng.randrange(0, 1001) if ts is None else ts
        return issuers[IDS[name]].stamp(address, timestamp_ns=ts, position=position, bucket=bucket)

    puts = []
    spare = stamp(bytes(32), "G")  # a good signature over some other chunk's stamp

    def add(address, st):
        stamps[address].append(st)
        puts.append((chunks[address][0], st))

    for address, (data, ctype) in chunks.items():
        kind = kinds.get(address, "plain")
        if kind == "plain":
            add(address, stamp(address, rng.choice(("G", "H"))))
        elif kind == "below-balance":
            add(address, stamp(address, "LOW"))
        elif kind == "rogue":
            st = stamp(address, "G")
            add(address, st)
            rogue.add((address, st.batch_id, st.index))
        elif kind == "too-new":
            add(address, stamp(address, "G", ts=CONSENSUS + 1 + rng.randrange(1000)))
        elif kind == "wrong-owner":
            add(address, stamp(address, "WRONG"))
        elif kind == "position":
            add(address, stamp(address, "SHALLOW", position=4 + rng.randrange(1000)))
        elif kind == "unknown-batch":
            add(address, stamp(address, "GONE"))
        elif kind == "bucket":
            # A proper signature by the owner, over an index in another bucket; the store
            # would refuse it, so chunk and entry go in through the back door.
            wrong = bucket_of(address, 4) ^ (1 + rng.randrange(15))
            st = stamp(address, "G", bucket=wrong)
            stamps[address].append(st)
            later.append(lambda a=address, d=data, b=st, t=ctype: (force_data(store, a, d), force_entry(store, a, b, t)))
        elif kind in SIG_KINDS:
            st = stamp(address, "G")
            bad = dataclasses.replace(st, signature=_sig(kind, st.signature, spare.signature))
            stamps[address].append(bad)
            puts.append((data, st))
            later.append(lambda a=address, b=bad, t=ctype: force_entry(store, a, b, t))
        elif kind == "corrupt-data":
            add(address, stamp(address, "G"))
            # Spoil bytes so that the stored data still hashes among the smallest.
            raw = bytearray(data)
            while True:
                spoilt = bytearray(raw)
                at = rng.randrange(len(spoilt))
                spoilt[at] ^= 1 + rng.randrange(255)
                t = textbook.transformed_address(address, bytes(spoilt), ctype == ChunkType.SOC, ANCHOR)
                if t < threshold:
                    break
            stored[address] = (bytes(spoilt), ctype)
            later.append(lambda a=address, d=bytes(spoilt): force_data(store, a, d))
        elif kind == "three-bad-entries":
            add(address, stamp(address, "LOW"))
            st = stamp(address, "G")
            add(address, st)
            rogue.add((address, st.batch_id, st.index))
            add(address, stamp(address, "WRONG"))
        elif kind == "one-batch-two-bad-entries":
            st1, st2 = stamp(address, "G"), stamp(address, "G")
            add(address, st1)
            rogue.add((address, st1.batch_id, st1.index))
            bad = dataclasses.replace(st2, signature=_sig("sig-r-flip", st2.signature, b""))
            stamps[address].append(bad)
            puts.append((data, st2))
            later.append(lambda a=address, b=bad, t=ctype: force_entry(store, a, b, t))
        elif kind == "rogue-then-valid":
            st1, st2 = stamp(address, "G"), stamp(address, "G")
            add(address, st1)
            add(address, st2)
            rogue.add((address, st1.batch_id, st1.index))
        elif kind == "bad-sig-then-valid":
            st1, st2 = stamp(address, "G"), stamp(address, "G")
            bad = dataclasses.replace(st1, signature=_sig("sig-v-swap", st1.signature, b""))
            stamps[address] += [bad, st2]
            puts += [(data, st1), (data, st2)]
            later.append(lambda a=address, b=bad, t=ctype: force_entry(store, a, b, t))
        elif kind == "too-new-then-valid":
            add(address, stamp(address, "G", ts=CONSENSUS + 7))
            add(address, stamp(address, "G"))
        elif kind == "valid-then-too-new":
            add(address, stamp(address, "G"))
            add(address, stamp(address, "G", ts=CONSENSUS + 7))
        elif kind == "two-batches":
            add(address, stamp(address, "G"))
            add(address, stamp(address, "H"))
        elif kind == "two-batches-first-bad":
            # the entry of the smaller batch id is spoilt: the chunk must enter under the other one
            first, second = sorted(("G", "H"), key=IDS.__getitem__)
            st = stamp(address, first)
            bad = dataclasses.replace(st, signature=_sig("sig-zero", st.signature, b""))
            stamps[address].append(bad)
            puts.append((data, st))
            later.append(lambda a=address, b=bad, t=ctype: force_entry(store, a, b, t))
            add(address, stamp(address, second))
        elif kind == "sig-v31":
            st = stamp(address, "G")
            odd = dataclasses.replace(st, signature=st.signature[:64] + bytes([st.signature[64] + 4]))
            stamps[address].append(odd)
            puts.append((data, st))
            later.append(lambda a=address, b=odd, t=ctype: force_entry(store, a, b, t))
        else:
            raise AssertionError(kind)
    store.put_many(puts)
    for change in later:
        change()
    for address, st in [(a, s) for a, ss in stamps.items() for s in ss]:
        if (address, st.batch_id, st.index) in rogue:
            force_rogue(store, address, st)
    wrong, shallow = IDS["WRONG"], IDS["SHALLOW"]
    batches[wrong] = dataclasses.replace(batches[wrong], owner=SIGNERS[1].address)
    batches[shallow] = dataclasses.replace(batches[shallow], depth=6)
    force_batch(store, batches[wrong])
    force_batch(store, batches[shallow])
    force_unknown_batch(store, IDS["GONE"])
    del batches[IDS["GONE"]]
    stored_taddr = {
        a: textbook.transformed_address(a, d, t == ChunkType.SOC, ANCHOR) for a, (d, t) in stored.items()
    }
    world = World(str(path), store, stored, stamps, batches, rogue, BASE)
    return Hostile(world, kinds, stored_taddr)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Hostile:
    h = _build(tmp_path_factory.mktemp("hostile") / "s")
    yield h
    h.world.store.close()


def test_hostile_store_is_what_it_claims(hostile: Hostile):
    """The 120 smallest transformed addresses (of the bytes as stored) are all ineligible, by the textbook,
    and every spoiler is among them; the traps behind them are eligible."""
    w = hostile.world
    e = simple_sample(w, ANCHOR, 0, CONSENSUS, 100)
    eligible = {t[1] for t in e.items}
    smallest = sorted(hostile.stored_taddr, key=hostile.stored_taddr.__getitem__)[:HOSTILE]
    assert not eligible & set(smallest)
    assert {hostile.kinds[a] for a in smallest} == set(SPOILERS)
    traps = [a for a, k in hostile.kinds.items() if k in TRAPS]
    assert set(traps) <= eligible
    assert {hostile.kinds.get(t[1]) for t in e.items[:SAMPLE_SIZE]} >= set(TRAPS)
    assert e.duplicates() > 0
    # The store agrees it holds these entries (the back doors worked).
    assert sum(len(s) for s in w.stamps.values()) == sum(1 for _ in w.store.iter_neighbourhood(b"", 0))


# (depth, min balance, workers, k)
HOSTILE_CASES = [
    pytest.param(0, 100, 2, 1, id="k1"),
    pytest.param(0, 100, 0, 1, id="k1-in-process"),
    pytest.param(0, 100, 2, 64, id="k64"),
    pytest.param(1, 100, 2, 1, id="depth1-k1"),
    pytest.param(0, None, 2, 3, id="no-min-balance-k3"),
]


@pytest.mark.parametrize("depth,min_balance,workers,k", HOSTILE_CASES)
def test_hostile_store_equals_textbook_sampler(hostile: Hostile, depth, min_balance, workers, k):
    w = hostile.world
    expected = simple_sample(w, ANCHOR, depth, CONSENSUS, min_balance)
    assert len(expected.items) >= SAMPLE_SIZE
    result = reserve_sample(w.store, ANCHOR, depth, CONSENSUS, min_balance, workers=workers, k=k)
    want = expected.items[:SAMPLE_SIZE]
    got = [(it.transformed_address, it.chunk_address, it.chunk_data, it.stamp, int(it.chunk_type)) for it in result.items]
    assert got == [(t[0], t[1], t[2], t[3], int(t[4])) for t in want]
    check_sample(result.items, ANCHOR, w.store.batches, CONSENSUS)
    st = result.stats
    assert (st.total_iterated, st.below_balance_ignored, st.rogue_chunks, st.new_ignored) == (
        expected.iterated, expected.below, expected.rogue, expected.new
    )  # fmt: skip
    assert st.duplicates_ignored == expected.duplicates()
    corrupt_reached = sum(
        1 for a, kind in hostile.kinds.items()
        if kind == "corrupt-data" and textbook.proximity(a, ANCHOR) >= depth
        and hostile.stored_taddr[a] < want[-1][0]
    )  # fmt: skip
    assert st.chunk_load_failed == corrupt_reached > 0
    # Each reached chunk spoilt at the stamp costs at least one invalid stamp; an unknown
    # batch is counted invalid without a validation.
    spoilt_stamps = sum(
        1 for a, kind in hostile.kinds.items()
        if kind in STAMP_SPOILERS and textbook.proximity(a, ANCHOR) >= depth and hostile.stored_taddr[a] < want[-1][0]
    )  # fmt: skip
    assert st.invalid_stamps >= spoilt_stamps > 0
    assert SAMPLE_SIZE <= st.stamp_validations <= SAMPLE_SIZE + st.invalid_stamps
    if k < 4:
        assert st.reruns > 0
    address = sample_hash(result.items)
    assert address == textbook.sample_hash([(t[1], t[0]) for t in want])
    for p in make_inclusion_proofs(result.items, ANCHOR, b"\x05"):
        verify_inclusion_proof(p, address, ANCHOR)
