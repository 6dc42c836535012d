"""``UploadSession``: the one path every chunk of a node-stamped upload takes into the store.

An upload (``POST /bytes``, ``/bzz``, a feed update, ...) hands each chunk
it makes to ``session.put(address, data)`` (a ``Splitter`` sink), then calls
``session.finish(reference)`` with the reference it will answer. The session
stamps chunks with the node's batch (``NodeStamper``), stores them in
groups (one ``put_many``, one synced commit per shard touched), counts them,
and tells its observers: the place where tags (counters per upload) and pins
(the chunk addresses to keep) hook in.

**What a failed upload leaves.** Chunks reach the store in the order they
were made (children before parents), one group at a time, each group
durable before the next is stamped. The root chunk of the answered
reference, with its dispersed replicas, is held back to the end: ``finish``
commits every other chunk first, then the root group. So:

- a reference is handed out only after its whole tree is durable;
- an upload that fails or is interrupted (bad body, full bucket, full disk,
  client gone, process killed) never stores the root of the reference it
  would have answered, so that reference does not resolve. Whole subtrees
  of it may be stored: valid, stamped chunks that nothing points to, taking
  batch slots, evicted like any other chunk.

The newest ``TAIL`` chunks always wait in memory (a root is followed only by
its replicas, at most 16). Groups are stamped and stored by the session's
writer thread while the caller goes on splitting (signing and LMDB commits
release the GIL, so the two overlap on two cores); at most ``IN_FLIGHT``
groups are handed over at a time, in order, one after the other. Memory is
bounded by ``group_size * (1 + IN_FLIGHT) + TAIL`` chunks whatever the
upload's size. The same chunk offered again while still waiting is stored
once (a SOC offered again replaces the waiting data).

Not thread-safe: one thread (the upload's worker) feeds a session; the
observers are called from the writer thread, group by group in order.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from chunkstore.store.errors import StampConflict
from chunkstore.store.store import ChunkStore, PutResult
from chunkstore.swarm.constants import ADDRESS_SIZE, REPLICAS_OWNER
from chunkstore.swarm.file.replicas import replica_ids
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.redundancy.level import Level

from .errors import SessionClosed
from .options import UploadOptions
from .stamper import NodeStamper
from .tracking import track_upload

_T = TypeVar("_T")

GROUP_SIZE = 512  # chunks per write: a commit per shard per group (2 MiB of leaves)
TAIL = 32  # chunks always kept back: the root and up to 16 replicas come last
IN_FLIGHT = 2  # groups handed to the writer thread and not yet durable
RESTAMPS = 3  # a group stamped again after losing a slot race to another upload of the same chunk


@dataclass
class UploadCounts:
    """What a session did: chunks offered, put (stamped and written) and new to the store."""

    offered: int = 0
    put: int = 0
    stored: int = 0  # not in the store under this stamp before (PutResult.stored)
    repeated: int = 0  # offered again while still waiting: stored once
    groups: int = 0


class UploadObserver(Protocol):
    """Told what a session stores; tags and pins implement it (issue 13)."""

    def stored(self, session: UploadSession, addresses: Sequence[bytes], results: Sequence[PutResult]) -> None:
        """A group of chunks is durable: their addresses and the store's results, in order."""

    def finished(self, session: UploadSession, reference: bytes) -> None:
        """The upload is complete; ``reference`` is what the client gets."""

    def aborted(self, session: UploadSession, error: BaseException | None) -> None:
        """The upload failed or was abandoned; nothing more will be stored."""


def root_group(reference: bytes) -> set[bytes]:
    """The root chunk of ``reference`` and every address its replicas can have (any level)."""
    root = bytes(reference[:ADDRESS_SIZE])
    held = {root}
    for level in (Level.MEDIUM, Level.STRONG, Level.INSANE, Level.PARANOID):
        held.update(keccak256(soc_id, REPLICAS_OWNER) for soc_id in replica_ids(root, level))
    return held


@dataclass
class UploadSession:
    """Stamp, store in groups, count, report; see the module docstring for the guarantees."""

    store: ChunkStore
    stamper: NodeStamper
    batch_id: bytes
    options: UploadOptions = field(default_factory=UploadOptions)
    group_size: int = GROUP_SIZE
    observers: list[UploadObserver] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.group_size < 1:
            raise ValueError("group_size must be at least 1")
        # Refuse an unusable batch before the first byte of the body is read.
        self.batch = self.stamper.batch(self.batch_id)
        self.batch_id = self.batch.id
        # Tags and pins (tracking.py): checked and begun before the first chunk, told first of every group.
        self.tracker = track_upload(self.store, self.options)
        self.observers = [self.tracker, *self.observers]
        self.counts = UploadCounts()
        self.reference: bytes | None = None
        self._pending: OrderedDict[bytes, bytes] = OrderedDict()
        self._closed = False
        self._writer: ThreadPoolExecutor | None = None
        self._in_flight: deque[Future[None]] = deque()

    # ------------------------------------------------------------ input

    def put(self, address: bytes, data: bytes) -> None:
        """Take one chunk of the upload (a ``Splitter`` sink); stores a group when enough are waiting."""
        if self._closed:
            raise SessionClosed("chunk offered to a finished or aborted upload session")
        self.counts.offered += 1
        address = bytes(address)
        if address in self._pending:
            self.counts.repeated += 1
        self._pending[address] = bytes(data)
        if len(self._pending) > self.group_size + TAIL:
            self._guarded(self._flush_oldest, self.group_size)

    __call__ = put

    def finish(self, reference: bytes) -> UploadCounts:
        """Store what is waiting, the root group of ``reference`` last; the upload is durable on return."""
        if self._closed:
            raise SessionClosed("upload session finished twice or after an abort")
        held = root_group(reference)
        last = [(a, d) for a, d in self._pending.items() if a in held]
        for address, _ in last:
            del self._pending[address]
        self._guarded(self._flush_oldest, len(self._pending))
        self._guarded(self._drain, None)
        self._guarded(self._write, last)  # only now, with every other chunk durable
        self._stop_writer()
        self._closed = True
        self.reference = bytes(reference)
        for observer in self.observers:
            observer.finished(self, self.reference)
        return self.counts

    def __enter__(self) -> UploadSession:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        """Leaving the block aborts the session unless it was finished: with the error that ended the
        block, or with none when the block ended without ``finish`` (nothing of it is then stored)."""
        self.abort(exc)

    def abort(self, error: BaseException | None = None) -> None:
        """Drop what is waiting (nothing of it is stored); observers hear of it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._pending.clear()
        for fut in self._in_flight:  # let what was handed over finish (or fail) before reporting
            fut.cancel()
            try:
                fut.result()
            except BaseException:  # noqa: S110 - the upload failed already; the first error is the one raised
                pass
        self._in_flight.clear()
        self._stop_writer()
        for observer in self.observers:
            observer.aborted(self, error)

    # ------------------------------------------------------------ storing

    def _guarded(self, step: Callable[[_T], None], arg: _T) -> None:
        try:
            step(arg)
        except BaseException as exc:
            self.abort(exc)
            raise

    def _flush_oldest(self, count: int) -> None:
        while count > 0 and self._pending:
            n = min(count, self.group_size, len(self._pending))
            group = [self._pending.popitem(last=False) for _ in range(n)]
            self._submit(group)
            count -= n

    def _submit(self, group: list[tuple[bytes, bytes]]) -> None:
        """Hand a group to the writer thread, first waiting for the oldest if ``IN_FLIGHT`` are pending."""
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="upload-writer")
        while len(self._in_flight) >= IN_FLIGHT:
            self._in_flight.popleft().result()  # a failed write surfaces here, in order
        self._in_flight.append(self._writer.submit(self._write, group))

    def _drain(self, _: None) -> None:
        while self._in_flight:
            self._in_flight.popleft().result()

    def _stop_writer(self) -> None:
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None

    def _stamp_and_put(self, items: list[tuple[bytes, bytes]], addresses: list[bytes]) -> list[PutResult]:
        """Stamp the group and store it. A chunk this node's batch already holds is stamped again in its
        slot; when another upload of the same chunk commits a newer stamp of that slot between our
        stamping and our commit, the slot rule refuses ours (``StampConflict``, nothing of the group
        stored). The chunk is there under our batch all the same: stamp the group again (now newer)
        and store it."""
        ours = set(addresses)
        lost = 0
        while True:
            stamps = self.stamper.stamp(self.batch_id, addresses)
            try:
                return self.store.put_signed(
                    [(a, d, s) for (a, d), s in zip(items, stamps, strict=True)], holds=self.tracker.holds
                )
            except StampConflict as exc:
                lost += 1
                if exc.batch_id != self.batch_id or exc.holder not in ours or lost > RESTAMPS:
                    raise

    def _write(self, group: Iterable[tuple[bytes, bytes]]) -> None:
        items = list(group)
        if not items:
            return
        addresses = [a for a, _ in items]
        results = self._stamp_and_put(items, addresses)
        self.counts.put += len(results)
        self.counts.stored += sum(1 for r in results if r.stored)
        self.counts.groups += 1
        for observer in self.observers:
            observer.stored(self, addresses, results)
