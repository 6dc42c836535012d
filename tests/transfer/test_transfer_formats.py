"""The file formats of reserve import/export, piece by piece: tar reading and writing, snapshot headers,
the ring allocator."""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest

from chunkstore.transfer import snapformat as snap
from chunkstore.transfer import tarformat as tarf
from chunkstore.transfer.bufferpool import SharedRing
from chunkstore.transfer.errors import CorruptInput


def _tar(members: list[tuple[str, bytes]], fmt: int = tarfile.USTAR_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name, body in members:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


def _read_all(raw: bytes) -> tuple[list[tuple[str, bytes]], tarf.TarReader]:
    reader = tarf.TarReader(io.BytesIO(raw))
    out = []
    while (e := reader.next_entry()) is not None:
        name, size = e
        buf = bytearray(size + tarf.padding(size))
        reader.read_padded(memoryview(buf))
        out.append((name, bytes(buf[:size])))
    return out, reader


def test_header_is_read_by_tarfile():
    body = b"x" * 1000
    raw = tarf.encode_header(b"ab" * 32, len(body)) + body + bytes(tarf.padding(len(body))) + tarf.END_OF_ARCHIVE
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        (member,) = tar.getmembers()
        assert (member.name, member.size, member.mode, member.mtime) == ("ab" * 32, 1000, 0o600, 0)
        assert tar.extractfile(member).read() == body


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT, tarfile.GNU_FORMAT])
def test_reader_takes_what_tar_writers_produce(fmt):
    members = [("a" * 64, b"one"), ("b" * 64, b""), ("dir/" + "c" * 150, b"long name" * 100)]
    if fmt == tarfile.USTAR_FORMAT:
        members = members[:2] + [("dir/" + "c" * 90, b"prefix field" * 100)]
    got, reader = _read_all(_tar(members, fmt))
    assert got == members
    assert reader.end_marker and reader.entries == 3


def test_reference_node_file_without_end_marker():
    raw = _tar([("a" * 64, b"12345")])
    cut = 512 + 5  # the reference node stops right after the last entry's data
    got, reader = _read_all(raw[:cut])
    assert got == [("a" * 64, b"12345")]
    assert not reader.end_marker


@pytest.mark.parametrize("cut, message", [(100, "inside a header"), (512 + 2, "truncated")])
def test_truncated_tar(cut, message):
    raw = _tar([("a" * 64, b"12345")])
    with pytest.raises(CorruptInput, match=message):
        _read_all(raw[:cut])


def test_damaged_header_is_named():
    raw = bytearray(_tar([("a" * 64, b"12345"), ("b" * 64, b"678")]))
    raw[1024 + 10] ^= 0xFF  # the second entry's name
    with pytest.raises(CorruptInput, match=r"tar entry 1 .*checksum mismatch"):
        _read_all(bytes(raw))


def test_snapshot_headers_round_trip_and_refuse_damage():
    head = snap.encode_file_header(1 << 20)
    assert snap.decode_file_header(head) == 1 << 20
    bad = bytearray(head)
    bad[14] ^= 1
    with pytest.raises(CorruptInput, match="file header is corrupted"):
        snap.decode_file_header(bytes(bad))
    with pytest.raises(CorruptInput, match="not a snapshot"):
        snap.decode_file_header(b"x" * 32)
    info = snap.FrameInfo(3, 10, 500, 5000, 1234, 77)
    raw = snap.encode_frame_header(info)
    assert snap.decode_frame_header(raw, 77, 3, 1 << 20) == info
    with pytest.raises(CorruptInput, match="frame 4 .*header says frame 3"):
        snap.decode_frame_header(raw, 77, 4, 1 << 20)
    damaged = bytearray(raw)
    damaged[9] ^= 4
    with pytest.raises(CorruptInput, match="frame 3 .*corrupted"):
        snap.decode_frame_header(bytes(damaged), 77, 3, 1 << 20)


def test_snapshot_index_check():
    frames = [snap.FrameInfo(0, 5, 100, 900, 1, 32), snap.FrameInfo(1, 7, 120, 1200, 2, 164)]
    raw = snap.encode_index(frames, 316)
    assert snap.check_index(raw, 316, frames) == 12
    with pytest.raises(CorruptInput, match="frames are missing"):
        snap.check_index(raw, 316, frames[:1])
    with pytest.raises(CorruptInput, match="truncated"):
        snap.check_index(raw[:-3], 316, frames)


def test_frame_columns_check_the_layout():
    n, lengths = 2, [10, 20]
    buf = np.zeros(n * snap.RECORD_FIXED + sum(lengths), np.uint8)
    buf[n * 145 : n * 147] = np.frombuffer(np.array(lengths, "<u2").tobytes(), np.uint8)
    cols = snap.frame_columns(buf, n, "frame 0")
    assert cols.lengths.tolist() == lengths and cols.offsets.tolist() == [n * 147, n * 147 + 10]
    with pytest.raises(CorruptInput, match="add up"):
        snap.frame_columns(buf[:-1], n, "frame 0")


def test_ring_hands_out_exact_ranges_oldest_first():
    ring = SharedRing(100)
    try:
        assert ring.alloc(40) == 0
        assert ring.alloc(40) == 40
        assert ring.alloc(30) is None  # 20 left at the end, nothing free at the start yet
        ring.release()  # [0, 40) free
        assert ring.alloc(30) == 0  # wraps
        assert ring.alloc(15) is None  # only [30, 40) is free between the newest and the oldest
        assert ring.alloc(10) == 30
        ring.release(3)
        assert ring.in_use == 0
        assert ring.alloc(100) == 0
        assert ring.alloc(101) is None
        ring.view[5:8] = b"abc"
        assert ring.array[5:8].tobytes() == b"abc"
    finally:
        ring.close()


def _pax_sized(size: str) -> bytes:
    """One PAX entry of five bytes whose extended header says ``size=<size>``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("a" * 64)
        info.size = 5
        info.pax_headers = {"size": size}
        tar.addfile(info, io.BytesIO(b"12345"))
    return buf.getvalue()


@pytest.mark.parametrize("size", ["5", "005", "+5"])
def test_pax_size_is_read_as_go_reads_it(size):
    got, _ = _read_all(_pax_sized(size))
    assert got == [("a" * 64, b"12345")]


@pytest.mark.parametrize("size", ["0_5", "-5", " 5", "5 ", "٥", "9" * 5000])
def test_pax_size_go_refuses_is_corrupt_input(size):
    """``int()`` took ``0_5`` and Unicode digits, and raised an unexpected ValueError past 4,300 digits."""
    with pytest.raises(CorruptInput, match="PAX size .* not a decimal number"):
        _read_all(_pax_sized(size))
