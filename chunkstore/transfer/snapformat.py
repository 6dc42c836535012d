"""The snapshot format: a reserve as independent zstd frames, fast to write and to read in parallel.

Layout (all integers big-endian unless said otherwise)::

    file header (32)   magic(8) | version u32 | flags u32 | frame limit u32 | reserved(8) | crc32 of the 28 before
    frame ...          frame header (32) | zstd frame (clen bytes)
    index              "INDX" | frames u32 | records u64 | per frame: offset u64, clen u32, dlen u32,
                       records u32, crc u32 | crc32 of everything from "INDX"
    trailer (16)       index offset u64 | index length u32 | "SEND"

    frame header       "FRME" | frame number u32 | records u32 | clen u32 | dlen u32 | crc32 of the
                       decoded frame u32 | reserved u32 | crc32 of the 28 before

A decoded frame of n records is columnar (compresses and parses better than
records one after the other): ``addresses n*32 | stamps n*113 | lengths n*u16
(little-endian) | data`` with the chunks' data back to back, so dlen = 147n +
sum(lengths). Each zstd frame carries its content size and zstd's own content
checksum (xxhash64); the crc32 in the frame header is ours, over the decoded
bytes, and every header has a crc of itself.

The index comes last so a snapshot can be written to a pipe; a reader from a
pipe checks it against the frames it saw, which is also how a file cut at a
frame boundary is told from a whole one. No frame decodes to more than the
header's frame limit, so a reader sizes its buffers before the first frame.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np

from chunkstore.swarm.constants import ADDRESS_SIZE, MAX_SOC_SIZE, STAMP_SIZE

from .errors import CorruptInput

MAGIC = b"\x89SNP\r\n\x1a\n"  # high bit, CRLF and ^Z catch text-mode and 7-bit mangling, as in PNG
VERSION = 1
FRAME_TAG = b"FRME"
INDEX_TAG = b"INDX"
END_TAG = b"SEND"
ADDRESS = ADDRESS_SIZE
RECORD_FIXED = ADDRESS + STAMP_SIZE + 2  # per record: address, stamp, u16 length
MAX_DATA = MAX_SOC_SIZE  # a SOC around a full CAC, the longest chunk data

_FILE = struct.Struct(">8sIII8sI")  # magic, version, flags, frame limit, reserved, crc
_FRAME = struct.Struct(">4sIIIIIII")  # tag, frame, records, clen, dlen, dcrc, reserved, crc
_INDEX_HEAD = struct.Struct(">4sIQ")
_INDEX_ENTRY = struct.Struct(">QIIII")
_TRAILER = struct.Struct(">QI4s")
FILE_HEADER_SIZE = _FILE.size
FRAME_HEADER_SIZE = _FRAME.size
TRAILER_SIZE = _TRAILER.size
INDEX_ENTRY_SIZE = _INDEX_ENTRY.size
INDEX_HEAD_SIZE = _INDEX_HEAD.size


def compress_bound(n: int) -> int:
    """The most bytes zstd can turn ``n`` bytes into (ZSTD_COMPRESSBOUND), plus our frame header."""
    return n + (n >> 8) + ((128 << 10) - n >> 11 if n < 128 << 10 else 0) + 64


def encode_file_header(frame_limit: int) -> bytes:
    head = _FILE.pack(MAGIC, VERSION, 0, frame_limit, bytes(8), 0)[:-4]
    return head + zlib.crc32(head).to_bytes(4, "big")


def decode_file_header(raw: bytes) -> int:
    """The frame limit of a snapshot whose first 32 bytes are ``raw``."""
    if len(raw) < FILE_HEADER_SIZE:
        raise CorruptInput(f"snapshot truncated in its file header ({len(raw)} of {FILE_HEADER_SIZE} bytes)")
    magic, version, flags, limit, _, crc = _FILE.unpack(raw[:FILE_HEADER_SIZE])
    if magic != MAGIC:
        raise CorruptInput("not a snapshot (bad magic)")
    if zlib.crc32(raw[: FILE_HEADER_SIZE - 4]) != crc:
        raise CorruptInput("snapshot file header is corrupted (checksum mismatch)")
    if version != VERSION:
        raise CorruptInput(f"snapshot format version {version} is not supported; this build reads version {VERSION}")
    if flags:
        raise CorruptInput(f"snapshot uses flags {flags:#x} this build does not know")
    if not RECORD_FIXED + MAX_DATA <= limit <= 1 << 30:
        raise CorruptInput(f"snapshot frame limit {limit} is out of range")
    return int(limit)


@dataclass(frozen=True)
class FrameInfo:
    number: int
    records: int
    clen: int
    dlen: int
    dcrc: int
    offset: int = 0  # of the frame header in the file


def encode_frame_header(f: FrameInfo) -> bytes:
    head = _FRAME.pack(FRAME_TAG, f.number, f.records, f.clen, f.dlen, f.dcrc, 0, 0)[:-4]
    return head + zlib.crc32(head).to_bytes(4, "big")


def decode_frame_header(raw: bytes | bytearray, offset: int, expected: int, limit: int) -> FrameInfo:
    """Check a frame header read at ``offset``; ``expected`` is the frame number it must carry."""
    tag, number, records, clen, dlen, dcrc, _, crc = _FRAME.unpack(raw)
    where = f"snapshot frame {expected} (at byte {offset})"
    if zlib.crc32(raw[: FRAME_HEADER_SIZE - 4]) != crc:
        raise CorruptInput(f"{where}: frame header is corrupted (checksum mismatch)")
    if number != expected:
        raise CorruptInput(f"{where}: header says frame {number}: frames are missing or out of order")
    if not 0 < dlen <= limit or dlen < records * RECORD_FIXED or records == 0:
        raise CorruptInput(f"{where}: {records} records in {dlen} decoded bytes do not fit the limit {limit}")
    if not 0 < clen <= compress_bound(limit):
        raise CorruptInput(f"{where}: compressed size {clen} is out of range")
    return FrameInfo(number, records, clen, dlen, dcrc, offset)


def encode_index(frames: list[FrameInfo], index_offset: int) -> bytes:
    records = sum(f.records for f in frames)
    parts = [_INDEX_HEAD.pack(INDEX_TAG, len(frames), records)]
    parts += [_INDEX_ENTRY.pack(f.offset, f.clen, f.dlen, f.records, f.dcrc) for f in frames]
    body = b"".join(parts)
    body += zlib.crc32(body).to_bytes(4, "big")
    return body + _TRAILER.pack(index_offset, len(body), END_TAG)


def index_size(frames: int) -> int:
    """Bytes from the index tag to the end of the file."""
    return INDEX_HEAD_SIZE + frames * INDEX_ENTRY_SIZE + 4 + TRAILER_SIZE


def check_index(raw: bytes, index_offset: int, seen: list[FrameInfo]) -> int:
    """Check the index and trailer (``raw``, from the tag to the end) against the frames read; total records."""
    tag, count, records = _INDEX_HEAD.unpack_from(raw)
    where = f"snapshot index (at byte {index_offset})"
    if tag != INDEX_TAG:
        raise CorruptInput(f"{where}: bad tag")
    if count != len(seen):
        raise CorruptInput(f"{where}: lists {count} frames, the file holds {len(seen)}: frames are missing")
    if len(raw) != index_size(count):
        raise CorruptInput(f"{where}: truncated ({len(raw)} of {index_size(count)} bytes)")
    body_len = INDEX_HEAD_SIZE + count * INDEX_ENTRY_SIZE
    if zlib.crc32(raw[:body_len]) != int.from_bytes(raw[body_len : body_len + 4], "big"):
        raise CorruptInput(f"{where}: index is corrupted (checksum mismatch)")
    for i, f in enumerate(seen):
        entry = _INDEX_ENTRY.unpack_from(raw, INDEX_HEAD_SIZE + i * INDEX_ENTRY_SIZE)
        if entry != (f.offset, f.clen, f.dlen, f.records, f.dcrc):
            raise CorruptInput(f"{where}: entry of frame {i} disagrees with the frame header")
    if records != sum(f.records for f in seen):
        raise CorruptInput(f"{where}: record count {records} disagrees with the frames")
    t_offset, t_len, end = _TRAILER.unpack_from(raw, body_len + 4)
    if end != END_TAG or t_offset != index_offset or t_len != body_len + 4:
        raise CorruptInput(f"{where}: trailer is corrupted")
    return int(records)


# The decoded frame: columns, as numpy views of one buffer.


@dataclass(frozen=True)
class FrameColumns:
    addresses: np.ndarray  # uint8 (n, 32)
    stamps: np.ndarray  # uint8 (n, 113)
    lengths: np.ndarray  # int64 (n,)
    offsets: np.ndarray  # int64 (n,): where each chunk's data starts in ``buf``
    data_start: int
    data_end: int


def frame_columns(buf: np.ndarray, records: int, where: str) -> FrameColumns:
    """Parse a decoded frame (``buf``: uint8, exactly dlen bytes); ``CorruptInput`` if the layout does not add up."""
    n = records
    a_end = n * ADDRESS
    s_end = a_end + n * STAMP_SIZE
    l_end = s_end + 2 * n
    if len(buf) < l_end:
        raise CorruptInput(f"{where}: decoded frame too short for {n} records")
    lengths = buf[s_end:l_end].view("<u2").astype(np.int64)
    total = int(lengths.sum())
    if l_end + total != len(buf):
        raise CorruptInput(f"{where}: record lengths add up to {total} bytes, the frame holds {len(buf) - l_end}")
    if n and int(lengths.max()) > MAX_DATA:
        raise CorruptInput(f"{where}: a record is longer than any chunk")
    offsets = np.empty(n, np.int64)
    if n:
        offsets[0] = l_end
        np.cumsum(lengths[:-1], out=offsets[1:])
        offsets[1:] += l_end
    return FrameColumns(
        addresses=buf[:a_end].reshape(n, ADDRESS),
        stamps=buf[a_end:s_end].reshape(n, STAMP_SIZE),
        lengths=lengths,
        offsets=offsets,
        data_start=l_end,
        data_end=l_end + total,
    )


def frame_size(records: int, data_bytes: int) -> int:
    return records * RECORD_FIXED + data_bytes
