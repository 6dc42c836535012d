"""Reserve import and export end to end: round trips, the reference node's format, damaged input, the slot rule."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading

import pytest

from api.cli import export_main, import_main
from chunkstore.reserve import ReserveStore
from chunkstore.store.verify import verify_store
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.soc import make_soc
from chunkstore.transfer import importer
from chunkstore.transfer import readers as importreaders
from chunkstore.transfer.batchfile import dump_batches
from chunkstore.transfer.budget import FrameShape, Sizes
from chunkstore.transfer.errors import BudgetTooSmall, CorruptInput, ImportRefused, TransferError
from chunkstore.transfer.exporter import export_reserve
from chunkstore.transfer.importer import STAGING, import_reserve
from tests.store.helpers import Stamper, dump, make_batch, open_store, random_cac, random_soc, signer
from tests.transfer.helpers import (
    Entry,
    content,
    entry,
    in_process_budget,
    in_process_budget_args,
    mixed_entries,
    put_sequentially,
    tar_entries,
    write_tar,
)

B1 = make_batch(1)
B2 = make_batch(2)
TINY = make_batch(7, depth=3, bucket_depth=0)  # 8 slots in one bucket: records contend for them


def _import(store_path, source, **kw):
    kw.setdefault("workers", 0)
    kw.setdefault("memory_budget", in_process_budget())
    kw.setdefault("show_progress", False)
    return import_reserve(store_path, source, **kw)


def _snapshot_of(path):
    with ReserveStore(path) as store:
        return dump(store)


def _content_of(path):
    with ReserveStore(path) as store:
        return content(store)


def _reference(path, entries, batches):
    """A store filled by one put per entry, in order: what every import must equal."""
    with open_store(path, batches=batches) as store:
        put_sequentially(store, entries)
    return _content_of(path)


@pytest.fixture
def entries():
    s1 = Stamper(B1)
    out = mixed_entries(s1)
    a, d = random_cac(77)
    out += [entry(a, d, s1.stamp(a)), entry(a, d, Stamper(B2).stamp(a))]  # one chunk under two batches
    return out


def test_tar_round_trip_is_byte_for_byte(tmp_path, entries):
    src, out = str(tmp_path / "in.tar"), str(tmp_path / "out.tar")
    write_tar(src, entries, reference_quirks=True)
    store = str(tmp_path / "store")
    report = _import(store, src, batches=[B1, B2])
    assert report.format == "tar" and report.records == len(entries)
    assert report.load.written == len(entries) and report.load.chunks == len(entries) - 1
    assert report.end_marker is False and report.warnings  # the reference node writes no end marker
    export_reserve(store, out, show_progress=False)
    assert tar_entries(out) == tar_entries(src)
    assert verify_store(store).ok


def test_imports_in_a_grown_test_process_fit_their_budget(tmp_path, entries):
    """Late in the full suite the pytest process holds several hundred MiB; the in-process imports
    here must still get a budget (a fixed 512 MiB was refused as too small in a clean-clone run)."""
    ballast = bytearray(600 << 20)
    ballast[:: 4096] = b"\x01" * len(ballast[:: 4096])  # touch every page so it counts as resident
    src = str(tmp_path / "in.tar")
    write_tar(src, entries)
    assert _import(str(tmp_path / "store"), src, batches=[B1, B2]).load.written == len(entries)
    batches = str(tmp_path / "batches.json")
    with open(batches, "w") as f:
        f.write(dump_batches([B1, B2]))
    cli = ["--data-dir", str(tmp_path / "cli"), "--batches", batches, "--workers", "0", src]
    assert import_main([*cli, *in_process_budget_args()]) == 0
    del ballast


def test_reference_format_import_equals_puts(tmp_path, entries):
    """The tar as SPEC.md describes it, written by Python's tarfile: same store as one put per entry."""
    src = str(tmp_path / "in.tar")
    write_tar(src, entries)
    _import(str(tmp_path / "bulk"), src, batches=[B1, B2])
    assert _content_of(str(tmp_path / "bulk")) == _reference(str(tmp_path / "puts"), entries, [B1, B2])
    assert verify_store(str(tmp_path / "bulk")).ok


def test_snapshot_round_trip_with_worker_processes(tmp_path, entries):
    src, snap, out = (str(tmp_path / n) for n in ("in.tar", "out.snap", "out.tar"))
    write_tar(src, entries)
    _import(str(tmp_path / "a"), src, batches=[B1, B2])
    report = export_reserve(str(tmp_path / "a"), snap, fmt="snapshot", frame_size=8 << 10, show_progress=False)
    assert report.frames > 3  # small frames: several decoded in parallel and put back in order
    result = _import(str(tmp_path / "b"), snap, batches=[B1, B2], workers=2)
    assert result.format == "snapshot" and result.records == len(entries)
    assert len(result.worker_peak_rss) == 2
    assert _content_of(str(tmp_path / "b")) == _content_of(str(tmp_path / "a"))
    export_reserve(str(tmp_path / "b"), out, show_progress=False)
    assert tar_entries(out) == tar_entries(src)
    assert verify_store(str(tmp_path / "b")).ok


# Damaged or refused input: a clear error, and the store exactly as it was.


@pytest.fixture
def target(tmp_path):
    """A store that already holds something, so that "unchanged" means something."""
    path = str(tmp_path / "target")
    s = Stamper(B1)
    with open_store(path, batches=[B1, B2]) as store:
        for _ in range(5):
            a, d = random_cac(50)
            store.put(d, s.stamp(a, position=15))
    return path


def _snapshot_file(tmp_path, entries, frame_size=4 << 10) -> str:
    src, snap = str(tmp_path / "s.tar"), str(tmp_path / "s.snap")
    write_tar(src, entries)
    _import(str(tmp_path / "snapsrc"), src, batches=[B1, B2])
    export_reserve(str(tmp_path / "snapsrc"), snap, fmt="snapshot", frame_size=frame_size, show_progress=False)
    return snap


def _refused(target, source, error, match, **kw):
    before = _snapshot_of(target)
    with pytest.raises(error, match=match):
        _import(target, source, **kw)
    assert _snapshot_of(target) == before
    assert not os.path.exists(os.path.join(target, STAGING))


def test_truncated_tar(tmp_path, target, entries):
    src = str(tmp_path / "in.tar")
    write_tar(src, entries)
    raw = open(src, "rb").read()
    with open(src, "wb") as f:
        f.write(raw[: 512 * 7 + 100])  # inside an entry's content
    _refused(target, src, CorruptInput, r"tar entry \d+: truncated")


@pytest.mark.parametrize("where", ["mid-frame", "frame-boundary", "index"])
def test_truncated_snapshot(tmp_path, target, entries, where):
    snap = _snapshot_file(tmp_path, entries)
    raw = open(snap, "rb").read()
    from chunkstore.transfer.snapformat import FRAME_HEADER_SIZE

    # Mid-frame: halfway through frame 2's compressed bytes. (Half the file landed in a frame's header
    # for some random entries, which is refused as truncated "in the header of frame N".)
    mid = (_frame_end(raw, 1) + FRAME_HEADER_SIZE + _frame_end(raw, 2)) // 2
    cuts = {"mid-frame": mid, "frame-boundary": _frame_end(raw, 1), "index": len(raw) - 5}
    with open(snap, "wb") as f:
        f.write(raw[: cuts[where]])
    match = {"mid-frame": r"truncated in frame \d+", "frame-boundary": r"after frame 1 .*index of frames is missing",
             "index": "index .*truncated"}[where]
    _refused(target, snap, CorruptInput, match)


def _frame_end(raw: bytes, frame: int) -> int:
    from chunkstore.transfer import snapformat as snapf

    off = snapf.FILE_HEADER_SIZE
    for _ in range(frame + 1):
        info = snapf.decode_frame_header(raw[off : off + snapf.FRAME_HEADER_SIZE], off, _, 1 << 30)
        off += snapf.FRAME_HEADER_SIZE + info.clen
    return off


@pytest.mark.parametrize("at", ["data", "header"])
def test_flipped_byte_in_a_frame(tmp_path, target, entries, at):
    snap = _snapshot_file(tmp_path, entries)
    raw = bytearray(open(snap, "rb").read())
    start = _frame_end(bytes(raw), 1)  # frame 2 starts here
    raw[start + (200 if at == "data" else 13)] ^= 0x10
    with open(snap, "wb") as f:
        f.write(raw)
    _refused(target, snap, CorruptInput, r"snapshot frame 2\b.*corrupted")


def test_unknown_batch(tmp_path, target, entries):
    src = str(tmp_path / "in.tar")
    a, d = random_cac(10)
    stranger = make_batch(99)
    write_tar(src, entries + [entry(a, d, Stamper(stranger).stamp(a))])
    _refused(target, src, ImportRefused, rf"tar entry {len(entries)} \(chunk {a.hex()}\): unknown batch {stranger.id.hex()}")


def test_invalid_chunk(tmp_path, target, entries):
    src = str(tmp_path / "in.tar")
    bad = entries[:]
    e = bad[3]
    bad[3] = Entry(e.address, e.data[:-1] + bytes([e.data[-1] ^ 1]), e.stamp)
    write_tar(src, bad)
    _refused(target, src, ImportRefused, rf"tar entry 3 \(chunk {e.address.hex()}\): .*neither the CAC nor a SOC")


def test_record_without_stamp(tmp_path, target):
    import io
    import tarfile

    a, d = random_cac(10)
    src = str(tmp_path / "in.tar")
    with tarfile.open(src, "w", format=tarfile.USTAR_FORMAT) as tar:
        body = len(d).to_bytes(4, "big") + d
        info = tarfile.TarInfo(a.hex())
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    _refused(target, src, CorruptInput, "cannot hold a chunk and its stamp")


def test_failed_import_creates_no_store(tmp_path, entries):
    src = str(tmp_path / "in.tar")
    write_tar(src, entries)  # its batches are not registered: refused
    with pytest.raises(ImportRefused, match="unknown batch"):
        _import(str(tmp_path / "new"), src)
    assert not os.path.exists(tmp_path / "new")


def test_budget_too_small(tmp_path, target, entries):
    src = str(tmp_path / "in.tar")
    write_tar(src, entries)
    _refused(target, src, BudgetTooSmall, "too small", memory_budget=8 << 20)


# The slot rule over one import: exactly as one put per record in input order.


def _tiny(a: bytes, position: int, ts: int) -> bytes:
    return Stamper(TINY).stamp(a, position=position, ts=ts).to_bytes()


def _contended() -> list[Entry]:
    (a, da), (b, db), (c, dc), (d, dd) = (random_cac(20) for _ in range(4))
    return [
        Entry(a, da, _tiny(a, 0, 10)),
        Entry(b, db, _tiny(b, 0, 20)),  # newer: takes slot 0 from a (a is never stored)
        Entry(c, dc, _tiny(c, 1, 50)),
        Entry(c, dc, _tiny(c, 1, 50)),  # exact repeat: a no-op
        Entry(d, dd, _tiny(d, 1, 40)),  # older than the holder of slot 1: refused
        Entry(d, dd, _tiny(d, 2, 40)),
    ]


def test_conflict_in_the_import_refuses_it_whole(tmp_path, target):
    src = str(tmp_path / "in.tar")
    entries = _contended()
    write_tar(src, entries)
    with open_store(target, batches=[TINY]):
        pass
    _refused(target, src, ImportRefused, rf"tar entry 4 \(chunk {entries[4].address.hex()}\): slot .*position 1.*older")


def test_skip_conflicts_equals_puts(tmp_path):
    src = str(tmp_path / "in.tar")
    entries = _contended()
    write_tar(src, entries)
    report = _import(str(tmp_path / "bulk"), src, batches=[TINY], skip_conflicts=True)
    assert (report.load.refused, report.load.replaced, report.load.repeats) == (1, 1, 1)
    assert "tar entry 4" in report.load.refusals[0]
    assert _content_of(str(tmp_path / "bulk")) == _reference(str(tmp_path / "puts"), entries, [TINY])
    assert verify_store(str(tmp_path / "bulk")).ok


def _scenario(seed: int) -> tuple[list[Entry], list[Entry]]:
    """(already stored, imported) records contending for the 8 slots of TINY and fresh slots of B1:
    replacements across shards, exact repeats, older stamps, SOC updates (a feed) and re-imports."""
    rng = random.Random(seed)
    chunks = [random_cac(rng.randrange(0, 200)) for _ in range(12)] + [random_cac(4096) for _ in range(3)]
    soc_id = os.urandom(32)
    feed = []
    for v in range(3):
        _, wrapped = make_cac(b"feed update %d" % v)
        s = make_soc(signer(), soc_id, wrapped)
        feed.append((s.address, s.data))
    s1 = Stamper(B1)

    def record() -> Entry:
        roll = rng.random()
        if roll < 0.15:
            a, d = rng.choice(feed)
        else:
            a, d = rng.choice(chunks)
        if rng.random() < 0.6:
            return Entry(a, d, _tiny(a, rng.randrange(8), rng.randrange(1, 30)))
        return Entry(a, d, s1.stamp(a, ts=rng.randrange(1, 30)).to_bytes())

    stored = [record() for _ in range(10)]
    imported = [record() for _ in range(40)]
    imported += rng.sample(imported, 5) + rng.sample(stored, 3)  # repeats of the import and of the store
    return stored, imported


@pytest.mark.parametrize("seed", range(6))
def test_contended_import_equals_puts(tmp_path, seed):
    stored, imported = _scenario(seed)
    src = str(tmp_path / "in.tar")
    write_tar(src, imported)
    bulk, puts = str(tmp_path / "bulk"), str(tmp_path / "puts")
    for path in (bulk, puts):
        with open_store(path, batches=[TINY, B1]) as store:
            put_sequentially(store, stored)
    report = _import(bulk, src, skip_conflicts=True)
    with ReserveStore(puts) as store:
        refused = put_sequentially(store, imported)
    assert report.load.refused == len(refused)
    assert _content_of(bulk) == _content_of(puts)  # reopened: settled slot contests leave no record
    assert verify_store(bulk).ok


def _spills_in_threads(monkeypatch) -> list[object]:
    """Make the largest unit of work 3 tar entries, so the collector spills a buffer in a thread as soon as it
    cannot take 3 more; returns the list the spills it starts are recorded in."""
    started: list[object] = []
    real = importreaders._Spill

    def spill(*a):
        started.append(real(*a))
        return started[-1]

    monkeypatch.setattr(importer, "TAR_SHAPE", FrameShape(8 << 10, 8 << 10, 3))  # a 4-entry slab's data fits in 8 KiB
    monkeypatch.setattr(importreaders, "_Spill", spill)
    return started


@pytest.mark.parametrize("page_cache", [False, True])
def test_staged_runs_bypass_the_page_cache_where_they_can(tmp_path, monkeypatch, entries, page_cache):
    """Runs are written and read back with O_DIRECT (whole aligned pages, the last one padded), or through
    the page cache where the file system refuses it: the same store either way."""
    from chunkstore.transfer import runs as runs_module

    _, imported = _scenario(11)
    records = entries + imported
    src = str(tmp_path / "in.tar")
    write_tar(src, records)
    if page_cache:
        monkeypatch.delattr(os, "O_DIRECT")
    opened = []
    real_open = runs_module.open_direct
    monkeypatch.setattr(runs_module, "open_direct", lambda *a: opened.append(real_open(*a)) or opened[-1])
    sizes = []
    real_spill = runs_module.RunBuffer.spill

    def spill(self, directory, number, shard_count):
        run = real_spill(self, directory, number, shard_count)
        sizes.append(os.path.getsize(run.base + ".dat"))
        return run

    def small(budget, baseline, workers, shape):
        return Sizes(budget=budget, baseline=baseline, ring=4 << 20, arena=16 << 10, rows=8, phase2=1 << 20)

    monkeypatch.setattr(importer, "plan_sizes", small)
    monkeypatch.setattr(importreaders, "TAR_TASK_ENTRIES", 3)
    monkeypatch.setattr(runs_module.RunBuffer, "spill", spill)
    report = _import(str(tmp_path / "bulk"), src, batches=[B1, B2, TINY], skip_conflicts=True)
    assert report.runs > 3 and opened
    direct = {d for _, d in opened}
    if page_cache:
        assert direct == {False}
    elif direct == {False}:
        pytest.skip(f"the file system of {tmp_path} refuses O_DIRECT")
    else:
        assert direct == {True} and all(size % runs_module.ALIGN == 0 for size in sizes)
    assert _content_of(str(tmp_path / "bulk")) == _reference(str(tmp_path / "puts"), records, [B1, B2, TINY])


@pytest.mark.parametrize("threaded", [False, True])
def test_spilled_runs_merge_like_one(tmp_path, monkeypatch, entries, threaded):
    """A run buffer a few records big: many runs on disk, merged back in key order.

    Spilled by a thread (as an import does, its verdicts waiting in the ring
    meanwhile) or in line when the buffer is full: the same store either way.
    """
    stored, imported = _scenario(11)
    records = entries + imported
    src = str(tmp_path / "in.tar")
    write_tar(src, records)
    arena, rows = (16 << 10, 8) if not threaded else (40 << 10, 16)

    def small(budget, baseline, workers, shape):
        return Sizes(budget=budget, baseline=baseline, ring=4 << 20, arena=arena, rows=rows, phase2=1 << 20)

    monkeypatch.setattr(importer, "plan_sizes", small)
    monkeypatch.setattr(importreaders, "TAR_TASK_ENTRIES", 3)
    if threaded:
        started = _spills_in_threads(monkeypatch)
    else:
        started = []
        monkeypatch.setattr(importer, "TAR_SHAPE", None)  # no largest unit known: spilled in line, when full
    report = _import(str(tmp_path / "bulk"), src, batches=[B1, B2, TINY], skip_conflicts=True)
    assert report.runs > 3
    assert len(started) == (report.runs - 1 if threaded else 0)  # every run but the last, by a thread
    with open_store(str(tmp_path / "puts"), batches=[B1, B2, TINY]) as store:
        put_sequentially(store, records)
    assert _content_of(str(tmp_path / "bulk")) == _content_of(str(tmp_path / "puts"))
    assert verify_store(str(tmp_path / "bulk")).ok


def test_many_runs_are_published_by_appends(tmp_path, monkeypatch):
    """Merged from many runs into an empty store, every chunk is appended past the shard's last key.

    Publishing gathers merge blocks before it writes; a block split between
    two writes would send the second one down the one-put-per-record path.
    """
    from chunkstore.transfer import bulkload

    s1 = Stamper(B1)
    records = [entry(a, d, s1.stamp(a)) for a, d in (random_cac(100 + i) for i in range(300))]
    src = str(tmp_path / "in.tar")
    write_tar(src, records)

    def small(budget, baseline, workers, shape):
        return Sizes(budget=budget, baseline=baseline, ring=4 << 20, arena=64 << 10, rows=16, phase2=1 << 20)

    slow = []
    real = bulkload._ShardAppender._put_chunk
    monkeypatch.setattr(importer, "plan_sizes", small)
    monkeypatch.setattr(importreaders, "TAR_TASK_ENTRIES", 8)
    monkeypatch.setattr(bulkload._ShardAppender, "_put_chunk", lambda self, *a: slow.append(1) or real(self, *a))
    report = _import(str(tmp_path / "bulk"), src, batches=[B1])
    assert report.runs > 10 and report.load.written == len(records)
    assert not slow
    assert verify_store(str(tmp_path / "bulk")).ok


@pytest.mark.parametrize("held", [0, 150], ids=["empty store", "store holding half"])
def test_many_commits_per_shard_read_the_last_keys_once(tmp_path, monkeypatch, held):
    """A shard written in many commits appends across them from its own last puts, read from the store once.

    Each commit drops the pages it appended from the page cache, so reading
    the trees' last keys again at every commit read them back from disk.
    Into a store holding interleaved keys already, the result still equals
    puts in input order.
    """
    from chunkstore.transfer import bulkload

    s1 = Stamper(B1)
    records = [entry(a, d, s1.stamp(a)) for a, d in (random_cac(900 + i) for i in range(300))]
    stored, imported = records[:held], records[held:]
    src = str(tmp_path / "in.tar")
    write_tar(src, imported)
    bulk, puts = str(tmp_path / "bulk"), str(tmp_path / "puts")
    for path in (bulk, puts):
        with open_store(path, batches=[B1]) as store:
            put_sequentially(store, stored)
    with ReserveStore(puts) as store:
        put_sequentially(store, imported)

    reads, commits, appenders = [], [], []
    real_last, real_commit, real_init = bulkload._last_key, bulkload._ShardAppender.commit, bulkload._ShardAppender.__init__
    monkeypatch.setattr(bulkload, "_last_key", lambda *a: reads.append(1) or real_last(*a))
    monkeypatch.setattr(bulkload._ShardAppender, "commit", lambda self: commits.append(1) or real_commit(self))
    monkeypatch.setattr(bulkload._ShardAppender, "__init__",
                        lambda self, *a: appenders.append(1) or real_init(self, *a))  # fmt: skip
    monkeypatch.setattr(bulkload._ShardAppender, "SLICE", 4)
    monkeypatch.setattr(Sizes, "commit_bytes", lambda self, shards: 1)  # a commit after every slice
    report = _import(bulk, src)
    assert report.load.written == len(imported)
    assert len(commits) > 4 * len(appenders)
    assert len(reads) == 3 * len(appenders)  # chunks, tails and stamps, once per shard
    assert _content_of(bulk) == _content_of(puts)
    assert verify_store(bulk).ok


def test_import_into_a_store_holding_it_already_is_a_no_op(tmp_path, entries):
    src = str(tmp_path / "in.tar")
    write_tar(src, entries)
    path = str(tmp_path / "s")
    _import(path, src, batches=[B1, B2])
    before = _snapshot_of(path)
    report = _import(path, src)
    assert report.load.repeats == len(entries) and report.load.written == 0
    assert _snapshot_of(path) == before


def test_feed_updates_within_one_import(tmp_path):
    soc_id = os.urandom(32)
    s1 = Stamper(B1)
    versions = []
    for v in range(3):
        _, wrapped = make_cac(b"version %d" % v)
        s = make_soc(signer(), soc_id, wrapped)
        versions.append(entry(s.address, s.data, s1.stamp(s.address)))
    src = str(tmp_path / "in.tar")
    write_tar(src, versions)
    _import(str(tmp_path / "s"), src, batches=[B1])
    with ReserveStore(str(tmp_path / "s")) as store:
        assert store.get(versions[0].address) == versions[-1].data  # the last update wins, as with puts
        assert len(store.stamps_of(versions[0].address)) == 3


# Batches, the command line.


def test_batches_file_registers_in_the_same_run(tmp_path, entries):
    src, batches = str(tmp_path / "in.tar"), str(tmp_path / "batches.json")
    write_tar(src, entries)
    with open(batches, "w") as f:
        f.write(dump_batches([B1, B2]))
    path = str(tmp_path / "s")
    assert import_main(["--data-dir", path, "--batches", batches, "--workers", "0", src, *in_process_budget_args()]) == 0
    with ReserveStore(path) as store:
        assert {b.id for b in store.batches} == {B1.id, B2.id}
        assert store.stats()["stamps"] == len(entries)


def test_refused_import_registers_no_batch(tmp_path, entries, capsys):
    src, batches = str(tmp_path / "in.tar"), str(tmp_path / "batches.json")
    write_tar(src, entries)
    with open(batches, "w") as f:
        f.write(dump_batches([B1]))  # B2 is missing: the import is refused
    path = str(tmp_path / "s")
    assert import_main(["--data-dir", path, "--batches", batches, "--workers", "0", src, *in_process_budget_args()]) == 1
    assert "unknown batch" in capsys.readouterr().err
    with ReserveStore(path) as store:
        assert len(store.batches) == 0 and store.stats()["stamps"] == 0


def test_cli_export_and_import(tmp_path, entries, capsys):
    src = str(tmp_path / "in.tar")
    write_tar(src, entries)
    a = str(tmp_path / "a")
    _import(a, src, batches=[B1, B2])
    out, snap, batches = str(tmp_path / "out.tar"), str(tmp_path / "out.snap"), str(tmp_path / "b.json")
    assert export_main(["--data-dir", a, "--batches", batches, out]) == 0
    assert export_main(["export", "--data-dir", a, "--format", "snapshot", "--frame-size", "16", snap]) == 0
    assert {b["batchID"] for b in json.load(open(batches))} == {B1.id.hex(), B2.id.hex()}
    b = str(tmp_path / "b")
    assert import_main(["import", "--data-dir", b, "--batches", batches, "--workers", "0", snap, *in_process_budget_args()]) == 0
    assert "imported" in capsys.readouterr().out
    assert tar_entries(out) == tar_entries(src)
    assert _content_of(b) == _content_of(a)


def test_empty_input(tmp_path):
    src = str(tmp_path / "empty.tar")
    open(src, "wb").close()  # the reference node's export of an empty reserve
    report = _import(str(tmp_path / "s"), src)
    assert report.records == 0
    export_reserve(str(tmp_path / "s"), str(tmp_path / "e.snap"), fmt="snapshot", show_progress=False)
    assert _import(str(tmp_path / "t"), str(tmp_path / "e.snap")).records == 0


def test_radius_leaves_out_distant_chunks(tmp_path, entries):
    src = str(tmp_path / "in.tar")
    write_tar(src, entries)
    path = str(tmp_path / "s")
    with open_store(path, batches=[B1, B2]) as store:
        store.reserve.set_radius(2)
        overlay = store.reserve.overlay
    from chunkstore.swarm.proximity import proximity

    inside = [e for e in entries if proximity(overlay, e.address) >= 2]
    report = _import(path, src)
    assert report.load.outside == len(entries) - len(inside)
    with ReserveStore(path) as store:
        assert store.stats()["stamps"] == len(inside)


def test_soc_only_records_and_repeated_socs(tmp_path):
    """SOCs: alone in their slot they are bulk-written; a SOC met twice goes the store's own way."""
    s1 = Stamper(B1)
    socs = [random_soc(30) for _ in range(3)]
    records = [entry(a, d, s1.stamp(a)) for a, d in socs]
    records.append(entry(socs[0][0], socs[0][1], Stamper(B2).stamp(socs[0][0])))
    src = str(tmp_path / "in.tar")
    write_tar(src, records)
    report = _import(str(tmp_path / "bulk"), src, batches=[B1, B2])
    assert report.load.contested == 2  # the repeated SOC's two records
    assert _content_of(str(tmp_path / "bulk")) == _reference(str(tmp_path / "puts"), records, [B1, B2])


def test_verify_reports_progress(tmp_path, entries):
    src = str(tmp_path / "in.tar")
    write_tar(src, entries)
    path = str(tmp_path / "s")
    report = _import(path, src, batches=[B1, B2])
    ticks: list[int] = []
    assert verify_store(path, progress=ticks.append).ok
    assert sum(ticks) == report.load.chunks


def test_progress_bars_only_on_a_terminal(capsys):
    import io

    from chunkstore.transfer import progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert progress.enabled(Terminal()) and not progress.enabled(io.StringIO())
    with progress.bar("quiet", 10) as b:  # pytest's stderr is no terminal
        b.update(3)
    assert capsys.readouterr().err == ""


def test_pipes_stdin_and_stdout(tmp_path, entries):
    """export ... - | import ... -: the snapshot streams through a pipe (no seeking, the index checked at the end)."""
    import subprocess
    import sys

    src = str(tmp_path / "in.tar")
    write_tar(src, entries)
    a, b, batches = str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "b.json")
    _import(a, src, batches=[B1, B2])
    with open(batches, "w") as f:
        f.write(dump_batches([B1, B2]))
    run = [sys.executable, "-m", "api.cli"]
    exporter = subprocess.Popen([*run, "export", "--data-dir", a, "--format", "snapshot", "-"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    importer_proc = subprocess.run([*run, "import", "--data-dir", b, "--batches", batches,
                                    "--workers", "0", "-"], stdin=exporter.stdout, capture_output=True, text=True)
    exporter.stdout.close()
    assert exporter.wait() == 0, exporter.stderr.read()
    assert importer_proc.returncode == 0, importer_proc.stderr
    assert importer_proc.stderr == ""  # no progress bar in a pipe
    assert _content_of(b) == _content_of(a)


@pytest.mark.parametrize("other_thread", [False, True])
def test_workers_are_forked_only_when_no_other_thread_runs(tmp_path, entries, other_thread):
    """A fork copies whatever lock another thread holds: the workers are forked only from a process with
    no other thread (an import of its own, as the command runs it), and spawned otherwise; the same store
    either way."""
    src = str(tmp_path / "in.tar")
    write_tar(src, entries)
    store = str(tmp_path / "s")
    if other_thread:
        stop = threading.Event()
        waiter = threading.Thread(target=stop.wait, daemon=True)
        waiter.start()
        try:
            started = _import(store, src, batches=[B1, B2], workers=2).worker_start
        finally:
            stop.set()
    else:  # this test process may run threads of earlier tests: the import runs in a process of its own
        code = (
            "import sys; from chunkstore.transfer.importer import import_reserve; "
            "from tests.store.helpers import make_batch; "
            "r = import_reserve(sys.argv[1], sys.argv[2], batches=[make_batch(1), make_batch(2)], workers=2, "
            "show_progress=False); print(r.worker_start)"
        )
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        out = subprocess.run([sys.executable, "-c", code, store, src], cwd=root, capture_output=True, text=True,
                             check=True, timeout=300)  # fmt: skip
        started = out.stdout.split()[-1]
    assert started == ("spawn" if other_thread else "fork")
    assert _content_of(store) == _reference(str(tmp_path / "ref"), entries, [B1, B2])


def test_a_last_spill_in_a_thread_lets_the_run_buffer_go(tmp_path):
    """When the last records fill the buffer, its spill runs in a thread and ``finish`` finds it empty: every
    run is on disk then, and the buffer must be let go of, since the publish gives its memory to the read
    windows (``run_buffer_free``)."""
    import numpy as np

    from chunkstore.swarm.constants import ChunkType
    from chunkstore.transfer.runs import FileRun, RunBuffer

    collector = importreaders.Collector(RunBuffer(8192, 4), str(tmp_path), 4, FrameShape(4096, 4096, 2))
    rng = np.random.default_rng(1)
    for first in (0, 2):  # two records each: the second call leaves no room for another unit of two
        addresses = rng.integers(0, 256, (2, 32), dtype=np.uint8)
        stamps = rng.integers(0, 256, (2, 113), dtype=np.uint8)
        src = rng.integers(0, 256, 2000, dtype=np.uint8)
        collector.add(addresses, stamps, np.full(2, int(ChunkType.CAC), np.uint8), first, src,
                      np.array([0, 1000]), np.array([1000, 1000]))  # fmt: skip
    assert collector._spill is not None  # its spill started in a thread
    runs = collector.finish()
    assert len(runs) == 1 and isinstance(runs[0], FileRun) and runs[0].rows == 4
    assert collector.buffer.capacity == (0, 0)
    collector.discard()


def _exported_store(tmp_path, entries):
    src, store = str(tmp_path / "in.tar"), str(tmp_path / "store")
    write_tar(src, entries)
    _import(store, src, batches=[B1, B2])
    return store, str(tmp_path / "plain.tar")


def test_export_writes_into_a_fifo_and_through_a_link_without_replacing_them(tmp_path, entries):
    """An operator sweep's export to /dev/full replaced the device with a regular file (and a FIFO's reader
    got nothing, and a link was replaced instead of its target written): the finished file was renamed
    onto whatever the path named."""
    import stat
    import threading

    store, plain = _exported_store(tmp_path, entries)
    export_reserve(store, plain, show_progress=False)
    expected = open(plain, "rb").read()

    fifo = str(tmp_path / "pipe")
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    export_reserve(store, fifo, show_progress=False)
    reader.join(30)
    assert got == [expected] and stat.S_ISFIFO(os.lstat(fifo).st_mode)

    target, link = str(tmp_path / "target.tar"), str(tmp_path / "link.tar")
    os.symlink(target, link)
    export_reserve(store, link, show_progress=False)
    assert os.path.islink(link) and open(target, "rb").read() == expected

    with pytest.raises(TransferError, match="is a directory"):
        export_reserve(store, str(tmp_path), show_progress=False)


def test_a_failed_export_leaves_no_batches_file(tmp_path, entries, monkeypatch):
    """The batches file was written first, with a plain overwrite: an export that then failed left it
    behind, complete-looking, with no export to go with it."""
    from chunkstore.transfer import exporter

    store, out = _exported_store(tmp_path, entries)
    batches = str(tmp_path / "batches.json")

    def broken(records, out, tick):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(exporter, "write_tar", broken)
    with pytest.raises(TransferError, match=f"cannot export to {out}: No space left on device"):
        export_reserve(store, out, batches_out=batches, show_progress=False)
    assert not os.path.exists(batches) and not os.path.exists(out)
    monkeypatch.undo()
    export_reserve(store, out, batches_out=batches, show_progress=False)
    assert os.path.exists(out) and "batchID" in open(batches).read()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this platform")
def test_an_export_to_a_full_device_names_it(tmp_path, entries, capsys):
    """A full destination printed a bare '[Errno 28] No space left on device', naming no file."""
    store, _ = _exported_store(tmp_path, entries)
    with pytest.raises(TransferError, match="cannot export to /dev/full: No space left on device"):
        export_reserve(store, "/dev/full", show_progress=False)
    assert export_main(["--data-dir", store, "--no-progress", "/dev/full"]) == 2
    assert "cannot export to /dev/full: No space left on device" in capsys.readouterr().err


def test_export_to_a_missing_directory_names_the_destination(tmp_path, capsys):
    """The open of the partial file failed with its own name ('out.tar.partial-PID'), which the operator never gave."""
    store = str(tmp_path / "store")
    ReserveStore(store).close()
    destination = tmp_path / "no-such-dir" / "out.tar"
    with pytest.raises(TransferError, match=f"cannot export to {destination}: No such file or directory") as info:
        export_reserve(store, str(destination), show_progress=False)
    assert "partial" not in str(info.value)
    assert export_main([str(destination), "--data-dir", store]) == 2
    err = capsys.readouterr().err
    assert "partial" not in err and str(destination) in err
