"""Phase one of an import: read the input into the ring, validate in the workers, collect sorted runs.

Nothing here touches the store. Each reader walks its format (tar entries,
snapshot frames), reads every entry or frame into an exact-size range of the
ring, hands groups to the workers in input order and, as verdicts come back
in that same order, copies the accepted records into the run buffer
(``Collector``) and releases their ring ranges. The first refused record,
damaged frame or truncation raises, naming where it is; the caller then
throws the staging area away and the store is as it was.
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from chunkstore.swarm.constants import STAMP_SIZE, ChunkType

from . import snapformat as snap
from . import tarformat as tarf
from .budget import TAR_SHAPE, TAR_TASK_BYTES, TAR_TASK_ENTRIES, FrameShape
from .bufferpool import SharedRing
from .errors import BudgetTooSmall, CorruptInput, ImportRefused
from .runs import Run, RunBuffer
from .tarformat import Readable
from .workers import FrameTask, TarTask, Verdict, Workers

Tick = Callable[[int], object]  # bytes of input consumed since the last call
# Tasks queued per worker before the oldest verdict is waited for. Verdicts are taken in input order,
# so a worker slowed down (a core shared with another program) stalls the others once its queue is the
# oldest; a deeper queue lets them run ahead. The ring (budget.py: 4 units per worker) bounds it too.
IN_FLIGHT_PER_WORKER = 4
_STAMP_COLS = np.arange(STAMP_SIZE, dtype=np.int64)


class _Spill:
    """One full run buffer being sorted and written to the staging area by a thread of its own."""

    def __init__(self, buffer: RunBuffer, staging: str, number: int, shard_count: int) -> None:
        self.buffer = buffer
        self.run: Run | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(
            target=self._work, args=(staging, number, shard_count), name=f"import-spill-{number}", daemon=True
        )
        self.thread.start()

    def _work(self, staging: str, number: int, shard_count: int) -> None:
        try:
            self.run = self.buffer.spill(staging, number, shard_count)
        except BaseException as exc:  # raised again by ``wait``, in the importing thread
            self.error = exc

    def wait(self) -> Run:
        self.thread.join()
        if self.error is not None:
            raise self.error
        assert self.run is not None
        return self.run


class Collector:
    """Validated records into the run buffer; a full buffer is spilled to the staging directory as a run.

    The spill (sort, write) runs in a thread of its own, started as soon as
    the buffer could not take another of the largest units (``shape``), and
    the next ``add`` waits for it. Meanwhile the reader goes on feeding the
    workers, and their verdicts wait in the ring (``spilling`` tells the
    readers not to take them): the workers never stop for a spill while the
    ring has room. One buffer of the full size keeps runs as few as the
    budget allows: publishing merges every run, each read through a window
    that shrinks as runs multiply, and each merge block costs a few calls per run.
    """

    def __init__(self, buffer: RunBuffer, staging: str, shard_count: int, shape: FrameShape | None = None) -> None:
        self.buffer = buffer
        self.staging = staging
        self.shard_count = shard_count
        self.shape = shape  # the largest unit: a buffer that cannot take one more is spilled at once
        self.runs: list[Run] = []
        self.records = 0
        self._spill: _Spill | None = None
        self._socs: list[np.ndarray] = []  # addresses of the SOCs seen, to find the repeated ones

    @property
    def spilling(self) -> bool:
        """A spill is still running: verdicts are better left in the ring for now."""
        return self._spill is not None and self._spill.thread.is_alive()

    def add(
        self,
        addresses: np.ndarray,
        stamps: np.ndarray,
        kinds: np.ndarray,
        first: int,
        src: np.ndarray,
        offsets: np.ndarray,
        lengths: np.ndarray,
    ) -> None:
        self._settle()
        n = len(lengths)
        nbytes = int(lengths.sum())
        if not self.buffer.fits(n, nbytes):
            if not self.buffer.rows:
                rows, size = self.buffer.capacity
                raise BudgetTooSmall(f"{n} records of {nbytes} bytes do not fit a run buffer of {rows} rows, {size} bytes")
            self.runs.append(self.buffer.spill(self.staging, len(self.runs), self.shard_count))
        shards = addresses[:, 31] % self.shard_count
        ordinals = np.arange(first, first + n, dtype=np.uint64)
        self.buffer.add(shards, addresses, stamps, kinds, ordinals, src, offsets, lengths)
        self.records += n
        socs = kinds == ChunkType.SOC
        if socs.any():
            self._socs.append(np.ascontiguousarray(addresses[socs]).view("V32").reshape(-1))
        shape = self.shape
        if shape is not None and not self.buffer.fits(shape.records, shape.data_bytes):
            self._spill = _Spill(self.buffer, self.staging, len(self.runs), self.shard_count)

    def _settle(self) -> None:
        """Wait for the spill in progress, if any: its run joins the list and the buffer is free again."""
        if self._spill is not None:
            spill, self._spill = self._spill, None
            self.runs.append(spill.wait())

    def repeated_socs(self) -> set[bytes]:
        """Addresses of SOCs that occur more than once (a feed updated within the import)."""
        if not self._socs:
            return set()
        found, counts = np.unique(np.concatenate(self._socs), return_counts=True)
        return {a.tobytes() for a in found[counts > 1]}

    def finish(self) -> list[Run]:
        """The runs: those spilled, and what the buffer still holds as the last.

        When runs were spilled already, the last is spilled too and the run
        buffer let go of: publishing then merges every run from disk, and its
        read windows get the buffer's memory (with a hundred runs, windows of
        a budget's small share held a few dozen rows each, and merging cost
        more than validating). A single run stays in memory, as it was.
        """
        self._settle()
        if self.buffer.rows:
            if self.runs:
                self.runs.append(self.buffer.spill(self.staging, len(self.runs), self.shard_count))
                self.buffer = RunBuffer(0, 0)
            else:
                self.runs.append(self.buffer.seal(self.shard_count))
                self.buffer.rows = 0
        elif self.runs:  # the last records filled the buffer, and its spill emptied it: all on disk too
            self.buffer = RunBuffer(0, 0)
        return self.runs

    def discard(self) -> None:
        if self._spill is not None:
            self._spill.thread.join()  # before its files are removed; its error is moot now
            if self._spill.run is not None:
                self.runs.append(self._spill.run)
            self._spill = None
        for run in self.runs:
            run.remove()
        self.runs = []


class PrefixedStream:
    """A stream whose first bytes were already read (to tell the format): serves them again first."""

    def __init__(self, prefix: bytes, stream: Readable) -> None:
        self._prefix = memoryview(prefix)
        self._stream = stream

    def readinto(self, buf: memoryview) -> int:
        if self._prefix:
            n = min(len(buf), len(self._prefix))
            buf[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            if not self._prefix:
                # From now on, straight through: no wrapper call per read. The stream's method has this
                # method's signature (Readable), which mypy cannot match against a bound method.
                self.readinto = self._stream.readinto  # type: ignore[method-assign,assignment]
            return n
        return self._stream.readinto(buf)

    def read(self, n: int) -> bytes:
        out = bytearray(n)
        got = _read_exact(self, memoryview(out))
        return bytes(out[:got])


def _wait_for_room(ring: SharedRing, size: int, workers: Workers, consume: Callable[[], None], flush: Callable[[], None]) -> int:
    """A ring range of ``size`` bytes, consuming the oldest verdicts until one is free."""
    off = ring.alloc(size)
    while off is None:
        flush()
        if not workers.outstanding:
            raise BudgetTooSmall(f"an input unit of {size} bytes does not fit the ring of {ring.size} bytes")
        consume()
        off = ring.alloc(size)
    return off


@dataclass
class TarSummary:
    entries: int = 0
    end_marker: bool = False


def _fast_scanner() -> ModuleType | None:
    """``chunkstore.tarscan`` when the numba kernels are in use (the pysha3 backend keeps numba out)."""
    from chunkstore.swarm.bmt import backend as hashing

    if not hashing.accelerated():
        return None
    from . import tarscan

    return tarscan


def read_tar(stream: Readable, ring: SharedRing, workers: Workers, collector: Collector, tick: Tick) -> TarSummary:
    """Read the reference node's export; raises ``CorruptInput`` / ``ImportRefused`` naming the entry.

    Slabs of the input go into the ring whole and their plain entries are
    parsed in numba (chunkstore/tarscan.py); from the first entry that is not
    plain (or without numba) ``TarReader`` reads the rest, one entry at a time.
    """
    pending: deque[tuple[int, TarTask, int]] = deque()  # first ordinal, task, ring ranges it frees
    state = {"first": 0, "seen": 0, "offset": 0}

    def consume() -> None:
        verdict = workers.result()
        at, task, frees = pending.popleft()
        if verdict.bad is not None:
            i, message = verdict.bad
            raise ImportRefused(f"tar entry {at + i} (chunk {task.addresses[i].tobytes().hex()}): {message}; nothing was imported")
        if len(task.starts):
            offsets = task.starts + tarf.LENGTH_PREFIX
            stamps = ring.array[(offsets + task.data_lengths)[:, None] + _STAMP_COLS]
            collector.add(task.addresses, stamps, verdict.kinds, at, ring.array, offsets, task.data_lengths)
        ring.release(frees)
        tick(state["offset"] - state["seen"])
        state["seen"] = state["offset"]

    def submit(task: TarTask, frees: int) -> None:
        workers.submit(task)
        pending.append((state["first"], task, frees))
        state["first"] += len(task.starts)
        while workers.outstanding > IN_FLIGHT_PER_WORKER * max(1, workers.count) and not collector.spilling:
            consume()  # keep verdicts flowing so the run buffer fills while workers validate

    scanner = _fast_scanner()
    rest: Readable = stream
    at = 0  # input offset where ``rest`` starts
    if scanner is not None:
        leftover, eof = _read_tar_slabs(stream, ring, workers, scanner, submit, consume, state)
        if leftover is None:  # the whole input was plain
            while workers.outstanding:
                consume()
            return TarSummary(entries=state["first"], end_marker=False)
        rest = PrefixedStream(leftover, _Empty() if eof else stream)
        at = state["offset"] - len(leftover)
    summary = _read_tar_entries(rest, at, ring, workers, submit, consume, state)
    while workers.outstanding:
        consume()
    return summary


class _Empty:
    """A stream at its end (what is left after a slab that read the input to its end)."""

    def readinto(self, buf: memoryview) -> int:
        return 0

    def read(self, n: int) -> bytes:
        return b""


def _read_tar_slabs(stream: Readable, ring: SharedRing, workers: Workers, scanner: ModuleType,
                    submit: Callable[[TarTask, int], None], consume: Callable[[], None],
                    state: dict[str, int]) -> tuple[bytes | None, bool]:  # fmt: skip
    """Plain entries, a slab of the input at a time, each slab read straight into the ring.

    Returns the input from the first entry that is not plain on (None when
    the input ended cleanly) and whether the stream is exhausted. An entry
    cut by a slab's end is carried to the start of the next slab.
    """
    slab = TAR_SHAPE.ring_bytes
    cap = TAR_TASK_ENTRIES
    starts = np.empty(cap, np.int64)
    lengths = np.empty(cap, np.int64)
    addresses = np.empty((cap, 32), np.uint8)
    carry = b""
    while True:
        off = _wait_for_room(ring, slab, workers, consume, lambda: None)
        view = ring.view[off : off + slab]
        view[: len(carry)] = carry
        got = _read_exact(stream, view[len(carry) :])
        state["offset"] += got
        end = len(carry) + got
        eof = end < slab
        at = 0
        tasks = []
        while True:
            n, nxt, why = scanner.scan(ring.array, off + at, off + end, eof, cap, starts, lengths, addresses)
            at = nxt - off
            if n:
                tasks.append(TarTask(starts[:n].copy(), lengths[:n].copy(), addresses[:n].copy()))
            if why != scanner.MORE or n < cap:
                break
        if not tasks:  # nothing plain in it: an empty task still frees the slab, in its turn
            tasks.append(TarTask(np.empty(0, np.int64), np.empty(0, np.int64), np.empty((0, 32), np.uint8)))
        rest = bytes(view[at:end])
        if at == 0 and why == scanner.MORE and not eof:
            why = scanner.OTHER  # one entry longer than a slab: TarReader reads any size
        for j, task in enumerate(tasks):
            submit(task, 1 if j == len(tasks) - 1 else 0)  # the slab's range goes with its last task
        if why == scanner.OTHER:
            return rest, eof
        if eof:
            return (rest or None), True  # a partial entry at the end: TarReader says how it is cut
        carry = rest


def _read_tar_entries(stream: Readable, at: int, ring: SharedRing, workers: Workers,
                      submit: Callable[[TarTask, int], None], consume: Callable[[], None],
                      state: dict[str, int]) -> TarSummary:  # fmt: skip
    """The input from offset ``at`` on, one entry at a time (``TarReader``: every header a tar may have)."""
    reader = tarf.TarReader(stream)
    reader.entries = state["first"]  # numbering and offsets go on from where the slabs stopped
    reader.offset = at
    cap = TAR_TASK_ENTRIES
    starts = np.empty(cap, np.int64)
    lengths = np.empty(cap, np.int64)
    names: list[str] = []
    task_bytes = 0

    def flush() -> None:
        nonlocal task_bytes
        k = len(names)
        if not k:
            return
        task = TarTask(starts[:k].copy(), lengths[:k].copy(), _addresses(names, state["first"]))
        names.clear()
        task_bytes = 0
        submit(task, k)  # one ring range per entry

    while True:
        entry = reader.next_entry()
        state["offset"] = reader.offset
        if entry is None:
            break
        name, size = entry
        n = reader.entries
        if len(name) != 64:
            raise CorruptInput(f"tar entry {n} ({name!r}): the name is not a 64-character hex chunk address")
        if not tarf.MIN_RECORD <= size <= tarf.MAX_RECORD:
            raise CorruptInput(
                f"tar entry {n} ({name}): {size} bytes cannot hold a chunk and its stamp "
                f"({tarf.MIN_RECORD}..{tarf.MAX_RECORD} bytes)"
            )
        # The entry's padding comes along in the same read: one call per entry, not two.
        off = _wait_for_room(ring, size + tarf.padding(size), workers, consume, flush)
        reader.read_padded(ring.view[off : off + size + tarf.padding(size)])
        state["offset"] = reader.offset
        data_length = int.from_bytes(ring.view[off : off + 4], "big")
        if size != tarf.LENGTH_PREFIX + data_length + STAMP_SIZE:
            missing = " (the entry has no stamp)" if size == tarf.LENGTH_PREFIX + data_length else ""
            raise CorruptInput(
                f"tar entry {n} ({name}): {size} bytes do not hold {data_length} bytes of data and a "
                f"{STAMP_SIZE}-byte stamp{missing}"
            )
        k = len(names)
        starts[k] = off
        lengths[k] = data_length
        names.append(name)
        task_bytes += size
        if k + 1 == cap or task_bytes >= TAR_TASK_BYTES:
            flush()
    flush()
    return TarSummary(entries=reader.entries, end_marker=reader.end_marker)


def _addresses(names: list[str], first: int) -> np.ndarray:
    try:
        raw = bytes.fromhex("".join(names))
    except ValueError:
        for i, name in enumerate(names):
            try:
                bytes.fromhex(name)
            except ValueError:
                raise CorruptInput(f"tar entry {first + i} ({name!r}): the name is not a hex chunk address") from None
        raise
    return np.frombuffer(raw, np.uint8).reshape(len(names), 32)


@dataclass
class SnapshotSummary:
    frames: int = 0
    records: int = 0
    frame_starts: list[int] = field(default_factory=list)  # ordinal of each frame's first record

    def describe(self, ordinal: int, address: bytes) -> str:
        f = bisect.bisect_right(self.frame_starts, ordinal) - 1
        return f"snapshot frame {f} record {ordinal - self.frame_starts[f]} (chunk {address.hex()})"


def read_snapshot_header(stream: Readable) -> int:
    raw = stream.read(snap.FILE_HEADER_SIZE)
    return snap.decode_file_header(raw)


def read_snapshot(
    stream: Readable, limit: int, ring: SharedRing, workers: Workers, collector: Collector, tick: Tick
) -> SnapshotSummary:
    """Read frames after the file header; raises ``CorruptInput`` naming the frame, ``ImportRefused`` the record."""
    summary = SnapshotSummary()
    seen: list[snap.FrameInfo] = []
    pending: deque[tuple[snap.FrameInfo, int, int]] = deque()  # frame, first ordinal, ring offset
    offset = snap.FILE_HEADER_SIZE
    ordinal = 0
    consumed = offset

    def consume() -> None:
        nonlocal consumed
        verdict: Verdict = workers.result()
        info, at, off = pending.popleft()
        dst = off + info.clen
        out = ring.array[dst : dst + info.dlen]
        cols = snap.frame_columns(out, info.records, f"snapshot frame {info.number}")
        if verdict.bad is not None:
            i, message = verdict.bad
            address = cols.addresses[i].tobytes()
            raise ImportRefused(f"{summary.describe(at + i, address)}: {message}; nothing was imported")
        collector.add(cols.addresses, cols.stamps, verdict.kinds, at, out, cols.offsets, cols.lengths)
        ring.release()
        tick(info.offset + snap.FRAME_HEADER_SIZE + info.clen - consumed)
        consumed = info.offset + snap.FRAME_HEADER_SIZE + info.clen

    while True:
        number = len(seen)
        tag = stream.read(4)
        if tag == snap.FRAME_TAG:
            rest = stream.read(snap.FRAME_HEADER_SIZE - 4)
            if len(rest) != snap.FRAME_HEADER_SIZE - 4:
                raise CorruptInput(f"snapshot truncated in the header of frame {number} (at byte {offset})")
            info = snap.decode_frame_header(tag + rest, offset, number, limit)
            off = _wait_for_room(ring, info.clen + info.dlen, workers, consume, lambda: None)
            got = _read_exact(stream, ring.view[off : off + info.clen])
            if got != info.clen:
                raise CorruptInput(
                    f"snapshot truncated in frame {number} (at byte {offset}): {got} of its {info.clen} bytes are there"
                )
            workers.submit(FrameTask(number, off, info.clen, off + info.clen, info.dlen, info.dcrc, info.records))
            pending.append((info, ordinal, off))
            seen.append(info)
            summary.frame_starts.append(ordinal)
            ordinal += info.records
            offset += snap.FRAME_HEADER_SIZE + info.clen
        elif tag == snap.INDEX_TAG:
            rest = stream.read(snap.index_size(len(seen)) - 4)
            snap.check_index(tag + rest, offset, seen)
            if stream.read(1):
                raise CorruptInput(f"snapshot has data after its trailer (at byte {offset + 4 + len(rest)})")
            break
        elif len(tag) < 4:
            raise CorruptInput(f"snapshot truncated after frame {number - 1} (at byte {offset}): its index of frames is missing")
        else:
            raise CorruptInput(f"snapshot frame {number} (at byte {offset}): no frame header there: the file is corrupted")
        while workers.outstanding > IN_FLIGHT_PER_WORKER * max(1, workers.count) and not collector.spilling:
            consume()  # keep verdicts flowing so the run buffer fills while workers decode
    while workers.outstanding:
        consume()
    summary.frames = len(seen)
    summary.records = ordinal
    return summary


def _read_exact(stream: Readable, buf: memoryview) -> int:
    got = 0
    n = len(buf)
    while got < n:
        k = stream.readinto(buf[got:])
        if not k:
            break
        got += k
    return got
