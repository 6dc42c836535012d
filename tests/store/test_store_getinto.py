"""get_into: all-or-nothing on a short buffer, and no per-call allocation after warm-up."""

from __future__ import annotations

import tracemalloc

import pytest

from chunkstore.store.errors import BufferTooSmall
from tests.store.helpers import Stamper, make_batch, open_store, random_cac, random_soc


@pytest.fixture
def filled(tmp_path):
    batch = make_batch(1)
    store = open_store(str(tmp_path / "s"), batches=[batch])
    stamper = Stamper(batch)
    chunks = [random_cac(4096), random_cac(100), random_soc(4096), random_cac(4072)]
    store.put_many([(d, stamper.stamp(a)) for a, d in chunks])
    yield store, chunks
    store.close()


def test_too_small_buffer_writes_nothing(filled):
    store, chunks = filled
    for addr, data in chunks:
        for short in (0, 1, len(data) // 2, 4080, len(data) - 1):
            if short >= len(data):
                continue
            buf = bytearray(b"\xaa" * short)
            with pytest.raises(BufferTooSmall) as info:
                store.get_into(addr, buf)
            assert buf == bytearray(b"\xaa" * short)
            assert (info.value.needed, info.value.got) == (len(data), short)
            assert addr.hex() in str(info.value)
            view = memoryview(bytearray(b"\x55" * (short + 10)))[5 : 5 + short]
            with pytest.raises(BufferTooSmall):
                store.get_into(addr, view)
            assert bytes(view.obj) == b"\x55" * (short + 10)
        exact = bytearray(len(data))
        assert store.get_into(addr, exact) == len(data) and bytes(exact) == data


def _measure(fn, calls: int) -> tuple[float, int]:
    """(net bytes left allocated per call, peak transient bytes) over ``calls`` calls."""
    for _ in range(200):
        fn()  # warm-up: spare transactions, caches
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        for _ in range(calls):
            fn()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (current - base) / calls, peak - base


def test_get_into_allocates_nothing_per_call(filled):
    store, chunks = filled
    addr, data = chunks[0]
    buf = bytearray(4104)
    view = memoryview(buf)
    net, peak = _measure(lambda: store.get_into(addr, view), 5000)
    base_net, base_peak = _measure(lambda: store.get(addr), 5000)
    # Nothing stays allocated, and what is allocated transiently (the read
    # transaction's small objects) is far below one copy of the chunk, which
    # is what get itself must allocate.
    assert net < 1.0, net
    assert peak < 2048, peak
    assert base_peak >= len(data)
    net_ba, peak_ba = _measure(lambda: store.get_into(addr, buf), 5000)
    print(f"get_into: net {net}, peak {peak}; bytearray: {net_ba}, {peak_ba}; get: {base_net}, {base_peak}")
    assert net_ba < 1.0 and peak_ba < 2048, (net_ba, peak_ba)


def test_buffer_capacity_is_counted_in_bytes(filled):
    """A uint32 or a 2-D numpy array holds more bytes than items: its bytes are what count."""
    np = pytest.importorskip("numpy")
    store, chunks = filled
    for addr, data in chunks:
        for buf in (np.zeros(1200, np.uint32), np.zeros((2, 2200), np.uint8), np.zeros((1200, 1), np.int32)):
            assert buf.nbytes >= len(data)
            assert store.get_into(addr, buf) == len(data)
            assert buf.tobytes()[: len(data)] == data
        with pytest.raises(BufferTooSmall) as info:
            store.get_into(addr, np.zeros(len(data) // 4 - 1, np.uint32))
        assert info.value.got == (len(data) // 4 - 1) * 4


@pytest.mark.parametrize("make", [lambda n: bytes(n), lambda n: memoryview(bytes(n)), "numpy-readonly"])
def test_read_only_buffer_is_refused_before_any_read(filled, make):
    store, chunks = filled
    if make == "numpy-readonly":
        np = pytest.importorskip("numpy")

        def make(n):
            a = np.zeros(n, np.uint8)
            a.flags.writeable = False
            return a

    for address in (chunks[0][0], b"\x01" * 32):  # held, and absent: the buffer is checked first
        with pytest.raises(TypeError, match="writable buffer"):
            store.get_into(address, make(5000))


def test_strided_multibyte_buffer_is_refused(filled):
    np = pytest.importorskip("numpy")
    store, chunks = filled
    buf = np.zeros((3000, 2), np.uint16)[:, 0]  # one-dimensional but neither bytes nor contiguous
    with pytest.raises(TypeError, match="contiguous"):
        store.get_into(chunks[0][0], buf)
    assert not buf.any()
