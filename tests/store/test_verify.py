"""verify_store finds each kind of damage, names it, and repair leaves a clean store."""

from __future__ import annotations

import os

import pytest

from api.cli import verify_main as main
from chunkstore.reserve import ReserveStore
from chunkstore.store.layout import INFO_BYTES, shard_path, u64
from chunkstore.store.verify import verify_store
from tests.store.helpers import Stamper, make_batch, mapping_read_flags, open_store, random_cac, random_soc


@pytest.fixture
def filled(tmp_path):
    """A store with CACs (short and split), SOCs and a chunk under two batches."""
    path = str(tmp_path / "s")
    b1, b2 = make_batch(1), make_batch(2)
    s1, s2 = Stamper(b1), Stamper(b2)
    chunks = [random_cac(10) for _ in range(20)] + [random_cac(4096) for _ in range(4)] + [random_soc(30) for _ in range(4)]
    with open_store(path, batches=[b1, b2]) as store:
        store.put_many([(d, s1.stamp(a)) for a, d in chunks])
        store.put(chunks[0][1], s2.stamp(chunks[0][0]))
    return path, chunks, (b1, b2)


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")
def test_each_shard_is_read_with_read_ahead(filled):
    """verify walks every database in key order: a cold shard is read ahead, not a page a fault."""
    path, _, _ = filled
    files = [os.path.join(shard_path(path, s), "data.mdb") for s in range(4)]
    sequential: list[int] = []  # at each chunk checked: how many shards' mappings read ahead

    def progress(_: int) -> None:
        flags = [mapping_read_flags(f) for f in files]
        if not any(flags):
            pytest.skip("this kernel does not show the mappings' read-ahead flags")
        sequential.append(sum("sr" in f for f in flags))

    verify_store(path, progress=progress)
    assert sequential and set(sequential) == {1}, "a shard is verified without the kernel's read-ahead"


def _edit(path, fn):
    with ReserveStore(path) as store:
        fn(store)


def _shard_txn(store, address):
    shard = store.shard(store.shard_of(address))
    return shard, shard.env.begin(write=True)


def test_clean_store(filled):
    path, chunks, _ = filled
    report = verify_store(path)
    assert report.ok, [str(p) for p in report.problems]
    assert (report.chunks, report.stamps, report.slots, report.batches) == (28, 29, 29, 2)
    assert main(["--data-dir", path]) == 0
    assert main(["verify", "--data-dir", path]) == 0


def _drop_head(store, chunks):
    addr = chunks[21][0]  # a split chunk: head and tail
    shard, txn = _shard_txn(store, addr)
    with txn:
        txn.delete(addr, db=shard.chunks)


def _drop_entry(store, chunks):
    addr = chunks[1][0]
    shard, txn = _shard_txn(store, addr)
    with txn:
        key = next(k for k, _ in txn.cursor(db=shard.stamps).iternext() if k.startswith(addr))
        txn.delete(key, db=shard.stamps)


def _drop_slot(store, chunks):
    addr = chunks[2][0]
    shard, txn = _shard_txn(store, addr)
    with txn:
        key = next(k for k, v in txn.cursor(db=shard.slots).iternext() if v.startswith(addr))
        txn.delete(key, db=shard.slots)


def _garble_data(store, chunks):
    addr, data = chunks[3]
    shard, txn = _shard_txn(store, addr)
    with txn:
        txn.put(addr, data[:-1] + bytes([data[-1] ^ 1]), db=shard.chunks)


def _move_shard(store, chunks):
    addr, data = chunks[4]
    shard, txn = _shard_txn(store, addr)
    other = store.shard((store.shard_of(addr) + 1) % store.shard_count)
    with txn:
        txn.delete(addr, db=shard.chunks)
    with other.env.begin(write=True) as txn:
        txn.put(addr, data, db=other.chunks)


def _bad_signature(store, chunks):
    addr = chunks[5][0]
    shard, txn = _shard_txn(store, addr)
    with txn:
        key, value = next((k, v) for k, v in txn.cursor(db=shard.stamps).iternext() if k.startswith(addr))
        txn.put(key, value[:20] + bytes([value[20] ^ 1]) + value[21:], db=shard.stamps)


def _forget_batch(store, chunks):
    meta = store._meta
    with meta.env.begin(write=True) as txn:
        txn.delete(make_batch(2).id, db=meta.batches)


def _wrong_type(store, chunks):
    addr = chunks[6][0]
    shard, txn = _shard_txn(store, addr)
    with txn:
        key, value = next((k, v) for k, v in txn.cursor(db=shard.stamps).iternext() if k.startswith(addr))
        txn.put(key, b"\x02" + value[1:], db=shard.stamps)


def _stray_tail(store, chunks):
    addr = chunks[7][0]
    shard, txn = _shard_txn(store, addr)
    with txn:
        txn.put(addr, b"junk", db=shard.tails)


def _bytes_counter(store, chunks):
    shard = store.shard(0)
    with shard.env.begin(write=True) as txn:
        txn.put(INFO_BYTES, u64(12345), db=shard.info_db)


def _double_slot(store, chunks):
    """Copy a chunk's slot claim into another shard under another chunk."""
    a, b = chunks[8][0], next(c[0] for c in chunks[9:20] if store.shard_of(c[0]) != store.shard_of(chunks[8][0]))
    sa, txn = _shard_txn(store, a)
    with txn:
        key, value = next((k, v) for k, v in txn.cursor(db=sa.slots).iternext() if v.startswith(a))
        entry = txn.get(a + key, db=sa.stamps)
    sb, txn = _shard_txn(store, b)
    with txn:
        txn.put(key, b + value[32:], db=sb.slots)
        txn.put(b + key, entry, db=sb.stamps)


CASES = {
    "dangling-stamp": _drop_head,
    "dangling-slot": _drop_entry,
    "missing-slot": _drop_slot,
    "bad-chunk": _garble_data,
    "wrong-shard": _move_shard,
    "bad-stamp": _bad_signature,
    "unknown-batch": _forget_batch,
    "type-mismatch": _wrong_type,
    "orphan-tail": _stray_tail,
    "bytes-counter": _bytes_counter,
    "duplicate-slot": _double_slot,
}


@pytest.mark.parametrize("kind", list(CASES))
def test_finds_and_repairs(filled, kind, capsys):
    path, chunks, _ = filled
    _edit(path, lambda store: CASES[kind](store, chunks))
    report = verify_store(path)
    kinds = {p.kind for p in report.problems}
    assert kind in kinds, [str(p) for p in report.problems]
    assert main(["--data-dir", path]) == 1
    out = capsys.readouterr().out
    assert f"[{kind}]" in out and "problem(s)" in out
    repaired = verify_store(path, repair=True)
    assert repaired.repaired >= 1
    after = verify_store(path)
    assert after.ok, [str(p) for p in after.problems]
    # Chunks nobody damaged are all still there, and a misfiled one was moved home.
    with ReserveStore(path, readonly=True) as store:
        if kind == "wrong-shard":
            assert store.get(chunks[4][0]) == chunks[4][1]
        for addr, data in chunks[10:20]:
            if kind != "duplicate-slot":
                assert store.get(addr) == data


def test_pending_contest_is_not_corruption(tmp_path, monkeypatch):
    """A slot doubled across shards with its pending record is a put interrupted
    between its two commits: not corruption, and the next writable open settles it."""
    from chunkstore.store.writes import WriteSession

    path = str(tmp_path / "s")
    batch = make_batch(7, depth=4, bucket_depth=0)  # one bucket: any two chunks can share a slot
    stamper = Stamper(batch)
    (a1, d1) = random_cac(10)
    (a2, d2) = next(c for c in (random_cac(10) for _ in range(100)) if c[0][-1] % 4 != a1[-1] % 4)
    with open_store(path, batches=[batch]) as store:
        store.put(d1, stamper.stamp(a1, position=0, ts=1))
        with monkeypatch.context() as m:
            m.setattr(WriteSession, "resolve", lambda self, key: None)  # "crash" before the eviction
            store.put(d2, stamper.stamp(a2, position=0, ts=2))
        assert store.has(a1) and store.has(a2)
    report = verify_store(path)
    assert report.ok and report.pending == 1, [str(p) for p in report.problems]
    with ReserveStore(path) as store:
        assert store.recovered["pending_slots"] == 1
        assert not store.has(a1) and store.get(a2) == d2
        assert store.stats()["pending"] == 0
    report = verify_store(path)
    assert report.ok and report.pending == 0


def test_missing_store(tmp_path):
    assert main(["--data-dir", str(tmp_path / "nothing")]) == 2


def test_soc_and_tail_chunks_verify(tmp_path):
    b = make_batch(1)
    path = str(tmp_path / "s")
    with open_store(path, batches=[b]) as store:
        stamper = Stamper(b)
        for a, d in [random_soc(4096), random_cac(4096), random_soc(0)]:
            store.put(d, stamper.stamp(a))
    assert verify_store(path).ok
