"""``chunkstore sample`` (api.cli.sample_main) on a small store."""

from __future__ import annotations

import json

import pytest

from api.cli import sample_main as main
from chunkstore.reserve import ReserveStore
from sampler import make_inclusion_proofs, reserve_sample, sample_hash
from sampler.render import render_rchash
from tests.sampler.helpers import build_world


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cli") / "store")
    w = build_world(path, 120, seed=11)
    base = w.base_time
    w.store.close()  # the CLI opens the store itself (one LMDB handle per process)
    return path, base


def test_prints_the_rchash_answer(store_dir, capsys):
    path, base = store_dir
    ct = base + 900
    rc = main(["--data-dir", path, "--depth", "0", "--anchor1", "64", "--anchor2", "1e",
               "--consensus-time", str(ct), "--workers", "2"])  # fmt: skip
    out, err = capsys.readouterr()
    assert rc == 0
    assert err == ""  # not a terminal: no progress
    doc = json.loads(out)
    assert list(doc) == ["hash", "proofs", "durationSeconds", "stats", "storageRadius", "hashBackend"]
    with ReserveStore(path, readonly=True) as store:
        res = reserve_sample(store, b"\x64", 0, ct, workers=0)
    want = render_rchash(sample_hash(res.items), make_inclusion_proofs(res.items, b"\x64", b"\x1e"), 0.0)
    assert doc["hash"] == want["hash"]
    assert doc["proofs"] == want["proofs"]
    assert doc["stats"]["total_iterated"] == res.stats.total_iterated
    assert doc["storageRadius"] == 0
    from chunkstore.swarm.bmt import backend as hashing

    assert doc["hashBackend"] == {**hashing.backend_info().as_dict(), "usedBySample": res.hash_backend}


def test_rchash_only(store_dir, capsys):
    path, base = store_dir
    rc = main(["--data-dir", path, "--depth", "1", "--anchor1", "0x80", "--anchor2", "ff" * 32,
               "--consensus-time", str(base + 1000), "--rchash-only"])  # fmt: skip
    out, _ = capsys.readouterr()
    assert rc == 0
    assert list(json.loads(out)) == ["hash", "proofs", "durationSeconds"]


def test_insufficient_exits_1(store_dir, capsys):
    path, base = store_dir
    rc = main(["--data-dir", path, "--depth", "9", "--anchor1", "64", "--anchor2", "1e",
               "--consensus-time", str(base)])  # fmt: skip
    out, err = capsys.readouterr()
    assert rc == 1 and out == ""
    assert "insufficient sample: found" in err


def test_bad_usage(store_dir, tmp_path, capsys):
    path, _ = store_dir
    for argv in (
        ["--data-dir", path, "--depth", "0", "--anchor1", "zz", "--anchor2", "1e"],
        ["--data-dir", path, "--depth", "32", "--anchor1", "64", "--anchor2", "1e"],
        ["--data-dir", path, "--depth", "0", "--anchor1", "", "--anchor2", "1e"],
    ):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    # no usable store: 2, as verify and export answer (api.cli's exit codes)
    assert main(["--data-dir", str(tmp_path / "missing"), "--depth", "0", "--anchor1", "64", "--anchor2", "1e"]) == 2
    assert "cannot open store" in capsys.readouterr().err


def _run_cli(argv: list[str], stderr_tty: bool) -> tuple[int, bytes, bytes]:
    """Run ``chunkstore sample`` in a fresh process; stderr on a pty (with a window size) or a pipe."""
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-c", "import sys; from api.cli import sample_main; sys.exit(sample_main(sys.argv[1:]))", *argv]
    if not stderr_tty:
        proc = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
        return proc.returncode, proc.stdout, proc.stderr
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave)
    finally:
        os.close(slave)
    err = b""
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        err += data
    os.close(master)
    out, _ = proc.communicate(timeout=120)
    return proc.returncode, out, err


def _argv(path: str, base: int, workers: int) -> list[str]:
    return ["--data-dir", path, "--depth", "0", "--anchor1", "64", "--anchor2", "1e",
            "--consensus-time", str(base + 900), "--workers", str(workers), "--rchash-only"]  # fmt: skip


@pytest.mark.parametrize("workers", [0, 2])
def test_no_progress_when_stderr_is_not_a_terminal(store_dir, workers):
    path, base = store_dir
    rc, out, err = _run_cli(_argv(path, base, workers), stderr_tty=False)
    assert rc == 0
    assert err == b""
    assert list(json.loads(out)) == ["hash", "proofs", "durationSeconds"]


@pytest.mark.parametrize("workers", [0, 2])
def test_progress_bar_on_a_terminal(store_dir, workers):
    pytest.importorskip("pty")
    path, base = store_dir
    with ReserveStore(path, readonly=True) as store:
        total = reserve_sample(store, b"\x64", 0, base + 900, workers=0).stats.total_iterated
    rc, out, err = _run_cli(_argv(path, base, workers), stderr_tty=True)
    assert rc == 0
    text = err.decode("utf-8", "replace")
    assert "sampling" in text
    assert f"{total}/{total}" in text  # tqdm's count of walked entries, ended at 100%
    assert "100%" in text and "chunk/s" in text
    # stdout stays the clean JSON answer
    assert list(json.loads(out)) == ["hash", "proofs", "durationSeconds"]


def test_the_pool_starts_before_the_timed_sample(store_dir, capsys, monkeypatch):
    """The CLI starts the sampler's pool (kernels, fork server) before its clock starts, as the daemon does
    once it listens: the printed duration is the sample's and its proofs', and on a fresh install the scan
    kernels compile aside while the BMT's load (sampler.start_pool)."""
    import sampler

    calls: list[str] = []
    real_start, real_sample = sampler.start_pool, sampler.reserve_sample
    monkeypatch.setattr(sampler, "start_pool", lambda *a, **k: calls.append("start_pool") or real_start(*a, **k))
    monkeypatch.setattr(sampler, "reserve_sample", lambda *a, **k: calls.append("sample") or real_sample(*a, **k))
    path, base = store_dir
    rc = main(["--data-dir", path, "--depth", "0", "--anchor1", "64", "--anchor2", "1e",
               "--consensus-time", str(base + 900), "--workers", "2"])  # fmt: skip
    capsys.readouterr()
    assert rc == 0 and calls == ["start_pool", "sample"]
