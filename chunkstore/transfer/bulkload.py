"""Publishing validated, sorted runs into the store: the slot rule decided in bulk, then appends.

Every record of an import is settled exactly as ``put`` calls in input
order would settle it, in three steps, all under the writer lock:

1. ``plan`` walks the records in slot order (the runs' slot rows merged),
   one group per slot (batch, bucket, position), starting from the store's
   holder of the slot if any. For CACs it applies the rule consecutive puts
   apply: a strictly newer stamp takes the slot over (a record overtaken
   later in the same import is never written: puts would have stored and
   evicted it), an exact repeat is a no-op, an equal or older stamp is a
   ``StampConflict``, found here, before anything is written. A slot no one
   holds, claimed by one CAC (or by one SOC met only once and not stored),
   is simply "write". Slots held in the store and slots SOCs contend for
   go to step 2.
2. ``apply_slow`` puts those records through ``WriteSession.apply`` in
   input order: the store's own slot rule, evictions across shards and SOC
   data replacement included. They touch only their own slots, and no
   chunk of step 3 can be a SOC updated in the import, so doing them first
   ends in the same state as interleaving them with the rest in input order.
3. ``publish`` writes the records decided "write" shard by shard in key
   order with ``putmulti``: chunk data and stamp entries appended past the
   database's last key (every key, into an empty shard), slots, the byte
   counter and the per-bin counters (kept as ``WriteSession.put_entry``
   keeps them), committing every ``commit_bytes`` and dropping from the
   page cache what each commit appended (chunkstore/store/mapped.py).
   Each commit holds whole (chunk, stamp entries, slots) sets of one shard,
   so a crash between commits leaves a consistent store holding part of the import; running
   the import again completes it (what is there is an exact repeat).

Refusals abort before anything is written, unless ``skip_conflicts``: then
the refused records are left out and listed. Chunks outside the store's
storage radius are left out and counted, as a ``put`` refuses them (policy,
not a fault of the input).
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import lmdb
import numpy as np

from chunkstore.reserve import ReserveStore
from chunkstore.store.admission import Admitted
from chunkstore.store.errors import StampConflict
from chunkstore.store.layout import HEAD_SIZE
from chunkstore.store.mapped import drop_cached, release
from chunkstore.store.store import ChunkStore
from chunkstore.swarm.bmt import ROW_STRIDE
from chunkstore.swarm.constants import MAX_PO, ChunkType
from chunkstore.swarm.directio import anonymous_array
from chunkstore.swarm.stamp import Stamp, split_index

from .bytecopy import gather
from .errors import ImportRefused
from .fastcheck import BatchTable
from .gcpause import collection_paused
from .runs import ADDR, ENTRY_KEY, INDEX, ROW, SLOT_KEY, STAMP_VALUE, TAIL_AT, Cursor, Piece, Run, merge_blocks

UNDECIDED, WRITE, NOOP, REPLACED, SLOW, REFUSED, OUTSIDE = range(7)
MAX_LISTED = 1000  # refusals kept with their message; the rest are only counted

Describe = Callable[[int, bytes], str]  # (ordinal, address) -> "tar entry 12 (chunk ab12...)"
Progress = Callable[[int], object]


@dataclass
class LoadReport:
    written: int = 0  # (chunk, stamp) entries stored
    chunks: int = 0  # chunks whose data was written
    repeats: int = 0  # exact repeats (of the store or of an earlier record): no-ops
    replaced: int = 0  # records a later record of the import replaced in their slot
    outside: int = 0  # records outside the storage radius, left out
    refused: int = 0
    refusals: list[str] = field(default_factory=list)  # the first MAX_LISTED, with their reason
    contested: int = 0  # records that went through the store's own put path

    def refuse(self, message: str) -> None:
        self.refused += 1
        if len(self.refusals) < MAX_LISTED:
            self.refusals.append(message)


def _proximities(overlay: bytes, addresses: np.ndarray) -> np.ndarray:
    """proximity(overlay, a) for each row of ``addresses`` (uint8 (n, 32)), vectorised."""
    x = np.ascontiguousarray(addresses[:, :4]).view(">u4").reshape(-1).astype(np.int64)
    x ^= int.from_bytes(overlay[:4], "big")
    lead = np.full(len(x), MAX_PO, np.int64)
    nz = x > 0
    lead[nz] = 31 - np.floor(np.log2(x[nz])).astype(np.int64)
    return np.minimum(lead, MAX_PO)


def _radius(store: ReserveStore) -> tuple[bytes, int] | None:
    """The overlay and storage radius records must keep to, as ``put`` does; None at radius 0."""
    radius = store.reserve.radius
    return None if not radius else (store.reserve.overlay, radius)


def _conflict(slot: bytes, holder: bytes, held_ts: int, offered_ts: int) -> StampConflict:
    bucket, position = split_index(slot[32:40])
    return StampConflict(slot[:32], bucket, position, holder, held_ts, offered_ts)


def plan(
    store: ReserveStore,
    runs: list[Run],
    status: np.ndarray,
    report: LoadReport,
    describe: Describe,
    *,
    skip_conflicts: bool,
    window: int,
    repeated_socs: set[bytes] | frozenset[bytes] = frozenset(),
) -> bool:
    """Decide every record's fate (``status[ordinal]``); raises ``ImportRefused`` on a conflict unless skipping.

    ``repeated_socs``: addresses of SOCs that occur more than once in the
    import (their data depends on the order of their puts: the store's own
    path settles them). Returns True if a record left to ``apply_slow`` may
    still be refused there (a SOC re-stored under the stamp it already has,
    with other data): then that step must not commit before it is done.
    """
    planner = _Planner(store, status, report, describe, skip_conflicts, repeated_socs)
    try:
        radius = _radius(store)
        carry = None
        for pieces, last in _blocks([r.slot_cursor(window) for r in runs]):
            parts = [p.rows for p in pieces] + ([carry] if carry is not None else [])
            block = np.concatenate(parts) if len(parts) > 1 else parts[0].copy()
            block = block[np.lexsort((block["ord"], block["slot"]))]
            carry = None
            if not last and len(block):
                # The last slot group may go on in the next block: keep it for then.
                k = int(np.searchsorted(block["slot"], block["slot"][-1], side="left"))
                carry, block = block[k:].copy(), block[:k]
            if radius is not None and len(block):
                raw = block.view(np.uint8).reshape(len(block), -1)
                out = _proximities(radius[0], raw[:, 56:88]) < radius[1]
                status[block["ord"][out]] = OUTSIDE
                report.outside += int(out.sum())
                block = block[~out]
            planner.block(block)
    finally:
        planner.session.abort()
    return planner.unsure


def _blocks(cursors: list[Cursor]) -> Iterator[tuple[list[Piece], bool]]:
    for pieces in merge_blocks(cursors):
        yield pieces, all(c.final and not c.remaining() for c in cursors)


class _Planner:
    """The slot rule over slot groups (all records claiming one slot, in input order)."""

    def __init__(
        self,
        store: ChunkStore,
        status: np.ndarray,
        report: LoadReport,
        describe: Describe,
        skip: bool,
        repeated_socs: set[bytes] | frozenset[bytes],
    ) -> None:
        self.store = store
        self.session = store.session()  # read transactions only; aborted when planning ends
        self.status = status
        self.report = report
        self.describe = describe
        self.skip = skip
        self.repeated = repeated_socs
        self.repeated_array = np.array(sorted(repeated_socs), dtype="V32") if repeated_socs else None
        # An empty store holds no slot (and no chunk): nothing to look up.
        self.held = any(
            self.session.read(s).stat(store.shard(s).slots)["entries"] for s in range(store.shard_count)
        )
        self.unsure = False

    def block(self, block: np.ndarray) -> None:
        n = len(block)
        if not n:
            return
        slots = block["slot"]
        starts = np.flatnonzero(np.r_[True, slots[1:] != slots[:-1]])
        ends = np.r_[starts[1:], n]
        simple = np.zeros(len(starts), bool)
        if not self.held:
            # The common case, vectorised: one chunk claims a slot nobody holds (a SOC only if it occurs once).
            kinds = block["kind"][starts]
            lone = (ends - starts == 1) & (kinds == ChunkType.CAC)
            socs = (ends - starts == 1) & (kinds == ChunkType.SOC)
            if socs.any() and self.repeated_array is not None:
                socs &= ~np.isin(block["addr"][starts], self.repeated_array)
            simple = lone | socs
            self.status[block["ord"][starts[simple]]] = WRITE
        raw = block.view(np.uint8).reshape(n, -1)
        for a, b in zip(starts[~simple].tolist(), ends[~simple].tolist(), strict=True):
            self.group(block[a:b], raw[a:b])

    def group(self, group: np.ndarray, raw: np.ndarray) -> None:
        status, report = self.status, self.report
        slot = raw[0, :40].tobytes()
        ords = group["ord"].tolist()
        times = group["ts"].tolist()
        kinds = group["kind"].tolist()
        addrs = [raw[i, 56:88].tobytes() for i in range(len(group))]
        holders = self.session.holders(slot) if self.held else []
        if ChunkType.SOC in kinds:
            lone_soc = (
                len(ords) == 1
                and not holders
                and addrs[0] not in self.repeated
                and not self._stored(addrs[0])
            )
            if lone_soc:
                status[ords[0]] = WRITE
                return
            # A SOC's data follows its last accepted put: the store's own path settles the group.
            status[ords] = SLOW
            report.contested += len(ords)
            self.unsure = True
            return
        # CACs only: the rule consecutive puts apply, starting from the store's holder if any.
        cur: tuple[int, int, bytes] | None = None
        if holders:
            top_ts, _, top_addr = max(holders)
            cur = (-1, top_ts, top_addr)
        accepted: list[int] = []
        for o, t, a in zip(ords, times, addrs, strict=True):
            if cur is None or t > cur[1]:
                if cur is not None and cur[0] >= 0:
                    status[cur[0]] = REPLACED
                    report.replaced += 1
                    accepted.remove(cur[0])
                accepted.append(o)
                cur = (o, t, a)
            elif t == cur[1] and a == cur[2]:
                status[o] = NOOP
                report.repeats += 1
            else:
                exc = _conflict(slot, cur[2], cur[1], t)
                message = f"{self.describe(o, a)}: {exc}"
                if not self.skip:
                    raise ImportRefused(f"{message}; nothing was imported")
                status[o] = REFUSED
                report.refuse(message)
        if not accepted:
            return
        if holders:
            # Evicting a stored holder (maybe in another shard) is the store's own work.
            status[accepted] = SLOW
            report.contested += len(accepted)
        else:
            status[accepted] = WRITE

    def _stored(self, address: bytes) -> bool:
        if not self.held:
            return False
        s = self.store.shard_of(address)
        return self.session.read(s).get(address, db=self.store.shard(s).chunks) is not None


def _iter_rows(cursor: Cursor) -> Iterator[np.ndarray]:
    while True:
        if not cursor.remaining():
            cursor.refill()
            if not cursor.remaining():
                return
        yield cursor.take(cursor.remaining()).rows


# LMDB page arithmetic for ``estimate_growth``: 4 KiB pages with a 16-byte header; a node (key, value
# and an 8-byte header) larger than ``_NODE_MAX`` moves its value to overflow pages of its own.
_PAGE, _PAGE_HEADER, _NODE_MAX = 4096, 16, 2038
_ENTRY_BYTES = 72 + 74 + 10  # a stamp entry in its leaf: key, value, node header and index slot
_SLOT_BYTES = 40 + 40 + 10
_LEAF_FILL = 2  # leaves filled by ordered appends are full, by inserts about half: count every leaf byte twice
_SLACK = 1 << 20  # per shard: branch pages, meta, the pages each commit copies on write


def estimate_growth(runs: list[Run], status: np.ndarray, shard_count: int, window: int) -> int:
    """Bytes the store's files may grow by when the records decided WRITE or SLOW are stored.

    An upper estimate, for refusing before the first write an import the
    disk cannot take: each record counted as new (a chunk already stored
    adds only its stamp entry) and no page LMDB could reuse counted as free.
    """
    total = 0
    for run in runs:
        for rows in _iter_rows(run.index_cursor(window)):
            keep = np.isin(status[rows["ord"]], (WRITE, SLOW))
            if not keep.any():
                continue
            lens = rows["len"][keep].astype(np.int64)
            head = np.minimum(lens, HEAD_SIZE)
            overflow = head + 32 + 8 > _NODE_MAX
            pages = -(-(head + _PAGE_HEADER) // _PAGE)
            data = np.where(overflow, pages * _PAGE, _LEAF_FILL * (head + 42))
            tails = _LEAF_FILL * np.where(lens > HEAD_SIZE, lens - HEAD_SIZE + 42, 0)
            total += int(data.sum() + tails.sum()) + _LEAF_FILL * (_ENTRY_BYTES + _SLOT_BYTES) * len(lens)
    return total + shard_count * _SLACK


def apply_slow(
    store: ChunkStore,
    runs: list[Run],
    status: np.ndarray,
    table: BatchTable,
    report: LoadReport,
    describe: Describe,
    *,
    skip_conflicts: bool,
    window: int,
    commit_bytes: int | None,
    before_commit: Callable[[], None],
) -> None:
    """Put the contested records through the store's own slot rule, in input order.

    Commits every ``commit_bytes`` of chunk data, or only at the end when it
    is None (some record may still be refused: then nothing is committed).
    ``before_commit`` runs before the first commit (the caller registers the
    import's batches there, so that no committed stamp names an unknown batch).
    """
    todo: list[tuple[int, int, int, int, bytes]] = []
    if (status == SLOW).any():
        for r, run in enumerate(runs):
            for rows in _iter_rows(run.index_cursor(window)):
                pick = np.flatnonzero(status[rows["ord"]] == SLOW)
                raw = rows.view(np.uint8).reshape(len(rows), ROW)
                offs, lens, ords = rows["off"][pick].tolist(), rows["len"][pick].tolist(), rows["ord"][pick].tolist()
                for i, o, off, length in zip(pick.tolist(), ords, offs, lens, strict=True):
                    todo.append((o, r, off, length, raw[i].tobytes()))
        todo.sort()
    session = store.session()
    pending = 0
    try:
        for o, r, off, length, row in todo:
            address = row[ADDR]
            batch_id = row[33:65]
            stamp = Stamp(batch_id, row[65:73], row[TAIL_AT : TAIL_AT + 8], row[TAIL_AT + 8 : ROW])
            batch, record = table.lookup(batch_id)
            item = Admitted(address, ChunkType(row[STAMP_VALUE][0]), runs[r].read(off, length), stamp, batch, record)
            try:
                stored = session.apply(item)
            except StampConflict as exc:
                message = f"{describe(o, address)}: {exc}"
                if not skip_conflicts:
                    raise ImportRefused(f"{message}; nothing was imported") from None
                status[o] = REFUSED
                report.refuse(message)
                continue
            if stored:
                report.written += 1
                pending += length
            else:
                status[o] = NOOP
                report.repeats += 1
            if commit_bytes is not None and pending >= commit_bytes:
                before_commit()
                session.commit()
                session = store.session()
                pending = 0
        before_commit()
        session.commit()
    except BaseException:
        session.abort()
        raise


class _ShardAppender:
    """Writes one shard's new rows in key order, committing every ``commit_bytes`` of chunk data.

    Rows arrive as sorted blocks; each slice of a block becomes a few
    ``putmulti`` calls (LMDB appends for keys past the database's last key,
    which is every key when the shard was empty). A commit always holds
    whole records: chunk, stamp entry and slot together.
    """

    SLICE = 512  # rows per group of puts: the unit between commit checks

    def __init__(self, store: ChunkStore, s: int, commit_bytes: int) -> None:
        self.store = store
        self.s = s
        self.shard = store.shard(s)
        self.data_file = os.path.join(self.shard.path, "data.mdb")
        self.commit_bytes = commit_bytes
        self.prev = b""
        self.written = 0
        self.page_size = self.shard.env.stat()["psize"]
        self._begin()
        # The last keys as the store holds them. Later transactions go on from this appender's own
        # last puts: the import holds the writer lock, so nothing appends between its commits (an
        # eviction may delete, which leaves a key too high: only a lookup more), and reading them
        # again would read the trees' right edges back from disk (each commit drops the pages it
        # appended from the page cache).
        self.chunks_last = _last_key(self.txn, self.shard.chunks)
        self.tails_last = _last_key(self.txn, self.shard.tails)
        self.stamps_last = _last_key(self.txn, self.shard.stamps)
        self.data_fd = os.open(self.data_file, os.O_RDONLY)  # for dropping what each commit appended

    def _begin(self) -> None:
        self.appended_from = self._file_pages()  # pages past this one are new in the commit to come
        self.session = self.store.session()
        self.txn = self.session.write(self.s)
        self.pending = 0

    def add_rows(self, rows: np.ndarray, data: list[memoryview], src: np.ndarray, offs: np.ndarray) -> None:
        """Store sorted index rows; row i's chunk data is ``data[src[i]][offs[i] : offs[i] + len]``."""
        n = len(rows)
        raw = rows.view(np.uint8).reshape(n, ROW)
        addrs = raw[:, ADDR]
        fresh = np.empty(n, bool)  # first row of its address: the one that brings the chunk's data
        fresh[0] = addrs[0].tobytes() != self.prev
        fresh[1:] = (addrs[1:] != addrs[:-1]).any(axis=1)
        self.prev = addrs[-1].tobytes()
        lens = rows["len"].astype(np.int64)
        for a in range(0, n, self.SLICE):
            b = min(n, a + self.SLICE)
            self._slice(raw[a:b], fresh[a:b], data, src[a:b].tolist(), offs[a:b].tolist(), lens[a:b].tolist())
            if self.pending >= self.commit_bytes:
                self.commit()
                self._begin()

    def _slice(self, raw: np.ndarray, fresh: np.ndarray, data: list[memoryview], src: list[int],
               offs: list[int], lens: list[int]) -> None:
        txn, shard, m = self.txn, self.shard, len(raw)
        addresses = raw[:, ADDR].tobytes()
        # Chunk data, once per address.
        heads, tails, added_bytes = [], [], 0
        for i in np.flatnonzero(fresh).tolist():
            address = addresses[32 * i : 32 * i + 32]
            if self.chunks_last is not None and address <= self.chunks_last:
                if txn.get(address, db=shard.chunks) is not None:
                    continue  # the store has it: a CAC's data is fixed by its address
                self._put_chunk(address, data[src[i]][offs[i] : offs[i] + lens[i]])
            else:
                d = data[src[i]][offs[i] : offs[i] + lens[i]]
                heads.append((address, d[:HEAD_SIZE]))
                if len(d) > HEAD_SIZE:
                    tails.append((address, d[HEAD_SIZE:]))
            added_bytes += lens[i]
        if heads:
            txn.cursor(db=shard.chunks).putmulti(heads, append=True)
            self.chunks_last = heads[-1][0]
        if tails:
            if self.tails_last is None or tails[0][0] > self.tails_last:
                txn.cursor(db=shard.tails).putmulti(tails, append=True)
                self.tails_last = tails[-1][0]
            else:
                txn.cursor(db=shard.tails).putmulti(tails)
        # Stamp entries: new by construction (their slot was free), appended past the last key.
        # Keys and values as lists of bytes straight from the columns (void rows: no NUL stripping).
        entries = list(zip(_rows_as_bytes(raw[:, ENTRY_KEY]), _rows_as_bytes(raw[:, STAMP_VALUE]), strict=True))
        added = np.ones(m, bool)
        # Entries at or before the database's last key cannot be appended (a store with content).
        split = 0 if self.stamps_last is None else bisect.bisect_right(entries, (self.stamps_last, _AFTER_ANY_VALUE))
        for i in range(split):
            added[i] = txn.put(entries[i][0], entries[i][1], db=shard.stamps, overwrite=False)
        if split < m:
            txn.cursor(db=shard.stamps).putmulti(entries[split:], append=True)
            self.stamps_last = entries[-1][0]
        self._count(raw[added][:, ADDR])
        slot_cols = np.ascontiguousarray(raw[:, SLOT_KEY])
        order = np.argsort(slot_cols.view("S40").ravel(), kind="stable")  # equal-length keys: bytewise order
        slot_values = np.concatenate([raw[:, ADDR], raw[:, TAIL_AT : TAIL_AT + 8]], axis=1)[order]
        slots = list(zip(_rows_as_bytes(slot_cols[order]), _rows_as_bytes(slot_values), strict=True))
        txn.cursor(db=shard.slots).putmulti(slots)
        delta = self.session.byte_delta
        delta[self.s] = delta.get(self.s, 0) + added_bytes
        self.pending += added_bytes
        self.written += m

    def _put_chunk(self, address: bytes, d: memoryview) -> None:
        txn, shard = self.txn, self.shard
        txn.put(address, d[:HEAD_SIZE], db=shard.chunks)
        if len(d) > HEAD_SIZE:
            txn.put(address, d[HEAD_SIZE:], db=shard.tails)

    def _count(self, addresses: np.ndarray) -> None:
        """Keep the shard's per-bin entry counters (chunkstore/store/bins.py) as ``WriteSession.put_entry`` would."""
        overlay = self.session.overlays.get(self.s)
        if overlay is None or not len(addresses):
            return  # no counters in this shard: the next writable open counts it
        per_bin = np.bincount(_proximities(overlay, addresses), minlength=MAX_PO + 1)
        delta = self.session.bin_delta.setdefault(self.s, [0] * (MAX_PO + 1))
        for b, k in enumerate(per_bin.tolist()):
            delta[b] += k

    def commit(self) -> None:
        try:
            self.session.commit()
        except BaseException:
            self.session.abort()
            raise
        release(self.data_file)  # the pages this commit's successor would keep mapped (see chunkstore/store/mapped.py)
        drop_cached(self.data_fd, self.appended_from * self.page_size, self._file_pages() * self.page_size)

    def _file_pages(self) -> int:
        """Pages the data file holds as of the last commit (the environment's last page number, plus one)."""
        return int(self.shard.env.info()["last_pgno"]) + 1

    def abort(self) -> None:
        self.session.abort()

    def close(self) -> None:
        os.close(self.data_fd)


_AFTER_ANY_VALUE = b"\xff" * 75  # sorts after every 74-byte stamp value


def _rows_as_bytes(cols: np.ndarray) -> list[bytes]:
    """Each row of a (n, k) uint8 array as a bytes object, built in C (a void view keeps trailing NULs)."""
    cols = np.ascontiguousarray(cols)
    return cols.view(f"V{cols.shape[1]}").ravel().tolist()


def _last_key(txn: lmdb.Transaction, db: Any) -> bytes | None:
    cur = txn.cursor(db=db)
    return bytes(cur.key()) if cur.last() else None


def publish(
    store: ChunkStore,
    runs: list[Run],
    status: np.ndarray,
    report: LoadReport,
    *,
    commit_bytes: int,
    window: int,
    progress: Progress | None = None,
    threads: int = 2,
) -> None:
    """Write every record decided WRITE, shard by shard, in key order.

    Shards are separate LMDB environments, so ``threads`` of them are written
    at once: py-lmdb releases the GIL inside each put and commit, and one
    shard's commit (its fsyncs) overlaps another's puts. Each thread reads
    with half the window, so the read buffers stay within the budget.
    """
    lock = threading.Lock()
    failed = threading.Event()

    def one(s: int, window: int) -> int:
        writer = _ShardAppender(store, s, commit_bytes)
        batch = _Gathered(writer)
        try:
            for pieces in merge_blocks([r.shard_cursor(s, window) for r in runs]):
                if failed.is_set():
                    raise _Stopped
                done = batch.add(pieces, status)
                if progress is not None and done:
                    with lock:
                        progress(done)
            batch.flush()
            writer.commit()
        except BaseException:
            failed.set()
            writer.abort()
            raise
        finally:
            writer.close()
        return writer.written

    n = max(1, min(threads, store.shard_count))
    with collection_paused():  # the puts' tuples would set off full collections (gcpause.py)
        if n == 1:
            for s in range(store.shard_count):
                report.written += one(s, window)
            return
        with ThreadPoolExecutor(n, thread_name_prefix="publish") as pool:
            futures = [pool.submit(one, s, max(16, window // n)) for s in range(store.shard_count)]
            errors = []
            for f in futures:
                try:
                    report.written += f.result()
                except _Stopped:
                    pass
                except BaseException as exc:  # noqa: BLE001 - the first real failure is raised below
                    errors.append(exc)
    if errors:
        raise errors[0]


class _Stopped(Exception):
    """Another shard's thread failed: this one stops before its next block."""


class _Gathered:
    """Rows of consecutive merge blocks gathered (index rows and data copied out) and written together.

    A merge block can be small (a run's last rows; every block, before
    windows were topped up: then a hundred runs made blocks of tens of rows),
    and each write costs a fixed set of numpy column operations and LMDB
    calls whatever its size: measured on a 2^22-chunk import, writing block
    by block took longer than validating. Blocks come in key order (a key equal to a block's cutoff may
    continue in the next), so a stable sort of the gathered rows keeps the
    order writing block by block had.
    """

    ROWS = 1024  # rows gathered before a write (about 4.5 MB with their data)

    def __init__(self, writer: _ShardAppender) -> None:
        self.writer = writer
        self.rows = np.empty(self.ROWS, INDEX)
        self.data = anonymous_array(self.ROWS * ROW_STRIDE, np.uint8)
        self.offs = np.empty(self.ROWS, np.int64)
        self.n = 0
        self.used = 0

    def add(self, pieces: list[Piece], status: np.ndarray) -> int:
        """Take the block's rows decided WRITE; returns how many.

        A block is gathered whole or written whole: its pieces come from
        different runs and are in key order only together, and a write that
        is not past the shard's last key takes the slow path of one put per
        record (measured: three records in four, when a block was split).
        """
        chosen: list[tuple[Piece, np.ndarray, np.ndarray]] = []
        rows = size = 0
        for p in pieces:
            pick = np.flatnonzero(status[p.rows["ord"]] == WRITE)
            if len(pick):
                assert p.data is not None  # shard cursors hand out the rows' data with them
                picked = p.rows[pick]
                lens = picked["len"].astype(np.int64)
                chosen.append((p, picked, lens))
                rows += len(picked)
                size += int(lens.sum())
        if not rows:
            return 0
        if self.n + rows > self.ROWS or self.used + size > len(self.data):
            self.flush()
        if rows > self.ROWS or size > len(self.data):  # larger than the buffer: written as it is
            block = np.concatenate([c for _, c, _ in chosen])
            src = np.concatenate([np.full(len(c), i, np.int64) for i, (_, c, _) in enumerate(chosen)])
            offs = np.concatenate([c["off"].astype(np.int64) - p.base for p, c, _ in chosen])
            order = np.argsort(block["key"], kind="stable")
            data = [p.data.data for p, _, _ in chosen if p.data is not None]
            self.writer.add_rows(block[order], data, src[order], offs[order])
            return rows
        for p, picked, lens in chosen:
            assert p.data is not None
            k = len(picked)
            self.rows[self.n : self.n + k] = picked
            self.offs[self.n : self.n + k] = self.used + np.concatenate(([0], np.cumsum(lens[:-1])))
            self.used = gather(p.data, picked["off"].astype(np.int64) - p.base, lens, self.data, self.used)
            self.n += k
        return rows

    def flush(self) -> None:
        if not self.n:
            return
        rows = self.rows[: self.n]
        order = np.argsort(rows["key"], kind="stable")
        self.writer.add_rows(rows[order], [self.data.data], np.zeros(self.n, np.int64), self.offs[: self.n][order])
        self.n = 0
        self.used = 0
