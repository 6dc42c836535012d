"""Operator mistakes on the command line: a message naming the problem and the documented exit code, no
traceback (a CLI sweep met tracebacks for each of these)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from api.cli import int_in, main
from chunkstore.reserve import ReserveStore
from chunkstore.store.errors import StoreFormatError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store_dir(tmp_path: Path) -> str:
    path = tmp_path / "store"
    ReserveStore(path).close()
    return str(path)


@pytest.mark.parametrize("args", [
    ["import", "x.tar", "--data-dir", "d", "--shards", "-1"],
    ["import", "x.tar", "--data-dir", "d", "--shards", "300"],
    ["import", "x.tar", "--data-dir", "d", "--shards", "0"],
    ["import", "x.tar", "--data-dir", "d", "--memory-budget", "99999999999999"],
    ["import", "x.tar", "--data-dir", "d", "--memory-budget", "0"],
    ["import", "x.tar", "--data-dir", "d", "--workers", "-1"],
    ["export", "out.snap", "--data-dir", "d", "--format", "snapshot", "--level", "99"],
    ["export", "out.snap", "--data-dir", "d", "--threads", "-3"],
    ["export", "out.snap", "--data-dir", "d", "--frame-size", "99999999999"],
    ["export", "out.snap", "--data-dir", "d", "--frame-size", "0"],
    ["sample", "--data-dir", "d", "--depth", "1_0"],
    ["sample", "--data-dir", "d", "--depth", "\u0663"],
])
def test_bad_option_values_are_usage_errors(args, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and ("outside" in err or "is not" in err), err


def test_int_in_reads_digits_and_bounds_them():
    parse = int_in(-5, 300)
    assert [parse("0"), parse("007"), parse("-5"), parse("300")] == [0, 7, -5, 300]
    for bad in ("301", "-6", "1_0", " 1", "+1", "", "9" * 5000, "\u0663"):
        with pytest.raises(Exception, match="outside|is not"):
            parse(bad)


def test_corrupt_meta_environment_is_no_usable_store(store_dir, capsys):
    with open(os.path.join(store_dir, "meta", "data.mdb"), "r+b") as f:
        f.write(os.urandom(16384))
    sample = ["sample", "--data-dir", store_dir, "--depth", "0", "--anchor1", "5a", "--anchor2", "01"]
    for args in (["verify", "--data-dir", store_dir], sample,
                 ["export", os.path.join(store_dir, "..", "out.tar"), "--data-dir", store_dir]):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert "Traceback" not in err and "LMDB" in err, err


def test_deeply_nested_batches_file_is_refused_by_name(tmp_path, capsys):
    batches = tmp_path / "b.json"
    batches.write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "in.tar").write_bytes(b"")
    code = main(["import", str(tmp_path / "in.tar"), "--data-dir", str(tmp_path / "s"), "--batches", str(batches)])
    err = capsys.readouterr().err
    assert code == 2 and "nested too deeply" in err and "Traceback" not in err, err


def _wait_reading_stdin(pid: int, seconds: float = 240) -> None:
    """Until process ``pid`` sits in read(0, ...) (x86-64 and arm64 number it 0 and 63), per /proc/PID/syscall."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/syscall") as f:
                fields = f.read().split()
        except OSError:
            pytest.skip("/proc/PID/syscall is not readable here")
        if len(fields) > 1 and fields[0] in ("0", "63") and int(fields[1], 16) == 0:
            time.sleep(0.2)
            return
        time.sleep(0.1)
    raise AssertionError("the import never blocked reading its standard input")


@pytest.mark.parametrize(("sig", "code", "says"), [(signal.SIGINT, 130, b"interrupted"),
                                                 (signal.SIGTERM, 143, b"terminated")])
def test_a_signal_ends_a_command_with_a_message_and_its_staging_removed(tmp_path, sig, code, says):
    """SIGINT or SIGTERM while `chunkstore import` reads from a pipe that never ends, its staging made. SIGTERM
    ended the process where it stood, with no message and the staging directory left (an operator's sweep)."""
    import io
    import tarfile

    header = io.BytesIO()
    with tarfile.open(fileobj=header, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("ab" * 32)
        info.size = 1 << 20
        tar.addfile(info)  # the header only: the body never comes
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "api.cli", "import", "-", "--data-dir", str(tmp_path / "s"),
                             "--workers", "0", "--no-progress"], stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=ROOT)  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(header.getvalue()[:512])
    proc.stdin.flush()
    _wait_reading_stdin(proc.pid)  # past start-up (a fresh clone compiles its kernels first), blocked on stdin
    staging = tmp_path / "s" / ".import-staging"
    assert staging.is_dir() and any(staging.iterdir())
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert says in err and b"Traceback" not in err, err
    assert not staging.exists() or not any(staging.iterdir())


ASK_SIGINT = """
from sampler.pipeline import _POOL

if __name__ == "__main__":
    pool = _POOL.get(1)
    print(pool.submit(eval, "__import__('signal').getsignal(2) is __import__('signal').SIG_IGN").result())
"""


def test_sampler_workers_leave_ctrl_c_to_the_master(tmp_path):
    """Ctrl-C during `chunkstore sample` reached the pool's workers too, which printed their own tracebacks
    (a SemLock's file gone, a pipe closed) under the master's message."""
    script = tmp_path / "ask.py"
    script.write_text(ASK_SIGINT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def _store_of_400_chunks(path: Path) -> None:
    from tests.store.helpers import Stamper, make_batch, random_cac

    batch = make_batch(1, depth=22)
    with ReserveStore(path) as store:
        store.batches.add(batch)
        stamper = Stamper(batch)
        for _ in range(400):
            address, data = random_cac()
            store.put(data, stamper.stamp(address))


@pytest.mark.parametrize(("env_dir", "size", "says"), [
    ("shard-001", 8192, "cut short"), ("shard-001", 0, "is empty"), ("meta", 0, "missing or empty"),
])  # fmt: skip
def test_a_data_file_cut_short_or_emptied_is_refused_by_name(tmp_path, env_dir, size, says):
    """A CLI sweep truncated shard-001/data.mdb: verify, sample and export died of SIGBUS (-7), silently; an
    emptied one gave LMDB's "Bad file descriptor" traceback."""
    path = tmp_path / "store"
    _store_of_400_chunks(path)
    os.truncate(path / env_dir / "data.mdb", size)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in (["verify"], ["sample", "--depth", "0", "--anchor1", "5a", "--anchor2", "01"],
                 ["export", str(tmp_path / "out.tar")]):
        done = subprocess.run([sys.executable, "-m", "api.cli", args[0], "--data-dir", str(path), *args[1:]],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)  # fmt: skip
        assert done.returncode == 2, (args, done.returncode, done.stderr)
        assert says in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("lose", ["empty", "remove"])
def test_a_lost_meta_env_is_not_replaced_by_an_empty_one(tmp_path, lose):
    """A crash sweep emptied (or removed) meta/data.mdb of a store holding chunks: serve made a new one and
    answered ready, with no batch, no pin and no record of the stamp positions used."""
    path = tmp_path / "store"
    _store_of_400_chunks(path)
    meta = path / "meta" / "data.mdb"
    if lose == "empty":
        os.truncate(meta, 0)
    else:
        meta.unlink()
    with pytest.raises(StoreFormatError, match=r"missing or empty, yet the shards hold 400 chunk"):
        ReserveStore(path)
    assert not meta.exists() or meta.stat().st_size == 0  # left as it was found
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    (tmp_path / "empty.tar").write_bytes(b"")
    # every command, not serve alone: verify, export and sample said "no chunk store here", import exited 1
    # on an unknown batch (an operator's sweep)
    for args in (["serve", "--port", "0"], ["verify"], ["export", str(tmp_path / "out.tar")],
                 ["sample", "--depth", "0", "--anchor1", "5a", "--anchor2", "01"],
                 ["import", str(tmp_path / "empty.tar")]):
        done = subprocess.run([sys.executable, "-m", "api.cli", args[0], "--data-dir", str(path), *args[1:]],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
        assert done.returncode == 2, (args, done.returncode, done.stderr)
        assert "yet the shards hold 400 chunk" in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
    assert not meta.exists() or meta.stat().st_size == 0  # still as it was found


def test_a_store_whose_creation_was_cut_short_is_created_again(tmp_path):
    """Shards made, meta info not yet written (a creation interrupted): no chunk can be there, so the next
    open creates the store again."""
    path = tmp_path / "store"
    ReserveStore(path).close()
    os.truncate(path / "meta" / "data.mdb", 0)
    with ReserveStore(path) as store:
        assert store.chunk_count() == 0


@pytest.mark.parametrize("args", [["serve", "--help"], ["serve", "--no-such-flag"]])
def test_serve_answers_help_and_bad_flags_without_loading_the_daemon(args):
    """`serve --help` took 1.9 s: the daemon's stack (aiohttp, the store, the numba kernels) was imported
    before the flags were read. Now a bad flag or --help is answered from the flags' parser alone."""
    code = (
        "import sys\n"
        "from api.cli import main\n"
        f"rc = main({args!r})\n"
        "print(rc, 'aiohttp' in sys.modules, 'numba' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    rc, aiohttp_loaded, numba_loaded = out.stdout.split()[-3:]
    assert rc == ("0" if args[1] == "--help" else "2"), out.stderr
    assert (aiohttp_loaded, numba_loaded) == ("False", "False")


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--port", "abc", "'abc' is not a decimal integer"),
    ("--workers", "0.5", "'0.5' is not a decimal integer"),
    ("--cache-capacity", "lots", "'lots' is not a decimal integer"),
    ("--max-uploads", "", "'' is not a decimal integer"),
])
def test_serve_flag_that_is_not_a_number_is_named_without_internals(flag, value, says, capsys):
    """argparse words a converter's ValueError with the function's name: "invalid _port value"."""
    from api.config import parse_config

    with pytest.raises(SystemExit) as exit_:
        parse_config(["--data-dir", "d", flag, value], env={})
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: {says}" in err and "_port" not in err and "_positive_int" not in err, err


def test_serve_env_value_that_is_not_a_number_is_named(capsys):
    from api.config import parse_config

    with pytest.raises(SystemExit):
        parse_config(["--data-dir", "d"], env={"CHUNKSTORE_PORT": "eighty"})
    assert "'eighty' is not a decimal integer" in capsys.readouterr().err


def test_serve_refuses_a_shard_count_the_store_cannot_open(tmp_path, capsys):
    """`serve --shards 300` passed the flag's parser and then died in the store's open with a ValueError
    traceback (exit 1); import's --shards already refused it. Now it is a usage error, before any file is made."""
    data_dir = tmp_path / "store"
    assert main(["serve", "--data-dir", str(data_dir), "--port", "0", "--shards", "300"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--shards: must be in 1..256, got 300" in err, err
    assert not data_dir.exists()


@pytest.mark.parametrize("arg", ["--version", "-V", "version"])
def test_version_is_printed_without_loading_the_daemon(arg):
    """An operator's first question of a binary, ``chunkstore --version`` (or ``version``, as ``bee version``),
    was a usage error (exit 2). It prints the package's version and the Bee API version the daemon serves
    (the one ``/health`` reports), from the flags' parser alone."""
    import chunkstore
    from api.version import API_VERSION

    code = "import sys\nfrom api.cli import main\nrc = main([%r])\nprint(rc, 'aiohttp' in sys.modules, 'numba' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code % arg], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    lines = out.stdout.splitlines()
    assert lines[0] == f"chunkstore {chunkstore.__version__} (Bee API {API_VERSION})", out
    assert lines[1].split() == ["0", "False", "False"], out


def test_serve_with_another_shard_count_names_it(tmp_path):
    """A restart soak: `serve --shards 4` on a store of 2 said "data dir holds a store this version cannot
    open", which reads as a format problem; the shard counts were only in a field after it."""
    path = tmp_path / "store"
    with ReserveStore(path, 2):
        pass
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "api.cli", "serve", "--data-dir", str(path), "--shards", "4",
                           "--port", "0", "--log-format", "json"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    errors = [json.loads(line)["msg"] for line in done.stderr.splitlines() if '"level":"error"' in line]
    assert any("store has 2 shards; opened asking for 4" in m for m in errors), done.stderr
