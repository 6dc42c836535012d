"""Scenarios on a really full file system, run by tests/store/fullhelpers.py inside a small tmpfs.

``python fullfs_child.py SCENARIO MOUNT [ARGS...]``: MOUNT is the empty tmpfs.
Each scenario leaves a filler file on it, fills the rest, checks what it can
check in-process and prints one JSON line of findings for the test to
assert on. Nothing here asserts: a finding the test does not expect fails
the test with the whole report in its message.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from api.cli import import_main
from chunkstore.reserve import ReserveStore
from chunkstore.store.envs import acquire_env, release_env
from chunkstore.store.errors import ChunkNotFound, StoreWriteFailed
from chunkstore.store.layout import MAX_READERS, SHARD_DBS
from chunkstore.store.verify import verify_store
from chunkstore.transfer import importer
from chunkstore.transfer import readers as importreaders
from chunkstore.transfer.budget import Sizes
from tests.store.helpers import Stamper, dump, make_batch, random_cac
from tests.transfer.helpers import entry, write_tar

FILLER = "filler"


def _filler(mount: str, size: int) -> str:
    path = os.path.join(mount, FILLER)
    with open(path, "wb") as f:
        f.write(b"\0" * size)
    return path


def _verify(path: str) -> list[str]:
    return [str(p) for p in verify_store(path).problems]


def _fill(
    store: ReserveStore, stamper: Stamper, group: int = 16, limit: int = 100_000
) -> tuple[list[bytes], Exception, list[bytes]]:
    """put_many groups of full chunks until the store refuses one: (addresses stored, the refusal, the group refused)."""
    stored: list[bytes] = []
    for _ in range(limit):
        chunks = [random_cac() for _ in range(group)]
        items = [(d, stamper.stamp(a)) for a, d in chunks]
        try:
            store.put_many(items)
        except Exception as exc:  # noqa: BLE001 - reported, the test judges it
            stored += [r.address for r in getattr(exc, "stored", {}).values()]
            return stored, exc, [a for a, _ in chunks]
        stored += [a for a, _ in chunks]
    raise RuntimeError("the file system never filled up")


def _describe(exc: BaseException) -> dict:
    return {
        "type": type(exc).__name__,
        "store_write_failed": isinstance(exc, StoreWriteFailed),
        "reason": getattr(exc, "reason", None),
        "errno": getattr(exc, "errno", None),
        "message": str(exc),
        "notes": list(getattr(exc, "__notes__", ())),
    }


def _fill_reported(store: ReserveStore, batch, out: dict) -> tuple[Stamper, list[bytes], list[bytes]]:
    """``_fill`` under ``batch`` (added first), its refusal and count in ``out``: (stamper, stored, refused group)."""
    store.batches.add(batch)
    stamper = Stamper(batch)
    stored, exc, refused = _fill(store, stamper)
    out["refusal"] = _describe(exc)
    out["stored"] = len(stored)
    return stamper, stored, refused


def store_scenario(mount: str) -> dict:
    """Fill a store to ENOSPC/EIO; check the refusal, the store, recovery once the filler is deleted."""
    filler = _filler(mount, 1 << 20)
    path = os.path.join(mount, "store")
    batch = make_batch(1, depth=22)
    out: dict = {}
    with ReserveStore(path, shards=2) as store:
        stamper, stored, refused = _fill_reported(store, batch, out)
        out["refused_group_stored"] = sum(store.has(a) for a in refused if a not in set(stored))
        out["stored_readable"] = all(len(store.get(a)) == 4104 for a in stored[-50:])
        out["verify_after_refusal"] = _verify(path)
        out["refusal_state"] = None if store.write_refusal() is None else store.write_refusal().reason
        # Single puts may still fit for a while (a failed commit leaves the file grown): until one is refused.
        for single in range(1000):
            before = dump(store)
            try:
                a, d = random_cac()
                store.put(d, stamper.stamp(a))
            except Exception as again:  # noqa: BLE001
                out["single_refusal"] = _describe(again)
                out["single_puts_before_refusal"] = single
                out["refused_single_present"] = store.has(a)
                out["unchanged_by_single_refusal"] = dump(store) == before
                break
        out["verify_after_single_refusal"] = _verify(path)
        os.unlink(filler)
        out["refusal_after_freeing"] = None if store.write_refusal() is None else store.write_refusal().reason
        a, d = random_cac()
        out["put_after_freeing"] = store.put(d, stamper.stamp(a)).stored
        try:
            store.get(a)
            out["readable_after_freeing"] = True
        except ChunkNotFound:
            out["readable_after_freeing"] = False
        out["verify_after_freeing"] = _verify(path)
    return out


def _http(port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def _json(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError:
        return {"unparsed": raw[:300].decode("latin-1")}


def daemon_scenario(mount: str) -> dict:
    """``chunkstore serve --demo`` on the small disk: the demo fill runs into the full disk."""
    from api.demo import KEY_FILE, demo_batch_id
    from chunkstore.swarm.signer import Signer
    from chunkstore.swarm.stamp import bucket_of, sign_stamp

    filler = _filler(mount, 1 << 20)
    data = os.path.join(mount, "data")
    cmd = [sys.executable, "-m", "api.cli", "serve", "--data-dir", data, "--demo", "--demo-chunks", "3000", "--port", "0",
           "--workers", "1"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    out: dict = {}
    try:
        port = None
        for line in proc.stderr:
            rec = json.loads(line)
            if rec.get("msg") == "listening":
                port = rec["port"]
                break
        assert port is not None, "daemon did not start"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            status, _, raw = _http(port, "GET", "/readiness")
            body = _json(raw)
            if not str(body.get("reason", "")).startswith("starting"):
                break
            time.sleep(0.2)
        out["readiness_full"] = [status, body]
        status, _, raw = _http(port, "GET", "/health")
        out["health_full"] = [status, _json(raw)]
        signer = Signer(bytes.fromhex(Path(data, KEY_FILE).read_text().strip()))
        batch_id = demo_batch_id(signer.address)

        def upload() -> tuple[int, str, dict, bytes]:
            address, chunk = random_cac()
            # a fresh slot: the demo fill takes positions from 0 up, and a bucket of its batch holds 16
            stamp = sign_stamp(signer, address, batch_id, bucket_of(address, 16), 15, time.time_ns())
            status, ctype, raw = _http(port, "POST", "/chunks", chunk, {"Swarm-Postage-Stamp": stamp.to_bytes().hex()})
            return status, ctype, _json(raw), address

        # Single chunks may still fit for a while after the demo's group of 250 did not: until one is refused.
        accepted = 0
        while accepted < 2000:
            status, ctype, body, address = upload()
            if status != 201:
                break
            accepted += 1
        out["uploads_accepted_before_refusal"] = accepted
        out["upload_full"] = [status, ctype, body]
        status, _, raw = _http(port, "GET", "/readiness")
        out["readiness_after_refused_upload"] = [status, _json(raw)]
        with ReserveStore(data, readonly=True) as reader:
            out["chunks_stored"] = reader.stats()["chunks"]
            out["refused_chunk_present"] = reader.has(address)
            some = next(iter(reader.iter_neighbourhood(b"", 0)))[0]
        status, _, raw = _http(port, "GET", f"/chunks/{some.hex()}")
        out["get_full"] = [status, len(raw)]
        status, _, raw = _http(port, "GET", "/rchash/0/aa/bb")
        out["rchash_full"] = [status, sorted(_json(raw))]
        status, _, raw = _http(port, "GET", "/metrics")
        out["metrics_full"] = [line for line in raw.decode().splitlines() if line.startswith("chunkstore_writes_refused")]
        verify = subprocess.run([sys.executable, "-m", "api.cli", "verify", "--data-dir", data],
                                capture_output=True, text=True, timeout=300)
        out["verify_full"] = [verify.returncode, verify.stdout.strip()[-300:]]
        os.unlink(filler)
        status, _, raw = _http(port, "GET", "/readiness")
        out["readiness_freed"] = [status, _json(raw)]
        status, ctype, body, address = upload()
        out["upload_freed"] = [status, ctype, body]
        verify = subprocess.run([sys.executable, "-m", "api.cli", "verify", "--data-dir", data],
                                capture_output=True, text=True, timeout=300)
        out["verify_freed"] = [verify.returncode, verify.stdout.strip()[-300:]]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out["exit_code"] = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out["exit_code"] = "killed"
        log = proc.stderr.read()
        out["demo_log"] = [json.loads(line).get("error", "")[:300] for line in log.splitlines()
                           if line.startswith("{") and "demo fill failed" in line]
    return out


def _small_runs(budget, baseline, workers, shape):
    """A run buffer of 64 records, so that staging spills to the disk."""
    return Sizes(budget=budget, baseline=baseline, ring=4 << 20, arena=256 << 10, rows=64, phase2=1 << 20)


def import_scenario(mount: str, work: str) -> dict:
    """Imports into a store on the small disk: staging full, publish refused up front, a real ENOSPC while
    publishing (the up-front check switched off), and the import completed once there is room."""
    importer.plan_sizes = _small_runs
    importreaders.TAR_TASK_ENTRIES = 16
    batch = make_batch(1, depth=22)
    stamper = Stamper(batch)
    path = os.path.join(mount, "store")
    with ReserveStore(path, shards=2) as store:
        store.batches.add(batch)
        for _ in range(20):
            a, d = random_cac()
            store.put(d, stamper.stamp(a))
    entries = [entry(a, d, stamper.stamp(a)) for a, d in (random_cac() for _ in range(600))]
    tar = os.path.join(work, "in.tar")
    write_tar(tar, entries)
    free = os.statvfs(mount).f_bfree * os.statvfs(mount).f_frsize
    filler = _filler(mount, max(0, free - (1 << 20)))  # 1 MiB left: less than the 2.5 MiB the records take

    def snapshot() -> dict:
        with ReserveStore(path) as store:
            return dump(store)

    def attempt(**kw) -> dict:
        try:
            report = importer.import_reserve(path, tar, workers=0, show_progress=False, **kw)
            return {"type": "ok", "written": report.load.written}
        except Exception as exc:  # noqa: BLE001
            return _describe(exc)

    out: dict = {}
    before = snapshot()
    out["staging_full"] = attempt()
    out["unchanged_after_staging_full"] = snapshot() == before
    out["staging_left"] = os.listdir(path)
    out["verify_after_staging_full"] = _verify(path)

    staging = tempfile.mkdtemp(dir=work)  # staging elsewhere: the store's own disk is what is short
    out["publish_refused"] = attempt(staging_dir=staging)
    out["unchanged_after_refusal"] = snapshot() == before
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        out["cli_exit"] = import_main(["--data-dir", path, "--staging-dir", staging, "--workers", "0", tar])
    out["cli_stderr"] = err.getvalue()

    importer._check_space = lambda store, needed: None  # as if another writer took the space after the check
    out["publish_full"] = attempt(staging_dir=staging)
    out["verify_after_publish_full"] = _verify(path)
    with ReserveStore(path, readonly=True) as store:
        out["chunks_after_publish_full"] = store.stats()["chunks"]
    os.unlink(filler)
    out["retry"] = attempt(staging_dir=staging)
    out["verify_after_retry"] = _verify(path)
    with ReserveStore(path, readonly=True) as store:
        out["all_present"] = all(store.has(e.address) for e in entries)
        out["chunks_after_retry"] = store.stats()["chunks"]
    return out


def restart_scenario(mount: str) -> dict:
    """A store reopened on a disk with no room left: refused at once (readiness said ready until a write failed)."""
    path = os.path.join(mount, "store")
    with ReserveStore(path, shards=2) as store:
        out: dict = {"fresh": None if store.probe_space() is None else store.probe_space().reason}
    filler = os.path.join(mount, FILLER)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    with contextlib.suppress(OSError):  # every byte left, until ENOSPC
        while os.write(fd, bytes(4096)):
            pass
    os.close(fd)
    with ReserveStore(path, shards=2) as store:
        refusal = store.probe_space()
        out["reopened"] = None if refusal is None else refusal.reason
        out["probe_left"] = [n for n in os.listdir(path) if n.startswith(".space-probe")]
        os.unlink(filler)
        out["after_freeing"] = None if store.write_refusal() is None else store.write_refusal().reason
    return out


def _fill_all(mount: str) -> str:
    """Fill every byte left on the file system; the filler's path."""
    filler = os.path.join(mount, FILLER)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    with contextlib.suppress(OSError):  # every byte left, until ENOSPC
        while os.write(fd, bytes(4096)):
            pass
    os.close(fd)
    return filler


def _lock_files(path: str) -> list[str]:
    return sorted(os.path.join(path, d, "lock.mdb") for d in os.listdir(path)
                  if os.path.isfile(os.path.join(path, d, "lock.mdb")))


def _open_outcome(open_it) -> dict | None:
    try:
        open_it()
    except Exception as exc:  # noqa: BLE001 - reported, the test judges it
        return _describe(exc)
    return None


def lockfile_scenario(mount: str) -> dict:
    """LMDB maps its lock file (lock.mdb) and writes through the map: a page of it the full disk had no room
    for was a SIGBUS that killed the process, at the open or when a new reader slot was first used."""
    path = os.path.join(mount, "store")
    with ReserveStore(path, shards=2):
        pass
    out: dict = {"whole_after_create": all(os.stat(f).st_blocks * 512 >= os.stat(f).st_size for f in _lock_files(path))}
    for f in _lock_files(path):  # a data dir restored from a backup that left the lock files out
        os.unlink(f)
    filler = _fill_all(mount)
    out["reopen_full"] = _open_outcome(lambda: ReserveStore(path, shards=2).close())
    out["verify_full"] = _open_outcome(lambda: verify_store(path))
    out["new_store_full"] = _open_outcome(lambda: ReserveStore(os.path.join(mount, "new")).close())
    os.unlink(filler)
    with ReserveStore(path, shards=2) as store:
        shard = os.path.join(path, "shard-000")
        env = acquire_env(shard, readonly=True, map_size=0, max_dbs=len(SHARD_DBS))  # the store's own handle
        filler = _fill_all(mount)
        txns = [env.begin() for _ in range(MAX_READERS - 16)]  # reader slots on every page of the lock file
        out["readers_full"] = len(txns)
        for txn in txns:
            txn.abort()
        release_env(env)
        os.unlink(filler)
        out["stats"] = store.stats()["chunks"]
    out["verify"] = _verify(path)
    return out


def _serve(data: str, *args: str) -> tuple[subprocess.Popen, int | None, list[str]]:
    """``chunkstore serve`` on ``data``: the process, its port once it listens (None if it exited), its log."""
    cmd = [sys.executable, "-m", "api.cli", "serve", "--data-dir", data, "--port", "0", "--workers", "1", *args]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    log = []
    for line in proc.stderr:
        log.append(line)
        if json.loads(line).get("msg") == "listening":
            return proc, json.loads(line)["port"], log
    proc.wait(60)
    return proc, None, log


def _stop(proc: subprocess.Popen) -> int | str:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return "killed"


def chainstate_scenario(mount: str) -> dict:
    """``serve --chainstate FILE`` restarted on a full disk: the chain state in the file is stored already."""
    data = os.path.join(mount, "data")
    same, newer = os.path.join(mount, "chain.json"), os.path.join(mount, "newer.json")
    with open(same, "w") as f:
        json.dump({"block": 100, "totalAmount": "0", "currentPrice": "24000"}, f)
    with open(newer, "w") as f:
        json.dump({"block": 200, "totalAmount": "0", "currentPrice": "24000"}, f)
    proc, port, _ = _serve(data, "--chainstate", same)  # the first start: key, overlay and the chain state
    out: dict = {"first_start": port is not None, "first_exit": _stop(proc)}
    filler = _fill_all(mount)
    proc, port, log = _serve(data, "--chainstate", same)
    out["same_listening"] = port is not None
    if port is not None:
        status, _, raw = _http(port, "GET", "/chainstate")
        out["same_chainstate"] = [status, _json(raw).get("block")]
        out["same_exit"] = _stop(proc)
    else:
        out["same_log"] = [line[:300] for line in log[-3:]]
    proc, port, log = _serve(data, "--chainstate", newer)  # a chain state that cannot be stored: refused
    out["newer_listening"] = port is not None
    out["newer_exit"] = _stop(proc) if port is not None else proc.returncode
    out["newer_error"] = [json.loads(line)["msg"][:200] for line in log if '"level":"error"' in line]
    os.unlink(filler)
    return out


def removal_scenario(mount: str) -> dict:
    """Fill a store with puts alone until refused, then remove its batch on the disk still full."""
    path = os.path.join(mount, "store")
    batch = make_batch(1, depth=22)
    out: dict = {}
    with ReserveStore(path, shards=2) as store:
        _, stored, _ = _fill_reported(store, batch, out)
        out["free_at_refusal"] = os.statvfs(mount).f_bfree * os.statvfs(mount).f_frsize
        try:
            out["removed"] = store.batches.remove(batch.id)
        except Exception as failed:  # noqa: BLE001 - reported, the test judges it
            out["removal_refusal"] = _describe(failed)
        out["chunks_after"] = store.stats()["chunks"]
        out["free_after_removal"] = os.statvfs(mount).f_bfree * os.statvfs(mount).f_frsize
        a, d = random_cac()
        try:
            store.batches.add(make_batch(2, depth=22))
            out["put_after_removal"] = store.put(d, Stamper(make_batch(2, depth=22)).stamp(a)).stored
        except Exception as failed:  # noqa: BLE001
            out["put_after_removal"] = _describe(failed)
    out["verify"] = _verify(path)
    return out


SCENARIOS = {"store": store_scenario, "daemon": daemon_scenario, "import": import_scenario,
             "restart": restart_scenario, "lockfile": lockfile_scenario,
             "chainstate": chainstate_scenario, "removal": removal_scenario}

if __name__ == "__main__":
    name, mount, *rest = sys.argv[1:]
    print(json.dumps(SCENARIOS[name](mount, *rest)))
