"""The real daemon as a subprocess: start, upload, sample, SIGTERM, restart, SIGKILL, --demo, bad data dirs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import lmdb
import pytest

from chunkstore.reserve import ReserveStore
from chunkstore.store.layout import DB_INFO, FORMAT_VERSION, INFO_FORMAT, META_DIR, u32
from tests.api.helpers import Daemon, Uploader

ROOT = Path(__file__).resolve().parents[2]


async def wait_ready(session: aiohttp.ClientSession, d: Daemon, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        async with session.get(d.url("/readiness")) as r:
            if r.status == 200:
                return
        await asyncio.sleep(0.1)
    raise AssertionError("daemon never became ready")


async def upload_cac(session, d: Daemon, up: Uploader) -> tuple[bytes, bytes]:
    addr, data, stamp = up.cac(os.urandom(200))
    async with session.post(d.url("/chunks"), data=data, headers={"Swarm-Postage-Stamp": stamp.hex()}) as r:
        assert r.status == 201, await r.text()
        assert (await r.json())["reference"] == addr.hex()
    return addr, data


async def upload_soc(session, d: Daemon, up: Uploader, via_chunks: bool) -> tuple[bytes, bytes]:
    soc, stamp = up.soc(os.urandom(100))
    headers = {"Swarm-Postage-Stamp": stamp.hex()}
    if via_chunks:
        url, body = d.url("/chunks"), soc.data
    else:
        url = d.url(f"/soc/{soc.owner.hex()}/{soc.id.hex()}?sig={soc.signature.hex()}")
        body = soc.wrapped_data
    async with session.post(url, data=body, headers=headers) as r:
        assert r.status == 201, await r.text()
        assert (await r.json())["reference"] == soc.address.hex()
    return soc.address, soc.data


async def test_serve_upload_sample_sigterm_restart(tmp_path, daemons):
    data_dir = tmp_path / "data"  # does not exist yet: the daemon creates it
    d = daemons(data_dir, "--workers", "1").start()
    up = Uploader(seed=b"server")
    acked: dict[bytes, bytes] = {}
    async with aiohttp.ClientSession() as s:
        await wait_ready(s, d)
        async with s.post(d.url("/batches"), json=up.batch_json()) as r:
            assert r.status == 201
        for _ in range(30):
            addr, data = await upload_cac(s, d, up)
            acked[addr] = data
        for i in range(8):
            addr, data = await upload_soc(s, d, up, via_chunks=i % 2 == 0)
            acked[addr] = data
        async with s.get(d.url("/rchash/0/aa/bb")) as r:
            assert r.status == 200, await r.text()
            first_hash = (await r.json())["hash"]
        async with s.get(d.url("/status")) as r:
            status = await r.json()
            assert status["reserveSize"] == 38
            overlay = status["overlay"]
        async with s.get(d.url("/metrics")) as r:
            text = await r.text()
            assert 'bee_localstore_reserve_sample_duration_seconds_count{status="success"} 1.0' in text
    d.signal(signal.SIGTERM)
    assert d.wait(60) == 0
    msgs = d.messages()
    assert "shutting down" in msgs and "store closed" in msgs and "stopped" in msgs
    assert (data_dir / "overlay").read_text().strip() == overlay

    d2 = daemons(data_dir, "--workers", "1").start()
    async with aiohttp.ClientSession() as s:
        await wait_ready(s, d2)
        for addr, data in acked.items():
            async with s.get(d2.url(f"/chunks/{addr.hex()}")) as r:
                assert r.status == 200
                assert await r.read() == data
        async with s.get(d2.url("/status")) as r:
            assert (await r.json())["overlay"] == overlay
        async with s.get(d2.url("/rchash/0/aa/bb")) as r:
            assert (await r.json())["hash"] == first_hash
    assert d2.stop() == 0


async def test_sigterm_drains_an_in_flight_upload(tmp_path, daemons):
    d = daemons(tmp_path / "data").start()
    up = Uploader(seed=b"drain")
    async with aiohttp.ClientSession() as s:
        async with s.post(d.url("/batches"), json=up.batch_json()) as r:
            assert r.status == 201
        addr, data, stamp = up.cac(os.urandom(3000))
        sent_head = asyncio.Event()

        async def slow_body():
            yield data[:100]
            sent_head.set()
            await asyncio.sleep(1.0)
            yield data[100:]

        async def post():
            async with s.post(d.url("/chunks"), data=slow_body(), headers={"Swarm-Postage-Stamp": stamp.hex()}) as r:
                return r.status, await r.json()

        task = asyncio.ensure_future(post())
        await sent_head.wait()
        await asyncio.sleep(0.3)  # the request is in the handler, reading its body
        d.signal(signal.SIGTERM)
        status, body = await task
        assert status == 201 and body["reference"] == addr.hex()
    assert await asyncio.get_running_loop().run_in_executor(None, d.wait, 60) == 0
    with ReserveStore(tmp_path / "data") as store:
        assert store.get(addr) == data


async def test_a_second_sigterm_cuts_the_drain_short(tmp_path, daemons):
    """A second signal was logged and ignored: an operator's second Ctrl-C still waited out the whole
    --shutdown-timeout for a client that had stopped sending its body."""
    d = daemons(tmp_path / "data", "--shutdown-timeout", "120").start()
    up = Uploader(seed=b"hurry")
    async with aiohttp.ClientSession() as s:
        async with s.post(d.url("/batches"), json=up.batch_json()) as r:
            assert r.status == 201
        addr, data, stamp = up.cac(os.urandom(3000))
        sent_head, release = asyncio.Event(), asyncio.Event()

        async def stalled_body():
            yield data[:100]
            sent_head.set()
            await release.wait()  # the client stops sending, for longer than the test runs
            yield data[100:]

        async def post():
            with contextlib.suppress(aiohttp.ClientError):
                async with s.post(d.url("/chunks"), data=stalled_body(),
                                  headers={"Swarm-Postage-Stamp": stamp.hex()}) as r:
                    return r.status
            return None

        task = asyncio.ensure_future(post())
        await sent_head.wait()
        await asyncio.sleep(0.3)  # the request is in the handler, waiting for its body
        d.signal(signal.SIGTERM)
        await asyncio.sleep(0.5)
        assert d.proc.poll() is None  # the first signal waits for the upload
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        code = await asyncio.get_running_loop().run_in_executor(None, d.wait, 60)
        assert code == 0 and time.monotonic() - t0 < 30  # well under the 120 s drain
        release.set()
        assert await task != 201
    with ReserveStore(tmp_path / "data") as store:
        assert not store.has(addr)  # the cut-off upload left nothing


async def kill_round(data_dir: Path, daemons, up: Uploader, acked: dict[bytes, bytes], seconds: float,
                     register: bool) -> int:
    """Upload from 16 clients, SIGKILL the daemon mid-stream; returns how many uploads were acknowledged."""
    d = daemons(data_dir).start()
    stop = asyncio.Event()
    before = len(acked)

    async def uploader(s: aiohttp.ClientSession) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            if n % 5 == 0:
                soc, stamp = up.soc(os.urandom(64))
                body, addr = soc.data, soc.address
            else:
                addr, body, stamp = up.cac(os.urandom(500))
            try:
                async with s.post(d.url("/chunks"), data=body, headers={"Swarm-Postage-Stamp": stamp.hex()}) as r:
                    if r.status != 201:
                        raise AssertionError(await r.text())
                    await r.read()
                    acked[addr] = body
            except (aiohttp.ClientError, ConnectionError):
                return  # the daemon died mid-request: this one was never acknowledged

    async with aiohttp.ClientSession() as s:
        if register:
            async with s.post(d.url("/batches"), json=up.batch_json()) as r:
                assert r.status == 201
        tasks = [asyncio.ensure_future(uploader(s)) for _ in range(16)]
        await asyncio.sleep(seconds)
        d.signal(signal.SIGKILL)
        await asyncio.get_running_loop().run_in_executor(None, d.wait, 30)
        stop.set()
        await asyncio.gather(*tasks)
    return len(acked) - before


def check_acked(data_dir: Path, acked: dict[bytes, bytes]) -> None:
    from chunkstore.store.verify import verify_store

    report = verify_store(str(data_dir))
    assert report.ok, report.summary()
    with ReserveStore(data_dir) as store:
        missing = [a.hex() for a, body in acked.items() if not store.has(a) or store.get(a) != body]
    assert not missing, f"{len(missing)} acknowledged chunk(s) lost, e.g. {missing[:3]}"


async def test_sigkill_during_concurrent_uploads_loses_no_acked_chunk(tmp_path, daemons):
    data_dir = tmp_path / "data"
    up = Uploader(seed=b"kill")
    acked: dict[bytes, bytes] = {}
    assert await kill_round(data_dir, daemons, up, acked, 2.0, register=True) > 20
    check_acked(data_dir, acked)
    d2 = daemons(data_dir).start()  # and the daemon starts again on it
    assert d2.stop() == 0


@pytest.mark.slow
async def test_repeated_sigkill_rounds(tmp_path, daemons):
    data_dir = tmp_path / "data"
    up = Uploader(seed=b"kill-loop")
    acked: dict[bytes, bytes] = {}
    for round_ in range(8):
        await kill_round(data_dir, daemons, up, acked, 0.5 + 0.37 * round_, register=round_ == 0)
        check_acked(data_dir, acked)
    assert len(acked) > 200


async def test_demo_fill_then_sample(tmp_path, daemons):
    data_dir = tmp_path / "demo"
    d = daemons(data_dir, "--demo", "--demo-chunks", "400", "--workers", "1").start()
    async with aiohttp.ClientSession() as s:
        await wait_ready(s, d)
        async with s.get(d.url("/status")) as r:
            assert (await r.json())["reserveSize"] == 400
        async with s.get(d.url("/batches")) as r:
            (batch,) = (await r.json())["batches"]
            assert batch["depth"] == 20 and batch["bucketDepth"] == 16
        for depth in (0, 1, 2):
            async with s.get(d.url(f"/rchash/{depth}/5a/01?verbose=true")) as r:
                assert r.status == 200, await r.text()
                body = await r.json()
                assert body["reserveSizeWithinDepth"] >= 16
                assert {it["chunkType"] for it in body["items"]} <= {"CAC", "SOC"}
    assert d.stop() == 0
    key = (data_dir / "demo-owner.key").read_text().strip()
    assert len(key) == 64 and oct((data_dir / "demo-owner.key").stat().st_mode & 0o777) == "0o600"

    # a second start neither refills nor changes the owner
    d2 = daemons(data_dir, "--demo").start()
    async with aiohttp.ClientSession() as s:
        await wait_ready(s, d2)
        async with s.get(d2.url("/status")) as r:
            assert (await r.json())["reserveSize"] == 400
    assert d2.stop() == 0
    assert (data_dir / "demo-owner.key").read_text().strip() == key


async def test_env_vars_configure_the_daemon(tmp_path, daemons):
    data_dir = tmp_path / "envdata"
    overlay = "ab" * 32
    d = daemons(
        data_dir, "--data-dir", str(data_dir),
        env={"CHUNKSTORE_OVERLAY": overlay, "CHUNKSTORE_LOG_LEVEL": "debug", "CHUNKSTORE_ADMIN_TOKEN": "t"},
    ).start()
    async with aiohttp.ClientSession() as s:
        async with s.get(d.url("/status")) as r:
            assert (await r.json())["overlay"] == overlay
        async with s.get(d.url("/health")) as r:
            assert r.status == 200
    assert d.stop() == 0
    assert any(rec.get("msg") == "api access" and rec.get("path") == "/health" for rec in d.logs)
    assert not (data_dir / "overlay").exists()  # a configured overlay is not written


def test_unknown_store_format_is_refused_with_exit_2(tmp_path):
    data_dir = tmp_path / "old"
    ReserveStore(data_dir).close()
    env = lmdb.open(str(data_dir / META_DIR), max_dbs=4)
    with env.begin(write=True) as txn:
        txn.put(INFO_FORMAT, u32(FORMAT_VERSION + 1), db=env.open_db(DB_INFO, txn=txn))
    env.close()
    proc = subprocess.run(
        [sys.executable, "-m", "api.cli", "serve", "--data-dir", str(data_dir), "--port", "0"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    rec = json.loads(proc.stderr.strip().splitlines()[-1])
    assert rec["level"] == "error" and "cannot open" in rec["msg"] and "format" in rec["error"]


@pytest.mark.parametrize(
    "args, env, needle",
    [
        ([], {}, "--data-dir"),
        (["--data-dir", "x", "--port", "70000"], {}, "port"),
        (["--data-dir", "x"], {"CHUNKSTORE_PORT": "abc"}, "port"),
        (["--data-dir", "x", "--overlay", "12"], {}, "overlay"),
        (["--data-dir", "x"], {"CHUNKSTORE_DEMO": "maybe"}, "CHUNKSTORE_DEMO"),
    ],
)
def test_bad_flags_exit_2(tmp_path, args, env, needle):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CHUNKSTORE_")}
    proc = subprocess.run(
        [sys.executable, "-m", "api.cli", "serve", *args],
        cwd=tmp_path, env={**clean, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert needle in proc.stderr


def test_port_in_use_exits_1(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "api.cli", "serve", "--data-dir", str(tmp_path / "d"), "--port", str(port)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
        )
    assert proc.returncode == 1
    assert "cannot listen" in proc.stderr
    with ReserveStore(tmp_path / "d"):  # closed cleanly: opens again
        pass


async def test_health_stays_fast_while_sampling(tmp_path, daemons):
    """/health p99 under 50 ms while reserve samples run back to back (worker processes, loop free)."""
    d = daemons(tmp_path / "busy", "--demo", "--demo-chunks", "3000").start()
    latencies: list[float] = []
    async with aiohttp.ClientSession() as s:
        await wait_ready(s, d)
        done = asyncio.Event()

        async def sampler() -> int:
            n = 0
            for i in range(6):
                async with s.get(d.url(f"/rchash/0/{i + 1:02x}/01?verbose=true")) as r:
                    assert r.status == 200, await r.text()
                    n += 1
            done.set()
            return n

        async def prober() -> None:
            while not done.is_set():
                t0 = time.perf_counter()
                async with s.get(d.url("/health")) as r:
                    assert r.status == 200
                    await r.read()
                latencies.append(time.perf_counter() - t0)
                await asyncio.sleep(0.005)

        n, _ = await asyncio.gather(sampler(), prober())
        assert n == 6
        async with s.get(d.url("/metrics")) as r:
            assert 'bee_localstore_reserve_sample_duration_seconds_count{status="success"} 6.0' in await r.text()
    assert d.stop() == 0
    latencies.sort()
    p99 = latencies[int(0.99 * (len(latencies) - 1))]
    assert len(latencies) > 20
    print(f"health p99 {p99 * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms, n={len(latencies)}")
    assert p99 < 0.050, f"/health p99 {p99 * 1000:.1f} ms over {len(latencies)} probes"


def test_a_second_daemon_on_the_same_data_dir_is_refused(tmp_path, daemons):
    """An operator's sweep started two daemons on one data dir: both served, each with half the traffic in
    its metrics, tags and stamper memory."""
    first = daemons(tmp_path / "d").start()
    proc = subprocess.run(
        [sys.executable, "-m", "api.cli", "serve", "--data-dir", str(tmp_path / "d"), "--port", "0"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"another chunkstore serve (pid {first.proc.pid}) is serving" in proc.stderr, proc.stderr
    assert first.proc.poll() is None  # the first goes on serving
    first.stop()
    again = daemons(tmp_path / "d").start()  # the lock went with the first daemon
    again.stop()


def test_sighup_stops_the_daemon_gracefully(tmp_path, daemons):
    """An operator's sweep: SIGHUP (a closed terminal, a service manager's reload) killed the daemon on the spot,
    with no log line and no drain."""
    d = daemons(tmp_path / "d").start()
    d.signal(signal.SIGHUP)
    assert d.wait(60) == 0
    assert any(r.get("msg") == "shutting down" and r.get("signal") == "SIGHUP" for r in d.logs), d.logs
    with ReserveStore(tmp_path / "d"):  # closed cleanly: opens again
        pass


def test_the_daemon_removes_a_killed_imports_staging_area_at_start(tmp_path, daemons):
    """A sweep SIGKILLed ``chunkstore import`` while it staged and started the daemon: the staging area (the
    size of the import, 415 MiB there) stayed in the data dir, held that much of the store's disk, and only a
    next import would have removed it. An import still running keeps its own."""
    from chunkstore.transfer.importer import STAGING, STAGING_LOCK
    from tests.transfer.test_holdlock import _holder, _leftover_staging

    data = tmp_path / "d"
    killed = _leftover_staging(data, "import-1-deadbeef")
    live = _leftover_staging(data, "import-2-cafecafe")
    holder = _holder(live / STAGING_LOCK)
    try:
        d = daemons(data).start()
        assert not killed.exists() and live.exists()
        assert any(r.get("msg") == "removed the staging area a killed import left" and r.get("path") == str(killed)
                   for r in d.logs), d.logs
        d.stop()
    finally:
        holder.kill()
        holder.wait()
    daemons(data).start().stop()  # the live one's import is gone now: its area goes, and the empty base with it
    assert not (data / STAGING).exists()


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def test_the_daemon_starts_its_sampler_pool_before_the_first_sample(tmp_path, daemons):
    """The first ``/rchash`` after a start waited for the sampler's fork server, which loads the scan kernels
    (1.2 s more than the next; 13 s on a fresh install, compiling them), and an operator reads that as the
    sample's own time. The daemon now starts it once it listens; the sample only forks its workers from it.
    A ``--dev`` node, not asked for samples, does not."""
    d = daemons(tmp_path / "d", "--workers", "2").start()
    deadline = time.monotonic() + 120
    while not any(r.get("msg") == "sampler pool started" for r in d.logs):
        assert time.monotonic() < deadline, d.logs
        time.sleep(0.05)
    assert next(r for r in d.logs if r.get("msg") == "sampler pool started")["workers"] == 2
    servers = [p for p in _children(d.proc.pid) if b"forkserver" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(servers) == 1 and _children(servers[0]) == []  # no worker before a sample asks for them
    d.stop()
    dev = daemons(tmp_path / "dev", "--dev").start()
    time.sleep(1.0)
    assert not any(r.get("msg") == "sampler pool started" for r in dev.logs)
    assert not [p for p in _children(dev.proc.pid) if b"forkserver" in Path(f"/proc/{p}/cmdline").read_bytes()]
    dev.stop()


def test_the_daemon_listens_before_its_hashing_kernels_are_loaded(tmp_path, daemons):
    """The kernels load in the background (on a fresh install they compile for 14-25 s, before which the
    daemon did not listen); ``/readiness`` waits for them, and the first sample runs on them."""
    d = daemons(tmp_path / "d", "--workers", "1").start()
    msgs = [r.get("msg") for r in d.logs]
    loading = "hashing backend: the numba kernels load in the background, the pysha3 reference serves until then"
    assert loading in msgs and msgs.index(loading) < msgs.index("listening"), msgs
    deadline = time.monotonic() + 120
    while not any(r.get("msg") == "hashing backend loaded: numba" for r in d.logs):
        assert time.monotonic() < deadline, d.logs
        time.sleep(0.05)
    import urllib.request

    with urllib.request.urlopen(d.url("/readiness"), timeout=10) as r:
        assert r.status == 200
    with urllib.request.urlopen(d.url("/chunkstore/status"), timeout=10) as r:
        assert json.loads(r.read())["hashBackend"] == {"name": "numba", "accelerated": True, "reason": None}
    d.stop()


@pytest.mark.parametrize("when", ["the daemon's kernels compile", "the fork server's kernels compile"])
def test_sigterm_while_the_kernels_still_compile_exits_at_once(tmp_path, daemons, when):
    """On a fresh install (here: an empty numba cache) a SIGTERM in the first seconds drained and closed the
    store at once, but the process exited only when a compile had ended (9-13 s here): the thread starting
    the sampler's pool waited for the daemon's kernels inside the pool's lock, which the exit's pool shutdown
    then waited for; and once it had started workers, the exit waited for them to fork from a fork server
    still compiling the scan kernels. A ``docker stop`` would SIGKILL it after its 10 s."""
    d = daemons(tmp_path / "d", env={"NUMBA_CACHE_DIR": str(tmp_path / "empty-cache")}).start()
    if when == "the fork server's kernels compile":
        deadline = time.monotonic() + 300
        while not any(r.get("msg") == "sampler pool started" for r in d.logs):
            assert time.monotonic() < deadline, d.logs
            time.sleep(0.05)
    time.sleep(1.0)
    if when == "the daemon's kernels compile" and any(r.get("msg") == "hashing backend loaded: numba" for r in d.logs):
        pytest.skip("the kernels compiled within a second here: nothing to wait for")
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    assert d.wait(60) == 0
    assert time.monotonic() - t0 < 5, d.logs
