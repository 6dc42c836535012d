"""``chunkstore export``: write the reserve as the reference node's tar, or as a snapshot.

    chunkstore export --data-dir DIR [--format tar|snapshot] [--batches OUT.json] FILE|-

``tar`` is what ``bee db export reserve`` writes (chunkstore/transfer/tarformat.py):
one entry per (chunk, stamp), so the reserve can go back to a reference
node. ``snapshot`` (chunkstore/transfer/snapformat.py) packs the same records into
independent zstd frames, compressed by a few threads (zstd releases the
GIL) and written in order; ``chunkstore import`` decodes them in parallel.
``--batches`` also writes the store's batches as JSON, ready for ``import
--batches``.

Each shard is read in one read transaction, shard after shard: the export
is consistent per shard (the store offers no snapshot across shards), and
writers go on meanwhile.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import stat
import sys
import time
import zlib
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO

import zstandard

from chunkstore.store.layout import HEAD_SIZE
from chunkstore.store.mapped import read_in_order, release
from chunkstore.store.store import ChunkStore
from chunkstore.swarm.constants import ADDRESS_SIZE, STAMP_SIZE

from . import snapformat as snap
from . import tarformat as tarf
from .batchfile import dump_batches
from .errors import TransferError
from .holdlock import abandoned, hold
from .progress import bar

DEFAULT_FRAME = 1 << 20  # decoded bytes per snapshot frame
DEFAULT_LEVEL = 3
Record = tuple[bytes, bytes, bytes]  # (address, data, stamp)
Tick = Callable[[int], object]  # records written since the last call


@dataclass
class ExportReport:
    destination: str
    format: str
    records: int = 0
    chunks: int = 0
    bytes_written: int = 0
    frames: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        rate = self.records / self.seconds if self.seconds else 0.0
        extra = f", {self.frames} frames" if self.format == "snapshot" else ""
        return (
            f"exported {self.records} records ({self.chunks} chunks) to {self.destination} ({self.format}{extra}): "
            f"{self.bytes_written:,} bytes in {self.seconds:.1f}s ({rate:,.0f} records/s)"
        )


RELEASE_EVERY = 16384  # records read between giving back the mapped pages (chunkstore/store/mapped.py)


def iter_records(store: ChunkStore) -> Iterator[Record]:
    """Every (chunk, stamp) of the store: shard by shard, each in one read transaction, in address order."""
    for s in range(store.shard_count):
        shard = store.shard(s)
        data_file = os.path.join(shard.path, "data.mdb")
        with shard.env.begin(buffers=True) as txn, read_in_order(data_file):
            chunks = txn.cursor(db=shard.chunks)
            last = b""
            data = b""
            for n, (key, value) in enumerate(txn.cursor(db=shard.stamps).iternext()):
                if n % RELEASE_EVERY == RELEASE_EVERY - 1:
                    release(data_file)  # reading the whole store must not keep it all resident
                address = bytes(key[:ADDRESS_SIZE])
                if address != last:
                    last = address
                    head = chunks.get(address)
                    if head is None:
                        continue  # an index entry without its chunk: verify reports it; nothing to export
                    tail = txn.get(address, db=shard.tails) if len(head) == HEAD_SIZE else None
                    data = bytes(head) if tail is None else bytes(head) + bytes(tail)
                # stamp = batch id | index (in the key) | timestamp | signature (the value after the type byte)
                yield address, data, bytes(key[ADDRESS_SIZE:]) + bytes(value[1:])


class _Output:
    """Counts what goes through; big writes pass straight to the buffered file."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.count = 0

    def write(self, b: bytes | bytearray | memoryview) -> None:
        self.stream.write(b)
        self.count += len(b)


def write_tar(records: Iterator[Record], out: _Output, tick: Tick) -> tuple[int, int]:
    """The reference node's tar; returns (records, chunks)."""
    n = chunks = reported = 0
    last = b""
    buf = bytearray()
    for address, data, stamp in records:
        size = tarf.LENGTH_PREFIX + len(data) + STAMP_SIZE
        buf += tarf.encode_header(address.hex().encode(), size)
        buf += tarf.encode_record_prefix(len(data))
        buf += data
        buf += stamp
        buf += bytes(tarf.padding(size))
        n += 1
        if address != last:
            chunks += 1
            last = address
        if len(buf) >= 1 << 20:
            out.write(buf)
            buf.clear()
            tick(n - reported)
            reported = n
    buf += tarf.END_OF_ARCHIVE
    out.write(buf)
    return n, chunks


class _FrameBuilder:
    """Columns of the frame being filled: addresses, stamps, lengths, data."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._reset()

    def _reset(self) -> None:
        self.addresses = bytearray()
        self.stamps = bytearray()
        self.lengths = array("H")
        self.data = bytearray()

    def size_with(self, data_len: int) -> int:
        return snap.frame_size(len(self.lengths) + 1, len(self.data) + data_len)

    def add(self, address: bytes, data: bytes, stamp: bytes) -> None:
        self.addresses += address
        self.stamps += stamp
        self.lengths.append(len(data))
        self.data += data

    def take(self) -> tuple[int, bytes]:
        lengths = self.lengths
        if sys.byteorder != "little":  # pragma: no cover - the format stores them little-endian
            lengths = array("H", lengths)
            lengths.byteswap()
        decoded = b"".join((self.addresses, self.stamps, lengths.tobytes(), self.data))
        n = len(self.lengths)
        self._reset()
        return n, decoded


def _compress(level: int, decoded: bytes) -> tuple[bytes, int]:
    # One compressor per call: zstd contexts are not to be shared between threads.
    cctx = zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)
    return cctx.compress(decoded), zlib.crc32(decoded)


def write_snapshot(
    records: Iterator[Record], out: _Output, tick: Tick, *, frame_size: int, level: int, threads: int
) -> tuple[int, int, int]:
    """The snapshot format; returns (records, chunks, frames)."""
    limit = max(frame_size, snap.RECORD_FIXED + snap.MAX_DATA)
    out.write(snap.encode_file_header(limit))
    frames: list[snap.FrameInfo] = []
    inflight: deque[tuple[int, int, Future[tuple[bytes, int]]]] = deque()
    n = chunks = 0
    last = b""
    builder = _FrameBuilder(limit)

    def drain(keep: int) -> None:
        while len(inflight) > keep:
            records_in, dlen, fut = inflight.popleft()
            compressed, dcrc = fut.result()
            info = snap.FrameInfo(len(frames), records_in, len(compressed), dlen, dcrc, out.count)
            out.write(snap.encode_frame_header(info))
            out.write(compressed)
            frames.append(info)
            tick(records_in)

    with ThreadPoolExecutor(max_workers=threads) as pool:

        def ship() -> None:
            count, decoded = builder.take()
            inflight.append((count, len(decoded), pool.submit(_compress, level, decoded)))
            drain(2 * threads)  # bounded: at most this many frames wait in memory

        for address, data, stamp in records:
            if builder.lengths and builder.size_with(len(data)) > limit:
                ship()
            builder.add(address, data, stamp)
            n += 1
            if address != last:
                chunks += 1
                last = address
        if builder.lengths:
            ship()
        drain(0)
    out.write(snap.encode_index(frames, out.count))
    return n, chunks, len(frames)


def export_reserve(
    data_dir: str | os.PathLike[str],
    destination: str | os.PathLike[str] | BinaryIO,
    *,
    fmt: str = "tar",
    batches_out: str | None = None,
    frame_size: int = DEFAULT_FRAME,
    level: int = DEFAULT_LEVEL,
    threads: int | None = None,
    show_progress: bool | None = None,
) -> ExportReport:
    """Write every (chunk, stamp) of the store at ``data_dir`` to ``destination`` ("-": stdout)."""
    if fmt not in ("tar", "snapshot"):
        raise TransferError(f"unknown export format {fmt!r} (tar or snapshot)")
    t0 = time.perf_counter()
    with ChunkStore(data_dir, readonly=True) as store, _open_out(destination) as (stream, name):
        batches = dump_batches(store.batches.list()) if batches_out else ""
        report = ExportReport(name, fmt)
        out = _Output(stream)
        total = store.stats()["stamps"]
        with bar("exporting", total, show=show_progress) as pbar:
            tick = pbar.update
            records = iter_records(store)
            if fmt == "tar":
                report.records, report.chunks = write_tar(records, out, tick)
            else:
                workers = threads or min(4, max(1, os.cpu_count() or 1))
                report.records, report.chunks, report.frames = write_snapshot(
                    records, out, tick, frame_size=frame_size, level=level, threads=workers
                )
            pbar.update(report.records - pbar.n)
        stream.flush()
        report.bytes_written = out.count
        if batches_out:  # written last, as the export is: a failed export leaves neither behind
            with _open_out(batches_out) as (f, _):
                f.write(batches.encode("utf-8"))
    report.seconds = time.perf_counter() - t0
    return report


@contextlib.contextmanager
def _named_full(path: str) -> Iterator[None]:
    """A destination that runs out of room is named (the bare OSError named no file)."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise TransferError(f"cannot export to {path}: {exc.strerror}; nothing was exported") from exc


@contextlib.contextmanager
def _open_out(destination: str | os.PathLike[str] | BinaryIO) -> Iterator[tuple[BinaryIO, str]]:
    if isinstance(destination, str | os.PathLike) and os.fspath(destination) == "-":
        stream = open(sys.stdout.fileno(), "wb", buffering=1 << 20, closefd=False)  # noqa: SIM115
        with stream:
            yield stream, "stdout"
        return
    if isinstance(destination, str | os.PathLike):
        # A link is followed, so its target is written and the link stays. What exists and is not a
        # regular file (a FIFO, a device, a socket) is written to as it is: renaming a finished file onto
        # it would replace it (an operator sweep's export to /dev/full replaced the device).
        path = os.path.realpath(destination)
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            raise TransferError(f"cannot export to {path}: it is a directory")
        if mode is not None and not stat.S_ISREG(mode):
            with _named_full(path), open(path, "wb", buffering=1 << 20) as stream:
                yield stream, path
            return
        for stale in glob.glob(glob.escape(path) + ".partial-*"):
            if abandoned(stale):  # left by an export that was killed
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(stale)
        tmp = f"{path}.partial-{os.getpid()}"
        try:
            try:
                out = open(tmp, "wb", buffering=1 << 20)  # noqa: SIM115 - closed by the with below
            except OSError as exc:  # named by the destination the operator gave, not the partial file
                raise TransferError(f"cannot export to {path}: {exc.strerror}") from None
            with _named_full(path), out as stream:
                hold(stream.fileno())
                yield stream, path
            os.replace(tmp, path)  # a failed export leaves no file that looks complete
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        return
    yield destination, getattr(destination, "name", "stream")
