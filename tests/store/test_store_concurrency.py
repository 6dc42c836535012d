"""Readers in other processes (and threads) see consistent snapshots while a writer runs."""

from __future__ import annotations

import json
import subprocess
import threading

from chunkstore.reserve import ReserveStore
from tests.store.helpers import CONTESTED, FRESH, REPO_DIR, Stamper, child_command, open_store, random_cac


def test_reader_processes_see_consistent_snapshots(tmp_path):
    path = str(tmp_path / "s")
    with open_store(path, batches=[FRESH, CONTESTED]) as store:
        stamper = Stamper(FRESH)
        store.put_many([(d, stamper.stamp(a, position=0)) for a, d in (random_cac(100) for _ in range(50))])
    writer = subprocess.Popen(child_command(f"storehelpers.writer_child({path!r}, 3.0, 1)"), cwd=REPO_DIR)
    outs = [str(tmp_path / f"reader-{i}.json") for i in range(2)]
    readers = [subprocess.Popen(child_command(f"storehelpers.reader_child({path!r}, 2.5, {out!r})"), cwd=REPO_DIR) for out in outs]
    assert writer.wait(timeout=60) == 0
    for proc in readers:
        assert proc.wait(timeout=60) == 0
    for out in outs:
        result = json.load(open(out))
        assert result["errors"] == []
        assert result["checks"] > 50
    with ReserveStore(path, readonly=True) as store:
        assert store.chunk_count() > 50


def test_threads_read_while_writing(tmp_path):
    path = str(tmp_path / "s")
    with open_store(path, batches=[FRESH]) as store:
        stamper = Stamper(FRESH)
        first = [random_cac(4096) for _ in range(20)]
        store.put_many([(d, stamper.stamp(a)) for a, d in first])
        errors: list[str] = []
        stop = threading.Event()

        def reader() -> None:
            buf = bytearray(4104)
            while not stop.is_set():
                for a, d in first:
                    n = store.get_into(a, buf)
                    if bytes(buf[:n]) != d or store.get(a) != d:
                        errors.append(a.hex())

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            for _ in range(20):
                store.put_many([(d, stamper.stamp(a)) for a, d in (random_cac(50) for _ in range(10))])
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert errors == []
        assert store.chunk_count() == 220
