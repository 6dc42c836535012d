"""The collector paused while publishing, and restored as it was: nested, across threads, after a failure."""

from __future__ import annotations

import gc
import threading

import pytest

from chunkstore.store.verify import verify_store
from chunkstore.transfer import bulkload
from chunkstore.transfer.gcpause import collection_paused
from chunkstore.transfer.importer import import_reserve
from tests.store.helpers import Stamper, make_batch, random_cac
from tests.transfer.helpers import entry, in_process_budget, write_tar


@pytest.fixture
def collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_pause_restores_an_enabled_collector_after_nesting_and_failure(collector_enabled):
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still runs
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collection_paused():
        raise RuntimeError("publishing failed")
    assert gc.isenabled()


def test_pause_leaves_a_collector_the_caller_disabled_disabled(collector_enabled):
    gc.disable()
    with collection_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_pauses_in_two_threads_enable_once_both_ended(collector_enabled):
    """Thread A pauses, B pauses, A ends first: B still runs paused; the collector returns after B."""
    a_in, b_in, a_out, b_may_end = threading.Event(), threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def a() -> None:
        with collection_paused():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b() -> None:
        a_in.wait(5)
        with collection_paused():
            b_in.set()
            b_may_end.wait(5)
            seen["b after a ended"] = gc.isenabled()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    assert a_out.wait(5)
    seen["between"] = gc.isenabled()
    b_may_end.set()
    for t in threads:
        t.join(5)
    assert seen == {"b after a ended": False, "between": False}
    assert gc.isenabled()


B1 = make_batch(1)


def _import(tmp_path, name: str, n: int):
    """Import ``n`` fresh CACs of B1 (in process) into the store ``tmp_path/name``; its report."""
    stamper = Stamper(B1)
    records = [entry(a, d, stamper.stamp(a)) for a, d in (random_cac(200 + i % 200) for i in range(n))]
    src = str(tmp_path / f"{name}.tar")
    write_tar(src, records)
    return import_reserve(
        str(tmp_path / name), src, batches=[B1], workers=0, memory_budget=in_process_budget(), show_progress=False
    )


def test_publishing_runs_with_the_collector_paused_and_restores_it(tmp_path, monkeypatch, collector_enabled):
    """Every put of a real import runs without cyclic collections; the collector is back on afterwards."""
    during: list[bool] = []
    real = bulkload._ShardAppender.add_rows

    def spy(self, *args):
        during.append(gc.isenabled())
        return real(self, *args)

    monkeypatch.setattr(bulkload._ShardAppender, "add_rows", spy)
    report = _import(tmp_path, "store", 64)
    assert report.load.written == 64
    assert during and not any(during)
    assert gc.isenabled()
    assert verify_store(str(tmp_path / "store")).ok


def test_an_import_leaves_no_cyclic_garbage_that_grows_with_its_records(tmp_path, collector_enabled):
    """What pausing relies on: publishing's objects are freed by reference counting, not left in cycles.

    After a first import (which loads kernels and leaves their one-time
    garbage), imports of 100 and of 1,000 records run with the collector
    off; a collection afterwards finds no more unreachable objects in the
    larger one.
    """

    def unreachable_after_import(n: int) -> int:
        gc.collect()
        gc.disable()
        try:
            _import(tmp_path, f"store{n}", n)
            return gc.collect()
        finally:
            gc.enable()

    unreachable_after_import(20)
    small, large = unreachable_after_import(100), unreachable_after_import(1000)
    # A cycle per record would leave 900 more; the margin absorbs other threads of a test run allocating meanwhile.
    assert large <= small + 200, (small, large)
