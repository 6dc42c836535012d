"""``chunkstore import``: load a reserve from the reference node's tar export or from a snapshot.

    chunkstore import --data-dir DIR [--batches FILE.json] [--workers N]
                      [--memory-budget MiB] [--skip-conflicts] FILE|-

The format is told by the first bytes (the snapshot magic, else tar). Two
phases, with a staging area between them (``DIR/.import-staging/``):

1. **validate and stage** (chunkstore/transfer/readers.py): every entry is read,
   decoded and validated (BMT hash, SOC and stamp signatures, batch, bucket,
   position) in worker processes; accepted records collect in sorted runs,
   spilled to the staging area when the run buffer is full. The store is
   not touched, nor locked: any damage, truncation, unknown batch or invalid
   chunk stops the import here with a message naming the entry, and the
   store stays exactly as it was. So does a staging area that runs out of
   space (``InsufficientSpace``).
2. **publish** (chunkstore/transfer/bulkload.py), under the writer lock: the slot rule
   is settled for the whole import as puts in input order would settle it;
   a refusal (an equal or older stamp for a held slot) stops the import,
   still before any write, unless ``--skip-conflicts`` (then refused records
   are left out and listed). So does an estimate of what the records will
   add to the store's files that exceeds the free space of its file system
   (``InsufficientSpace``, counting every record as new and no LMDB page as
   reusable). Then the ``--batches`` are registered and the records written
   shard by shard in key order, in commits of bounded size.

Why a staging area rather than one transaction per shard: LMDB keeps a write
transaction's dirty pages in memory (up to 512 MiB before it spills), so a
reserve-sized transaction would break the memory budget. Publishing in
bounded commits means a crash *during publishing* leaves the store holding
part of the import (consistent: every commit carries whole chunks with their
stamps and slots; ``verify`` is clean); running the import again completes
it. A failed import never publishes anything. A disk that fills up while
publishing all the same (another writer took the space) stops it with a
``StoreWriteFailed`` (``StoreFull``) whose note says how many chunks were
stored: the store is consistent, like after a crash, and running the
import again once there is room completes it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch, encode_batch, update_problem
from chunkstore.store.errors import StoreWriteFailed
from chunkstore.store.files import refuse_lost_meta
from chunkstore.store.layout import DEFAULT_SHARDS, META_DIR
from chunkstore.store.store import ChunkStore
from chunkstore.store.writefailures import free_bytes

from . import snapformat as snap
from .budget import TAR_SHAPE, MiB, Sizes, peak_rss_bytes, plan_sizes, rss_bytes, snapshot_shape
from .bufferpool import SharedRing
from .bulkload import WRITE, Describe, LoadReport, apply_slow, estimate_growth, plan, publish
from .errors import ImportRefused, InsufficientSpace
from .fastcheck import BatchTable
from .holdlock import abandoned, hold
from .progress import bar
from .readers import Collector, PrefixedStream, read_snapshot, read_snapshot_header, read_tar
from .runs import FileRun, Run, RunBuffer
from .tarformat import Readable
from .workers import Workers

DEFAULT_BUDGET = 512 * MiB
STAGING = ".import-staging"
STAGING_LOCK = "lock"  # in each staging directory, locked while its import runs (holdlock.py)
Source = str | os.PathLike[str] | Readable  # a path, "-" (standard input), or an open binary stream


@dataclass
class ImportReport:
    source: str
    format: str  # "tar" or "snapshot"
    records: int  # (chunk, stamp) records read and validated
    load: LoadReport
    batches_added: int = 0
    batches_updated: int = 0
    runs: int = 0  # sorted runs (all but the last were spilled to the staging area)
    end_marker: bool | None = None  # tar only: the archive had end-of-archive blocks
    read_seconds: float = 0.0
    publish_seconds: float = 0.0
    budget: int = 0
    peak_rss: int = 0  # of the importing process
    worker_peak_rss: list[int] = field(default_factory=list)
    worker_start: str = ""  # how the validation workers started: "fork", "spawn" or "in process"
    warnings: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.read_seconds + self.publish_seconds

    def summary(self) -> str:
        load = self.load
        rate = self.records / self.seconds if self.seconds else 0.0
        parts = [
            f"imported {self.source} ({self.format}): {self.records} records in {self.seconds:.1f}s ({rate:,.0f}/s; "
            f"validating {self.read_seconds:.1f}s, publishing {self.publish_seconds:.1f}s)",
            f"{load.written} stored ({load.chunks} new chunks), {load.repeats} already there, "
            f"{load.replaced} replaced by a newer stamp in the same import",
        ]
        if load.outside:
            parts.append(f"{load.outside} outside the storage radius, left out")
        if load.refused:
            parts.append(f"{load.refused} refused (slot held under an equal or newer stamp)")
        if self.batches_added or self.batches_updated:
            parts.append(f"batches: {self.batches_added} added, {self.batches_updated} updated")
        return "; ".join(parts)


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def import_reserve(
    data_dir: str | os.PathLike[str],
    source: Source,
    *,
    batches: list[Batch] | None = None,
    workers: int | None = None,
    memory_budget: int = DEFAULT_BUDGET,
    skip_conflicts: bool = False,
    shards: int | None = None,
    staging_dir: str | None = None,
    show_progress: bool | None = None,
) -> ImportReport:
    """Validate everything in ``source``, then publish it into the store at ``data_dir`` (created if missing).

    Raises ``CorruptInput`` (damaged, truncated or unknown input),
    ``ImportRefused`` (a chunk, stamp or batch the store refuses) or
    ``BudgetTooSmall``; the store is then unchanged (and not created).
    """
    nworkers = default_workers() if workers is None else workers
    path = os.fspath(data_dir)
    # Phase one needs only the store's shard count and batches: read them, and leave the store
    # alone (not even created) until everything has been validated.
    shard_count, table, seen = _survey(path, shards, batches or [])
    with _open(source) as (stream, name, size):
        stream, fmt, limit = _detect(stream)
        shape = snapshot_shape(limit) if fmt == "snapshot" else TAR_SHAPE
        _load_kernels()  # before the budget is split: the baseline it measures must include them
        sizes = plan_sizes(memory_budget, rss_bytes(), nworkers, shape)
        report = ImportReport(name, fmt, 0, LoadReport(), budget=memory_budget)
        with _staging(path, staging_dir) as staging:
            t0 = time.perf_counter()
            collector = Collector(RunBuffer(sizes.arena, sizes.rows), staging, shard_count, shape)
            try:
                try:
                    describe = _validate(stream, fmt, limit, sizes, collector, table, nworkers, report, size,
                                         show_progress)
                except OSError as exc:
                    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    raise InsufficientSpace(
                        f"no space left for the import's staging area ({staging}): {exc.strerror}; nothing was "
                        "imported and the store is unchanged; free space, or stage on another file system "
                        "with --staging-dir"
                    ) from exc
                report.records = collector.records
                report.runs = len(collector.runs)
                report.read_seconds = time.perf_counter() - t0
                t1 = time.perf_counter()
                with ReserveStore(path, shard_count) as store:
                    chunks_before = store.chunk_count()
                    try:
                        _publish(store, collector.runs, report, table, seen, batches or [], describe, sizes,
                                 skip_conflicts, collector.repeated_socs(), show_progress)
                    except StoreWriteFailed as exc:
                        exc.add_note(_stopped_note(store, chunks_before))
                        raise
                report.publish_seconds = time.perf_counter() - t1
            finally:
                collector.discard()
        report.peak_rss = peak_rss_bytes()
        return report


def _load_kernels() -> None:
    """Load (or compile) this process's numba kernels: the tar slab parser, the byte-range copies and the
    validator's hashing."""
    from chunkstore.swarm.bmt import backend as hashing

    if hashing.accelerated():
        from . import bytecopy, fastcheck, tarscan

        fastcheck.warm_up()  # for the workers, when they are forked (workers.py)
        tarscan.warm_up()
        bytecopy.gather(np.zeros(1, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(1, np.uint8), 0)


def _stopped_note(store: ChunkStore, chunks_before: int) -> str:
    stored = store.chunk_count() - chunks_before
    return (
        f"the import stopped while publishing, with {stored} new chunk(s) stored (each whole, with its "
        "stamps and slots: the store is consistent and `chunkstore verify` finds nothing); "
        "once there is room, run the import again to complete it"
    )


def _survey(path: str, shards: int | None, file_batches: list[Batch]) -> tuple[int, BatchTable, dict[bytes, bytes | None]]:
    """Shard count, batches to validate against, and the batch records read (see ``_batch_table``)."""
    if not os.path.isfile(os.path.join(path, META_DIR, "data.mdb")):
        refuse_lost_meta(path)  # shards with chunks and no meta env: a loss, not a new store
        return shards or DEFAULT_SHARDS, *_batch_table(None, file_batches)
    with ChunkStore(path, shards, readonly=True) as store:
        return store.shard_count, *_batch_table(store, file_batches)


def _detect(stream: Readable) -> tuple[Readable, str, int]:
    """(stream from its start, "tar" or "snapshot", the snapshot's frame limit): the first bytes tell."""
    prefix = stream.read(512)  # a tar header block; more than the snapshot magic
    again = PrefixedStream(prefix, stream)
    if not prefix.startswith(snap.MAGIC):
        return again, "tar", 0
    return again, "snapshot", read_snapshot_header(again)


def _validate(
    stream: Readable,
    fmt: str,
    limit: int,
    sizes: Sizes,
    collector: Collector,
    table: BatchTable,
    nworkers: int,
    report: ImportReport,
    size: int | None,
    show_progress: bool | None,
) -> Describe:
    """Phase one: read, validate in the workers, collect sorted runs; how to name a record in messages."""
    ring = SharedRing(sizes.ring, collector.staging)
    try:
        pool = Workers(nworkers, ring, table)
        try:
            with bar("validating", size, bytes_unit=True, show=show_progress) as pbar:
                if fmt == "snapshot":
                    describe: Describe = read_snapshot(stream, limit, ring, pool, collector, pbar.update).describe
                else:
                    summary = read_tar(stream, ring, pool, collector, pbar.update)
                    report.end_marker = summary.end_marker
                    if summary.entries and not summary.end_marker:
                        report.warnings.append(
                            "the tar has no end-of-archive marker (the reference node writes none): a file cut "
                            "exactly between two entries cannot be told from a complete one"
                        )
                    describe = _tar_entry
        finally:
            pool.close()
            report.worker_peak_rss = pool.peak_rss
            report.worker_start = pool.start_method
        collector.finish()
        return describe
    except BaseException:
        collector.discard()
        raise
    finally:
        ring.close()


def _tar_entry(ordinal: int, address: bytes) -> str:
    return f"tar entry {ordinal} (chunk {address.hex()})"


def _publish(
    store: ReserveStore,
    runs: list[Run],
    report: ImportReport,
    table: BatchTable,
    seen: dict[bytes, bytes | None],
    file_batches: list[Batch],
    describe: Describe,
    sizes: Sizes,
    skip: bool,
    repeated_socs: set[bytes],
    show_progress: bool | None,
) -> None:
    load = report.load
    status = np.zeros(report.records, np.uint8)
    on_disk = sum(isinstance(r, FileRun) for r in runs)
    window = sizes.window(on_disk + 1, run_buffer_free=on_disk == len(runs) > 1)
    # LMDB keeps each environment's largest transaction's worth of dirty pages for reuse: one
    # commit's share per shard, so that all shards together stay inside the publish budget.
    commit_bytes = sizes.commit_bytes(store.shard_count)
    chunks_before = store.chunk_count()
    with store.writing():
        for batch_id, raw in seen.items():
            if store.batches.raw(batch_id) != raw:
                raise ImportRefused(
                    f"batch {batch_id.hex()} changed while the import was being validated; run the import again"
                )
        unsure = plan(store, runs, status, load, describe, skip_conflicts=skip, window=window,
                      repeated_socs=repeated_socs)
        _check_space(store, estimate_growth(runs, status, store.shard_count, window))
        registered = False

        def register() -> None:
            nonlocal registered
            if not registered:
                report.batches_added, report.batches_updated = _register(store, file_batches)
                registered = True

        apply_slow(store, runs, status, table, load, describe, skip_conflicts=skip, window=window,
                   commit_bytes=None if unsure and not skip else commit_bytes, before_commit=register)
        with bar("publishing", int((status == WRITE).sum()), show=show_progress) as pbar:
            publish(store, runs, status, load, commit_bytes=commit_bytes, window=window, progress=pbar.update)
    load.chunks = store.chunk_count() - chunks_before
    store.reserve.after_write()  # wakes the eviction if the import took the reserve over capacity


def _check_space(store: ChunkStore, needed: int) -> None:
    """Refuse, before the first write, an import whose records the store's file system or maps have no room for."""
    free = free_bytes(store.path)
    headroom = store.disk_headroom()  # left free by puts for removals and evictions, as by the store's own
    if free is not None and needed + headroom > free:
        raise InsufficientSpace(
            f"not enough free space: the import would add up to {needed / MiB:.1f} MiB to the store, and the "
            f"file system holding {store.path} has {free / MiB:.1f} MiB free, of which puts leave "
            f"{headroom / MiB:.1f} MiB to removals and evictions; nothing was imported and the store is unchanged"
        )
    room = sum(max(0, store.shard(s).map_room() - store.map_headroom(s)) for s in range(store.shard_count))
    if needed > room:
        raise InsufficientSpace(
            f"not enough room in the store's LMDB maps: the import would add up to {needed / MiB:.1f} MiB, and "
            f"the maps have {room / MiB:.1f} MiB left; nothing was imported and the store is unchanged; open "
            "it with a larger map size (--map-size)"
        )


def _batch_table(
    store: ChunkStore | None, file_batches: list[Batch]
) -> tuple[BatchTable, dict[bytes, bytes | None]]:
    """The batches to validate against (the store's, then the file's as they will be stored) and the
    store records they were read from (to notice a change before publishing)."""
    entries: dict[bytes, tuple[Batch, bytes]] = {}
    seen: dict[bytes, bytes | None] = {}
    for b in store.batches.list() if store is not None else []:
        raw = store.batches.raw(b.id) if store is not None else None
        if raw is not None:
            entries[b.id] = (b, raw)
            seen[b.id] = raw
    for b in file_batches:
        where = f"--batches: batch {b.id.hex()}"
        raw = store.batches.raw(b.id) if store is not None else None
        old = store.batches.find(b.id) if store is not None else None
        if raw is not None and old is None:
            raise ImportRefused(f"{where} is being removed from the store; import again when that is done")
        problem = None if old is None else update_problem(old, b)
        if problem is not None:
            raise ImportRefused(f"{where}: {problem}")
        entries[b.id] = (b, encode_batch(b))
        seen[b.id] = raw
    return BatchTable(entries), seen


def _register(store: ChunkStore, file_batches: list[Batch]) -> tuple[int, int]:
    added = updated = 0
    for b in file_batches:
        old = store.batches.find(b.id)
        if old is None:
            store.batches.add(b)
            added += 1
        elif old != b:
            store.batches.update(b)
            updated += 1
    return added, updated


@contextlib.contextmanager
def _open(source: Source) -> Iterator[tuple[Readable, str, int | None]]:
    """The input as a binary stream, its name for messages, and its size if it is a regular file."""
    if isinstance(source, str | os.PathLike) and os.fspath(source) == "-":
        stream = open(sys.stdin.fileno(), "rb", buffering=1 << 20, closefd=False)  # noqa: SIM115
        with stream:
            yield cast(Readable, stream), "stdin", None  # a BufferedReader, which typeshed calls BinaryIO
        return
    if isinstance(source, str | os.PathLike):
        path = os.fspath(source)
        with open(path, "rb", buffering=1 << 20) as stream:
            st = os.fstat(stream.fileno())
            yield cast(Readable, stream), path, st.st_size if os.path.isfile(path) else None
        return
    yield source, getattr(source, "name", "stream"), None


@contextlib.contextmanager
def _staging(store_path: str, directory: str | None) -> Iterator[str]:
    """A private staging directory, removed afterwards; stale ones of dead imports are removed first.

    By default it sits in the store directory (same file system, room near
    the store); a store directory made only for it goes again with it.
    """
    made_store_dir = not os.path.exists(store_path)
    base = directory or os.path.join(store_path, STAGING)
    os.makedirs(base, exist_ok=True)
    _remove_abandoned(base)
    path = os.path.join(base, f"import-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    os.makedirs(path)
    lock = os.open(os.path.join(path, STAGING_LOCK), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        hold(lock)  # held until this import ends; the workers it forks share it
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(lock)
        with contextlib.suppress(OSError):
            os.rmdir(base)  # only if no other import is staging there
        if made_store_dir:
            with contextlib.suppress(OSError):
                os.rmdir(store_path)  # only if the import failed before creating the store


def remove_abandoned_staging(store_path: str) -> list[str]:
    """Remove the staging directories that killed imports left in the store directory; returns them.

    The daemon calls this when it starts: a killed import's staging area can
    be as large as the import, and until the next import removed it, it held
    that much of the disk the store writes to (a full disk with nothing to show why).
    """
    base = os.path.join(store_path, STAGING)
    if not os.path.isdir(base):
        return []
    removed = _remove_abandoned(base)
    with contextlib.suppress(OSError):
        os.rmdir(base)  # only if no import is staging there
    return removed


def _remove_abandoned(base: str) -> list[str]:
    removed = []
    for entry in os.listdir(base):
        path = os.path.join(base, entry)
        if entry.startswith("import-") and _abandoned_staging(path, entry):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _abandoned_staging(path: str, name: str) -> bool:
    """A staging directory no import is using: its lock is free (a process id says nothing in a container,
    where every run has the same one). One without a lock file was made by a version before the lock:
    its process id decides, and our own cannot be another live import's."""
    lock = os.path.join(path, STAGING_LOCK)
    if os.path.exists(lock):
        return abandoned(lock)
    pid = name.split("-")[1] if name.count("-") >= 2 else ""
    return pid.isdigit() and (int(pid) == os.getpid() or not _alive(int(pid)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
