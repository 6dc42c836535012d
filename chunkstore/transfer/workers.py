"""Worker processes of an import: decode snapshot frames and validate chunks, in place in the shared ring.

Each worker maps the importer's ring (chunkstore/transfer/bufferpool.py), receives
small task descriptions over a pipe (where a frame or a group of tar entries
sits in the ring), decodes and validates there, and answers with one chunk
type byte per record, or the first refusal with ``admit``'s message. Chunk
data never crosses the pipe.

Workers are forked when the calling process has no other thread (the
``chunkstore import`` command at this point: the store is not open and no
thread has started): a forked worker has the interpreter, the libraries and
the kernels its parent loaded, where a spawned one spends about a second of
a core loading them again, a core the other worker needs. A process with
other threads (a test run, an embedding program) gets 'spawn': a fork copies
whatever lock another thread holds at that moment. Workers never open the
store either way (a process forked from one holding it could not, under
py-lmdb 3). ``Workers(0, ...)`` runs the same tasks in the calling process
(small imports, tests, machines with one core).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import traceback
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from chunkstore.swarm.constants import STAMP_SIZE
from chunkstore.swarm.lifeline import exit_with

from .budget import peak_rss_bytes
from .bufferpool import RingHandle, SharedRing, attach
from .errors import CorruptInput, TransferError
from .fastcheck import OK, BatchTable, Validator
from .snapformat import frame_columns

_STAMP_COLS = np.arange(STAMP_SIZE, dtype=np.int64)


@dataclass(frozen=True)
class TarTask:
    """Tar entries in the ring: content (``u32 length | data | stamp``) at ``starts[i]``."""

    starts: np.ndarray  # int64
    data_lengths: np.ndarray  # int64
    addresses: np.ndarray  # uint8 (n, 32), from the entry names


@dataclass(frozen=True)
class FrameTask:
    """A compressed snapshot frame at ``ring[src : src + clen]`` to decode into ``ring[dst : dst + dlen]``."""

    frame: int
    src: int
    clen: int
    dst: int
    dlen: int
    dcrc: int
    records: int


@dataclass(frozen=True)
class Verdict:
    """Per record chunk type (CAC/SOC); ``bad`` is the first refused record and why, if any."""

    kinds: np.ndarray
    bad: tuple[int, str] | None = None


class TaskRunner:
    """Runs tasks against a ring array; one per worker process (or in the importer itself)."""

    def __init__(self, ring: np.ndarray, table: BatchTable) -> None:
        self.ring = ring
        self.validator = Validator(table)
        import zstandard

        self._dctx = zstandard.ZstdDecompressor()
        self._zstd_error = zstandard.ZstdError

    def run(self, task: TarTask | FrameTask) -> Verdict:
        if isinstance(task, TarTask):
            return self._tar(task)
        return self._frame(task)

    def _verdict(self, status: np.ndarray, kinds: np.ndarray, record: Any) -> Verdict:
        bad = np.flatnonzero(status != OK)
        if not len(bad):
            return Verdict(kinds)
        i = int(bad[0])
        address, data, stamp = record(i)
        return Verdict(kinds, (i, self.validator.explain(address, data, stamp)))

    def _tar(self, t: TarTask) -> Verdict:
        ring = self.ring
        offsets = t.starts + 4
        stamp_at = offsets + t.data_lengths
        stamps = ring[stamp_at[:, None] + _STAMP_COLS]
        status, kinds = self.validator.check(t.addresses, stamps, ring, offsets, t.data_lengths)

        def record(i: int) -> tuple[bytes, bytes, bytes]:
            o, n = int(offsets[i]), int(t.data_lengths[i])
            return t.addresses[i].tobytes(), ring[o : o + n].tobytes(), stamps[i].tobytes()

        return self._verdict(status, kinds, record)

    def _frame(self, t: FrameTask) -> Verdict:
        where = f"snapshot frame {t.frame}"
        out = self.ring[t.dst : t.dst + t.dlen]
        try:
            reader = self._dctx.stream_reader(self.ring[t.src : t.src + t.clen].data)
            view = out.data
            got = 0
            while got < t.dlen:
                k = reader.readinto(view[got:])
                if not k:
                    break
                got += k
            extra = reader.read(1) if got == t.dlen else b""
        except self._zstd_error as exc:
            raise CorruptInput(f"{where}: cannot be decoded ({exc}): the file is corrupted") from None
        if got != t.dlen or extra:
            raise CorruptInput(f"{where}: decodes to {'more than ' if extra else ''}{got} bytes, its header says {t.dlen}")
        if zlib.crc32(out.data) != t.dcrc:
            raise CorruptInput(f"{where}: checksum mismatch after decoding: the file is corrupted")
        cols = frame_columns(out, t.records, where)
        status, kinds = self.validator.check(cols.addresses, cols.stamps, out, cols.offsets, cols.lengths)

        def record(i: int) -> tuple[bytes, bytes, bytes]:
            o, n = int(cols.offsets[i]), int(cols.lengths[i])
            return cols.addresses[i].tobytes(), out[o : o + n].tobytes(), cols.stamps[i].tobytes()

        return self._verdict(status, kinds, record)


def worker_main(conn: Any, handle: RingHandle, table: BatchTable, importer: int | None = None) -> None:
    """A worker process: map the ring, then answer tasks until told to stop (None), or until the
    ``importer`` process dies (a killed importer's pipe never ends here: see ``lifeline``)."""
    if importer is not None:
        exit_with(importer)
    _mapping, ring = attach(handle)  # unmapped when the process exits
    try:
        runner = TaskRunner(ring, table)
        conn.send(("ready", None))
        while True:
            task = conn.recv()
            if task is None:
                conn.send(("bye", peak_rss_bytes()))
                return
            try:
                conn.send(("ok", runner.run(task)))
            except TransferError as exc:
                conn.send(("refused", (type(exc).__name__, str(exc))))
            except Exception:
                conn.send(("crash", traceback.format_exc()))
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        return


def fork_is_safe() -> bool:
    """Can this process fork its workers: the platform forks, and no other thread runs here."""
    return "fork" in mp.get_all_start_methods() and threading.active_count() == 1


class Workers:
    """Worker processes fed in order: results come back in the order tasks were submitted."""

    def __init__(self, count: int, ring: SharedRing, table: BatchTable) -> None:
        self.count = count
        self._order: deque[int] = deque()  # worker of each outstanding task, oldest first
        self._load = [0] * max(1, count)
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._local: TaskRunner | None = None
        self._done: deque[tuple[str, Any]] = deque()
        self.peak_rss: list[int] = []  # of each worker, known once closed
        self.start_method = "in process"
        if count == 0:
            self._local = TaskRunner(ring.array, table)
            return
        forked = fork_is_safe()
        ctx = mp.get_context("fork") if forked else mp.get_context("spawn")
        self.start_method = ctx.get_start_method()
        try:
            for _ in range(count):
                parent, child = ctx.Pipe()
                handle = ring.inherited_handle() if forked else ring.handle_for_child()
                proc = ctx.Process(target=worker_main, args=(child, handle, table, os.getpid()), daemon=True)
                proc.start()
                child.close()
                self._procs.append(proc)
                self._conns.append(parent)
            # No waiting for them here: while they load their kernels, the importer fills the ring.
        except BaseException:
            self.close()
            raise

    @property
    def outstanding(self) -> int:
        return len(self._order) + len(self._done)

    def submit(self, task: TarTask | FrameTask) -> None:
        if self._local is not None:
            try:
                self._done.append(("ok", self._local.run(task)))
            except TransferError as exc:
                self._done.append(("refused", (type(exc).__name__, str(exc))))
            return
        w = min(range(self.count), key=self._load.__getitem__)
        self._conns[w].send(task)
        self._load[w] += 1
        self._order.append(w)

    def result(self) -> Verdict:
        """The verdict of the oldest outstanding task; raises what the task raised."""
        if self._local is not None:
            kind, payload = self._done.popleft()
        else:
            w = self._order.popleft()
            self._load[w] -= 1
            kind, payload = self._receive(w)
        if kind == "refused":
            name, message = payload
            raise CorruptInput(message) if name == "CorruptInput" else TransferError(message)
        assert isinstance(payload, Verdict)
        return payload

    def _receive(self, w: int) -> tuple[str, Any]:
        try:
            kind, payload = self._conns[w].recv()
            if kind == "ready":  # the first message: the worker mapped the ring and has its kernels
                kind, payload = self._conns[w].recv()
        except (EOFError, ConnectionResetError):
            proc = self._procs[w]
            proc.join(timeout=1)
            raise TransferError(f"validation worker {w} died (exit code {proc.exitcode})") from None
        if kind == "crash":
            raise TransferError(f"validation worker {w} failed:\n{payload}")
        return kind, payload

    def close(self) -> None:
        for conn in self._conns:
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
        for conn in self._conns:
            try:
                while conn.poll(5):
                    kind, payload = conn.recv()  # answers still in flight, then the farewell
                    if kind == "bye":
                        self.peak_rss.append(payload)
                        break
            except (EOFError, OSError):
                pass
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()  # our own child, by its handle
                proc.join(timeout=5)
        for conn in self._conns:
            conn.close()
        self._procs.clear()
        self._conns.clear()
        self._order.clear()
        self._done.clear()
