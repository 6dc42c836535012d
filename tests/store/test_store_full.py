"""Writes the store cannot commit: a full LMDB map (a small map size, for real), and a full disk or an I/O
error injected at the shard commit (tests/store/fullhelpers.py; tests/store/test_full_disk.py meets a real full disk).

Whatever fails, the store raises a typed error, holds nothing half-written
(``verify`` finds nothing after every refusal), keeps serving reads, and
takes writes again once there is room, without being reopened.
"""

from __future__ import annotations

import errno
import random
import threading

import lmdb
import pytest

from chunkstore.reserve import ReserveStore
from chunkstore.store import mapsize, writefailures
from chunkstore.store.errors import ChunkNotFound, StoreFull, StoreWriteFailed
from chunkstore.store.layout import shard_of
from chunkstore.store.mapsize import MIN_MAP_SIZE, GiB, TiB, env_map_sizes, parse_size, shard_map_size
from chunkstore.store.verify import verify_store
from chunkstore.store.writes import WriteSession
from tests.store.fullhelpers import FailingCommits
from tests.store.helpers import Stamper, dump, make_batch, random_cac

B1 = make_batch(1, depth=22)
B2 = make_batch(2, depth=22)
TINY = make_batch(7, depth=3, bucket_depth=0)  # one bucket: any two chunks can contend for a slot


def _clean(path) -> None:
    report = verify_store(str(path))
    assert report.ok, [str(p) for p in report.problems]


def _chunks(stamper: Stamper, n: int, size: int | None = None) -> list[tuple[bytes, bytes, bytes]]:
    out = []
    for _ in range(n):
        a, d = random_cac(size)
        out.append((a, d, stamper.stamp(a).to_bytes()))
    return out


def _in_shards(stamper: Stamper, shards: int, wanted: list[int], size: int | None = 100) -> list[tuple[bytes, bytes]]:
    """One chunk in each of the ``wanted`` shards, stamped."""
    out = []
    for s in wanted:
        while True:
            a, d = random_cac(size)
            if shard_of(a, shards) == s:
                out.append((a, d, stamper.stamp(a).to_bytes()))
                break
    return out


def test_map_full_refuses_whole_puts_and_recovers_without_reopening(tmp_path):
    path = tmp_path / "s"
    with ReserveStore(path, shards=2, map_size=2 << 20) as store:
        store.batches.add(B1)
        store.batches.add(B2)
        s1, s2 = Stamper(B1), Stamper(B2)
        stored, refusals = [], 0
        for round_ in range(10_000):
            group = _chunks(s2 if round_ % 4 else s1, 8)
            try:
                store.put_many([(d, st) for _, d, st in group])
                stored += [a for a, _, _ in group]
            except StoreFull as exc:
                refusals += 1
                assert exc.reason == "map_full" and exc.errno is None
                assert "map" in str(exc) and "--map-size" in str(exc)
                kept = {r.address for r in exc.stored.values()}
                assert all(store.has(a) == (a in kept) for a, _, _ in group)
                stored += list(kept)
                _clean(path)
                if refusals == 3:
                    break
        assert refusals == 3 and len(stored) > 100
        for _ in range(10_000):  # to the brim: single chunks until one is refused too
            (a, d, st), = _chunks(s2, 1)
            try:
                store.put(d, st)
            except StoreFull:
                break
            stored.append(a)
        else:
            raise AssertionError("single puts never refused")
        # puts stopped short of the map's end, so removals have pages to copy on write
        assert store.shard(shard_of(a, 2)).map_room() >= store.map_headroom(shard_of(a, 2))
        refusal = store.write_refusal()
        assert refusal is not None and refusal.reason == "map_full"
        assert all(len(store.get(a)) == 4104 for a in stored[-20:])  # reads go on
        # Room inside the map: removing a batch works on a full map (in steps small enough to fit) ...
        assert store.batches.remove(B2.id) > 0
        _clean(path)
        # ... and writes work again, without reopening
        a, d, st = _chunks(s1, 1)[0]
        assert store.put(d, st).stored
        assert store.get(a) == d and store.write_refusal() is None
    _clean(path)


def test_full_disk_at_commit_is_store_full_and_leaves_nothing(tmp_path, monkeypatch):
    path = tmp_path / "s"
    with ReserveStore(path) as store:
        store.batches.add(B1)
        stamper = Stamper(B1)
        for _, d, st in _chunks(stamper, 5):
            store.put(d, st)
        before = dump(store)
        failing = FailingCommits(monkeypatch, errno.ENOSPC)
        a, d, st = _chunks(stamper, 1)[0]
        with pytest.raises(StoreFull) as info:
            store.put(d, st)
        assert info.value.reason == "disk_full" and info.value.errno == errno.ENOSPC
        assert "No space left on device" in str(info.value)
        with pytest.raises(ChunkNotFound):
            store.get(a)
        assert dump(store) == before
        _clean(path)
        assert store.write_refusal().reason == "disk_full"
        failing.stop()
        assert store.put(d, st).stored and store.get(a) == d
        assert store.write_refusal() is None
    _clean(path)


def test_put_many_across_shards_keeps_what_was_committed(tmp_path, monkeypatch):
    """One commit per shard: a failure after the first leaves that shard's items stored, whole, and says so."""
    path = tmp_path / "s"
    with ReserveStore(path, shards=4) as store:
        store.batches.add(B1)
        stamper = Stamper(B1)
        items = _in_shards(stamper, 4, [0, 1, 2, 3, 0, 1, 2, 3])
        FailingCommits(monkeypatch, errno.ENOSPC, fail=lambda n: n == 1)
        with pytest.raises(StoreFull) as info:
            store.put_many([(d, st) for _, d, st in items])
        stored = info.value.stored
        assert len(stored) == 2  # the two items of the shard committed first
        first = shard_of(next(iter(stored.values())).address, 4)
        for i, (a, d, _) in enumerate(items):
            in_first = shard_of(a, 4) == first
            assert (i in stored) == in_first and store.has(a) == in_first
            if in_first:
                assert stored[i].address == a and stored[i].stored and store.get(a) == d
        _clean(path)
        monkeypatch.undo()
        results = store.put_many([(d, st) for _, d, st in items])  # the rest goes in; the stored ones are repeats
        assert [r.stored for r in results] == [shard_of(a, 4) != first for a, _, _ in items]
    _clean(path)


@pytest.mark.parametrize(("free", "full"), [(0, True), (100 * GiB, False)])
def test_eio_is_a_full_disk_only_when_the_disk_is_nearly_full(tmp_path, monkeypatch, free, full):
    """LMDB turns a short write into EIO: with space left it is an I/O error (500), not a full disk (507)."""
    path = tmp_path / "s"
    with ReserveStore(path) as store:
        store.batches.add(B1)
        monkeypatch.setattr(writefailures, "free_bytes", lambda p: free)
        FailingCommits(monkeypatch, errno.EIO)
        _, d, st = _chunks(Stamper(B1), 1)[0]
        with pytest.raises(StoreWriteFailed) as info:
            store.put(d, st)
        assert isinstance(info.value, StoreFull) == full
        assert info.value.reason == ("disk_full" if full else "io_error") and info.value.errno == errno.EIO
        assert "Input/output error" in str(info.value)
        assert store.write_refusal().reason == info.value.reason
    _clean(path)


def test_full_disk_refusal_ends_when_the_disk_gains_room(tmp_path, monkeypatch):
    free = {"now": 1000}
    monkeypatch.setattr(writefailures, "free_bytes", lambda p: free["now"])
    with ReserveStore(tmp_path / "s") as store:
        store.batches.add(B1)
        FailingCommits(monkeypatch, errno.ENOSPC)
        _, d, st = _chunks(Stamper(B1), 1)[0]
        with pytest.raises(StoreFull):
            store.put(d, st)
        free["now"] += writefailures.RECOVERY_MARGIN - 1
        assert store.write_refusal() is not None
        free["now"] += 1
        assert store.write_refusal() is None  # no write needed to notice


def test_a_failed_commit_does_not_keep_the_write_lock(tmp_path, monkeypatch):
    """A full map raised while the counters are written (the transaction already out of the session's hands)
    used to leave that write transaction open: later writes from another thread waited for it while it lived,
    and from the same thread py-lmdb refused them ("another write transaction is active")."""
    calls = {"n": 0}
    real = WriteSession._write_bins

    def full_once(self, s, txn):
        calls["n"] += 1
        if calls["n"] == 1:
            raise lmdb.MapFullError("mdb_put: MDB_MAP_FULL: Environment mapsize limit reached")
        return real(self, s, txn)

    monkeypatch.setattr(WriteSession, "_write_bins", full_once)
    with ReserveStore(tmp_path / "s") as store:
        store.batches.add(B1)
        stamper = Stamper(B1)
        _, d, st = _chunks(stamper, 1, 100)[0]
        with pytest.raises((StoreFull, lmdb.MapFullError)):
            store.put(d, st)
        _, d2, st2 = _chunks(stamper, 1, 100)[0]
        done = threading.Event()
        threading.Thread(target=lambda: (store.put(d2, st2), done.set()), daemon=True).start()
        assert done.wait(20), "the next write is stuck behind the failed transaction"
        assert store.put(d, st).stored


def _contest(store: ReserveStore, stamper: Stamper) -> tuple[bytes, bytes, bytes, bytes]:
    """Chunk A in shard 0 holding slot (TINY, 0, 0); returns A and a chunk B of shard 1 with a newer stamp for it."""
    (a, da, _), (b, db, _) = _in_shards(stamper, 2, [0, 1])
    store.put(da, stamper.stamp(a, position=0, ts=10).to_bytes())
    return a, b, db, stamper.stamp(b, position=0, ts=20).to_bytes()


def test_eviction_after_a_cross_shard_takeover_can_wait_for_room(tmp_path, monkeypatch):
    """The newer stamp's chunk is durable with its pending record once its own shard commits; when the older
    holder's eviction then finds no room, the put still succeeded, and the next writable open evicts."""
    path = tmp_path / "s"
    with ReserveStore(path, shards=2) as store:
        store.batches.add(TINY)
        stamper = Stamper(TINY)
        a, b, db, stamp_b = _contest(store, stamper)
        FailingCommits(monkeypatch, errno.ENOSPC, fail=lambda n: n == 1)  # the eviction's commit
        assert store.put(db, stamp_b).stored
        assert store.get(b) == db and store.has(a)  # the slot is held twice until the eviction runs
        assert store.stats()["pending"] == 1
        assert store.write_refusal().reason == "disk_full"
    _clean(path)
    with ReserveStore(path) as store:
        assert store.recovered["pending_slots"] == 1
        assert store.has(b) and not store.has(a)
    _clean(path)


def test_settled_pending_records_survive_a_failed_commit(tmp_path, monkeypatch):
    """A settled contest's pending record is deleted by the next write to its shard; when that write fails,
    the deletion must wait for the following one instead of being forgotten."""
    with ReserveStore(tmp_path / "s", shards=2) as store:
        store.batches.add(TINY)
        store.batches.add(B1)
        stamper = Stamper(TINY)
        a, b, db, stamp_b = _contest(store, stamper)
        store.put(db, stamp_b)
        assert store.stats()["pending"] == 1 and not store.has(a)
        (_, d1, st1), (_, d2, st2) = _in_shards(Stamper(B1), 2, [1, 1])
        failing = FailingCommits(monkeypatch, errno.ENOSPC)
        with pytest.raises(StoreFull):
            store.put(d1, st1)
        failing.stop()
        store.put(d2, st2)
        assert store.stats()["pending"] == 0


def test_batch_removal_stopped_by_a_full_disk_is_finished_by_removing_again(tmp_path, monkeypatch):
    path = tmp_path / "s"
    with ReserveStore(path) as store:
        store.batches.add(B1)
        for _, d, st in _chunks(Stamper(B1), 30, 100):
            store.put(d, st)
        failing = FailingCommits(monkeypatch, errno.ENOSPC)
        with pytest.raises(StoreFull):
            store.batches.remove(B1.id)
        assert store.batches.find(B1.id) is None  # marked: its stamps are refused from now on
        failing.stop()
        assert store.batches.remove(B1.id) == 30
        assert store.stats()["chunks"] == 0 and store.batches.raw(B1.id) is None
    _clean(path)


def test_a_removal_left_by_a_full_disk_does_not_stop_the_store_opening_on_it(tmp_path, monkeypatch):
    """An operator's sweep: a batch removal stopped by a full disk is finished by the next writable open,
    which failed on the disk still full, so `serve` refused to start ("cannot open store") and nothing was
    served. Opened, reads go on, writes are refused while the removal cannot be finished, and the first
    write once there is room finishes it."""
    path = tmp_path / "s"
    with ReserveStore(path) as store:
        store.batches.add(B1)
        store.batches.add(B2)
        kept = _chunks(Stamper(B2), 5, 100)
        for _, d, st in _chunks(Stamper(B1), 30, 100) + kept:
            store.put(d, st)
        failing = FailingCommits(monkeypatch, errno.ENOSPC)
        with pytest.raises(StoreFull):
            store.batches.remove(B1.id)
    with ReserveStore(path) as store:  # the disk still full
        assert store.write_refusal() is not None and store.write_refusal().reason == "disk_full"
        assert all(store.get(a) == d for a, d, _ in kept)
        (_, d1, st1), (a2, d2, st2) = _chunks(Stamper(B2), 2, 100)
        with pytest.raises(StoreFull):
            store.put(d1, st1)
        assert store.batches.find(B1.id) is None  # still refused while marked
        failing.stop()
        assert store.put(d2, st2).stored
        assert store.recovered["batch_removals"] == 1
        assert store.batches.raw(B1.id) is None and store.stats()["chunks"] == 6 and store.get(a2) == d2
    _clean(path)


def test_puts_stop_short_of_the_disks_end_and_a_removal_gives_them_room_again(tmp_path, monkeypatch):
    """Puts leave the disk's headroom to removals: an operator's sweep found a store that had filled its own
    disk unable to remove a batch. Pages a removal freed inside the files take puts again, disk still tight."""
    from chunkstore.store import store as store_module

    path = tmp_path / "s"
    with ReserveStore(path, shards=2) as store:
        store.batches.add(B1)
        store.batches.add(B2)
        for _, d, st in _chunks(Stamper(B1), 600):
            store.put(d, st)
        before = dump(store)
        headroom, (_, size) = store.disk_headroom(), store_module.disk_space(str(path))
        monkeypatch.setattr(store_module, "disk_space", lambda p: (headroom // 2, size))
        (_, d1, st1), (a2, d2, st2) = _chunks(Stamper(B2), 2)
        with pytest.raises(StoreFull, match="full for puts .* short of its end, left for removals") as info:
            store.put(d1, st1)
        assert info.value.reason == "disk_full" and info.value.errno == errno.ENOSPC
        assert dump(store) == before and store.write_refusal().reason == "disk_full"
        assert store.batches.remove(B1.id) == 600  # a removal is not held to the headroom
        assert store.put(d2, st2).stored and store.get(a2) == d2  # into the pages the removal freed
    _clean(path)


def test_pinning_stops_short_of_the_disks_end_too(tmp_path, monkeypatch):
    """POST /pins writes two rows a chunk in the shards, as much as a small put, and was not held to the
    headroom: the crash harness filled a tmpfs with uploads until the 507, pinned what was stored until
    the disk was really full, and then DELETE /batches answered 507 on a store that had filled its own disk,
    the case the headroom is there for. A pin build now stops at the headroom as puts do."""
    from chunkstore.store import store as store_module
    from chunkstore.store.pinning import pin_reference
    from tests.store.pinhelpers import pin_rows, upload

    path = tmp_path / "s"
    with ReserveStore(path, shards=2) as store:
        store.batches.add(B1)
        ref, _ = upload(store, Stamper(B1), random.Random(5).randbytes(40 * 4096))  # 40 leaves and their root
        headroom, (_, size) = store.disk_headroom(), store_module.disk_space(str(path))
        monkeypatch.setattr(store_module, "disk_space", lambda p: (headroom // 2, size))
        with pytest.raises(StoreFull, match="full for puts .* short of its end, left for removals"):
            pin_reference(store, ref)
        assert store.pins.list() == [] and pin_rows(store) == set() and store.pins.in_flux() == {}
        assert store.batches.remove(B1.id) == 41  # removals still have the headroom
    _clean(path)


def test_new_tags_stop_short_of_the_disks_end_too(tmp_path, monkeypatch):
    """Every deferred upload that names no tag makes one before its first chunk, a 507 upload included: the
    crash harness's 24 MiB tmpfs, filled by uploads and then by 5,819 tags, refused DELETE /batches with 0
    bytes free. Tag records grow the meta env as puts grow the shards: held to the same headroom."""
    from chunkstore.store import store as store_module

    path = tmp_path / "s"
    with ReserveStore(path, shards=1) as store:
        store.batches.add(B1)
        for _, d, st in _chunks(Stamper(B1), 20):
            store.put(d, st)
        kept = store.tags.create()
        headroom, (_, size) = store.disk_headroom(), store_module.disk_space(str(path))
        monkeypatch.setattr(store_module, "disk_space", lambda p: (headroom // 2, size))
        with pytest.raises(StoreFull, match="full for puts .* short of its end, left for removals"):
            store.tags.create()
        assert [t.uid for t in store.tags.list()] == [kept.uid]
        store.tags.delete(kept.uid)  # removals are not held to it
        assert store.batches.remove(B1.id) == 20
        # pages the removal freed inside the shard take puts again, so an upload's new tag goes in too
        monkeypatch.setattr(store.shard(0), "file_pages", lambda: (8 << 20, 4 << 20))
        assert store.tags.create().uid == kept.uid + 1
    _clean(path)


# ---------------------------------------------------------------- map size


def test_shard_map_follows_the_file_system_within_bounds(monkeypatch):
    for fs, shards, want in [
        (100 * GiB, 4, MIN_MAP_SIZE),  # a small disk: the floor
        (2 * TiB, 4, 2 * TiB),  # a shard can never outgrow its disk
        (8 * TiB, 4, 4 * TiB),  # the store's 16 TiB of address space, over its shards
        (8 * TiB, 256, MIN_MAP_SIZE),
        (0, 4, MIN_MAP_SIZE),  # unknown
        (int(1.5 * GiB) + 300 * GiB, 1, 302 * GiB),  # whole GiB
    ]:
        monkeypatch.setattr(mapsize, "file_system_size", lambda p, fs=fs: fs)
        assert shard_map_size("/x", shards) == want, (fs, shards)
    assert env_map_sizes("/x", 4, readonly=False, configured=5 << 20) == (5 << 20, 5 << 20)
    assert env_map_sizes("/x", 4, readonly=True, configured=None) == (0, 0)


def test_store_opens_shards_with_the_default_map_and_readers_adopt_the_writers(tmp_path):
    path = tmp_path / "s"
    with ReserveStore(path) as store:
        want = shard_map_size(path, 4)
        assert store.map_size == want
        assert all(store.shard(i).env.info()["map_size"] == want for i in range(4))
    with ReserveStore(path, map_size=3 * GiB) as store:
        store.batches.add(B1)
        _, d, st = _chunks(Stamper(B1), 1, 10)[0]
        store.put(d, st)  # a commit records the map size in the environment
    with ReserveStore(path, readonly=True) as reader:
        assert reader.shard(0).env.info()["map_size"] >= 3 * GiB


def test_parse_size():
    assert parse_size("1048576") == 1 << 20
    assert parse_size("512M") == parse_size("512MiB") == 512 << 20
    assert parse_size("4t") == 4 * TiB and parse_size("256GB") == 256 * GiB
    for bad in ("", "G", "1.5G", "-1G", "12Q"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_a_full_shard_stays_refused_while_another_shard_commits(tmp_path):
    """An operator sweep saw /readiness flap back to ready after every small write to another shard while
    nine uploads in ten were still refused: any commit cleared the full map's refusal."""
    path = tmp_path / "s"
    with ReserveStore(path, shards=2, map_size=2 << 20) as store:
        store.batches.add(B1)
        store.batches.add(B2)
        s1, s2 = Stamper(B1), Stamper(B2)
        for _ in range(100_000):  # shard 0 only, until its map refuses
            (a, d, st), = _in_shards(s2, 2, [0], size=4000)
            try:
                store.put(d, st)
            except StoreFull as exc:
                assert exc.reason == "map_full" and exc.path == store.shard(0).path
                break
        else:
            raise AssertionError("shard 0 never filled")
        (a, d, st), = _in_shards(s1, 2, [1])
        assert store.put(d, st).stored  # a write to the other shard commits ...
        refusal = store.write_refusal()
        assert refusal is not None and refusal.reason == "map_full", refusal  # ... and says nothing of shard 0
        assert store.batches.remove(B2.id) > 0  # frees shard 0, in commits of its own
        assert store.write_refusal() is None
        (a, d, st), = _in_shards(s1, 2, [0])
        assert store.put(d, st).stored
    _clean(path)
