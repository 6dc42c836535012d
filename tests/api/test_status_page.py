"""The operator's status page (``/ui/``) and the facts it reads from ``/chunkstore/status``.

In-process tests check the route, the JSON and the counts behind it against independent counts.
The browser test loads the page in headless Chromium (Debian's package; ``.ci/run`` installs it;
skipped with that reason without it) against a daemon with a demo reserve, and checks that the
rendered DOM holds the numbers the endpoints give, that it refreshes on its own, that every
resource came from the daemon, and that the page logged no error. It saves a screenshot under the
test's tmp dir and prints the path.
"""

from __future__ import annotations

import asyncio
import errno
import math
import os
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.app import make_app
from api.batchshare import BatchEntriesCache, count_batch_entries
from api.config import Config
from api.diskuse import allocated_bytes, disk_use
from api.routes_ui import UI_DIR
from api.state import STATE
from chunkstore.reserve import ReserveOptions, ReserveStore
from chunkstore.store import writefailures
from tests.api.browser import CHROMIUM, Browser
from tests.api.daemonproc import Daemon
from tests.api.helpers import Uploader, simple_sample
from tests.store.fullhelpers import FailingCommits

N_BINS = 32


def build(tmp_path: Path, store: ReserveStore, **cfg):
    async def sample(anchor: bytes, depth: int, ct: int):
        return await asyncio.get_running_loop().run_in_executor(None, simple_sample, store, anchor, depth, ct)

    return make_app(store, Config(data_dir=tmp_path, **cfg), sample_fn=sample)


def fill(store: ReserveStore, uploaders: list[Uploader], counts: list[int]) -> None:
    for up, n in zip(uploaders, counts, strict=True):
        store.batches.add(up.batch())
        for _ in range(n):
            _, data, stamp = up.cac()
            store.put(data, stamp)


# ---------------------------------------------------------------- the files and the route


def test_page_references_nothing_outside_the_daemon():
    """No asset from elsewhere: every src/href/url() and fetch is a relative or absolute local path."""
    for path in UI_DIR.iterdir():
        text = path.read_text()
        for m in re.finditer(r"""(?:src|href)\s*=\s*["']([^"']+)|url\(\s*["']?([^"')]+)|fetch\(\s*["'`]([^"'`]+)""", text):
            ref = next(g for g in m.groups() if g)
            assert not re.match(r"^[a-z]+:|^//", ref), f"{path.name} references {ref}"
        # the one absolute URL allowed is SVG's namespace name, which is never fetched
        urls = set(re.findall(r"https?://[^\s\"'`)]+", text))
        assert urls <= {"http://www.w3.org/2000/svg"}, (path.name, urls)


async def test_ui_is_served_with_a_policy_that_keeps_it_local(tmp_path):
    store = ReserveStore(tmp_path / "store")
    async with TestClient(TestServer(build(tmp_path, store))) as client:
        r = await client.get("/ui/")
        assert r.status == 200 and r.content_type == "text/html"
        html = await r.text()
        assert 'src="status.js"' in html and 'href="status.css"' in html
        csp = r.headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "script-src 'self'" in csp
        for name, ctype in (("status.js", "text/javascript"), ("status.css", "text/css")):
            r = await client.get(f"/ui/{name}")
            assert r.status == 200 and r.content_type == ctype
            assert await r.read() == (UI_DIR / name).read_bytes()
        r = await client.get("/ui", allow_redirects=False)
        assert r.status == 301 and r.headers["Location"] == "/ui/"
        for bad in ("/ui/nope.js", "/ui/..%2Froutes_ui.py", "/ui/index.html/x"):
            r = await client.get(bad)
            assert r.status == 404, bad
            assert (await r.json())["code"] == 404
        r = await client.get("/")  # clients read this text: the page is not there
        assert r.content_type == "text/plain"
    store.close()


async def test_chunkstore_status_gives_what_the_page_needs(tmp_path):
    store = ReserveStore(tmp_path / "store", shards=4, reserve=ReserveOptions(capacity=1000))
    a, b = Uploader(seed=b"a"), Uploader(seed=b"b")
    fill(store, [a, b], [30, 12])
    app = build(tmp_path, store, sampling_window=300.0)
    async with TestClient(TestServer(app)) as client:
        body = await (await client.get("/chunkstore/status")).json()
        assert body["samples"] == {"windowSeconds": 300.0, "running": False, "fullReserveEstimateSeconds": None,
                                   "recent": []}
        r = await client.get("/rchash/0/aa/bb?verbose=true")
        assert r.status == 200
        verbose = await r.json()
        assert (await client.get("/rchash/30/aa/bb")).status == 422  # too few chunks: a failed run
        status = await (await client.get("/status")).json()
        body = await (await client.get("/chunkstore/status")).json()
    store.close()

    assert body["reserve"]["capacity"] == 1000
    assert len(body["reserve"]["bins"]) == N_BINS
    assert sum(body["reserve"]["bins"]) == status["reserveSize"] == 42
    assert body["batches"]["entries"] == {a.batch_id.hex(): 30, b.batch_id.hex(): 12}
    disk = body["disk"]
    assert 0 < disk["dataDirBytes"] and 0 <= disk["freeBytes"] <= disk["sizeBytes"]
    runs = body["samples"]["recent"]
    assert [r["ok"] for r in runs] == [True, False]
    assert runs[0]["chunksIterated"] == 42 and runs[0]["durationSeconds"] > 0
    assert runs[0]["finishedAt"] <= runs[1]["finishedAt"]
    # the same projection ?verbose=true gave for that run, not a second model of it
    assert body["samples"]["fullReserveEstimateSeconds"] == verbose["fullReserveEstimate"]["estimatedSeconds"] > 0
    assert body["hashBackend"] == {k: verbose["hashBackend"][k] for k in ("name", "accelerated", "reason")}


async def test_metrics_for_the_dashboard(tmp_path):
    store = ReserveStore(tmp_path / "store")
    fill(store, [Uploader()], [20])
    app = build(tmp_path, store, sampling_window=400.0)
    app[STATE].ready = False
    async with TestClient(TestServer(app)) as client:
        text = await (await client.get("/metrics")).text()
        assert "chunkstore_ready 0.0" in text
        assert "chunkstore_sample_window_seconds 400.0" in text
        assert "chunkstore_sample_full_reserve_estimate_seconds NaN" in text
        assert 'bee_localstore_reserve_sample_duration_seconds_count{status="failure"} 0.0' in text
        assert 'chunkstore_http_request_duration_seconds_count{method="POST",route="/chunks"} 0.0' in text
        app[STATE].ready = True
        assert (await client.get("/rchash/0/aa/bb")).status == 200
        text = await (await client.get("/metrics")).text()
    bins = store.reserve.status().bins
    store.close()
    assert "chunkstore_ready 1.0" in text
    estimate = float(re.search(r"^chunkstore_sample_full_reserve_estimate_seconds (\S+)$", text, re.M).group(1))
    assert math.isfinite(estimate) and estimate > 0
    exposed = {int(m.group(1)): float(m.group(2))
               for m in re.finditer(r'^chunkstore_reserve_bin_entries\{bin="(\d+)"\} (\S+)$', text, re.M)}
    assert exposed == {b: float(n) for b, n in enumerate(bins)} and sum(exposed.values()) == 20
    for name in ("chunkstore_data_dir_bytes", "chunkstore_filesystem_free_bytes", "chunkstore_filesystem_size_bytes"):
        assert float(re.search(rf"^{name} (\S+)$", text, re.M).group(1)) > 0


async def test_ready_metric_follows_readiness_when_writes_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(writefailures, "free_bytes", lambda p: 0)  # the disk stays full until said otherwise
    store = ReserveStore(tmp_path / "store")
    up = Uploader()
    store.batches.add(up.batch())
    async with TestClient(TestServer(build(tmp_path, store))) as client:
        assert "chunkstore_ready 1.0" in await (await client.get("/metrics")).text()
        failing = FailingCommits(monkeypatch, errno.ENOSPC)
        _, data, stamp = up.cac()
        assert (await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp.hex()})).status == 507
        assert (await client.get("/readiness")).status == 400
        text = await (await client.get("/metrics")).text()
        assert "chunkstore_ready 0.0" in text
        assert 'chunkstore_writes_refused_total{reason="disk_full"} 1.0' in text
        failing.stop()
        monkeypatch.setattr(writefailures, "free_bytes", lambda p: writefailures.RECOVERY_MARGIN)
        assert (await client.get("/readiness")).status == 200
        assert "chunkstore_ready 1.0" in await (await client.get("/metrics")).text()
    store.close()


# ---------------------------------------------------------------- the counts behind it


def test_batch_entries_equal_a_count_of_the_index(tmp_path):
    store = ReserveStore(tmp_path / "store", shards=3)
    ups = [Uploader(seed=bytes([i])) for i in range(3)]
    fill(store, ups, [25, 0, 40])
    # one chunk under two batches is two entries, one in each
    address, data, stamp = ups[0].cac(b"shared")
    store.put(data, stamp)
    store.put(data, ups[1].stamp(address))
    assert len(store.stamps_of(address)) == 2
    ids = [u.batch_id for u in ups]
    by_scan = Counter(batch_id for _, _, batch_id, _ in store.iter_neighbourhood(b"", 0))
    counted = count_batch_entries(store, ids)
    assert counted == {i: by_scan[i] for i in ids} == {ids[0]: 26, ids[1]: 1, ids[2]: 40}
    stranger = os.urandom(32)
    assert count_batch_entries(store, [stranger]) == {stranger: 0}
    store.close()


def test_batch_entries_cache_recounts_when_old_or_batches_change(tmp_path):
    store = ReserveStore(tmp_path / "store")
    a, b = Uploader(seed=b"a"), Uploader(seed=b"b")
    fill(store, [a], [5])
    cache = BatchEntriesCache(max_age=3600)
    first = cache.get(store)
    assert first.entries == {a.batch_id: 5}
    _, data, stamp = a.cac()
    store.put(data, stamp)
    assert cache.get(store) is first  # young enough: served as counted
    fill(store, [b], [2])  # a new batch: recounted at once
    assert cache.get(store).entries == {a.batch_id: 6, b.batch_id: 2}
    cache.max_age = 0
    _, data, stamp = b.cac()
    store.put(data, stamp)
    assert cache.get(store).entries[b.batch_id] == 3
    store.close()


def test_disk_use_counts_allocated_bytes(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "data").write_bytes(os.urandom(1 << 20))
    with open(tmp_path / "sparse", "wb") as f:  # an apparent 64 MiB that takes no room
        f.truncate(64 << 20)
    used = allocated_bytes(tmp_path)
    assert (1 << 20) <= used < (2 << 20)
    use = disk_use(tmp_path)
    assert use.data_dir_bytes == used and 0 < use.free_bytes <= use.size_bytes
    assert allocated_bytes(tmp_path / "missing") == 0


# ---------------------------------------------------------------- in a real browser

# what the page shows, read back from the DOM (each number keeps its raw value in data-value)
READ_DOM = """(() => {
  const v = (f) => { const el = document.querySelector(`[data-field="${f}"]`); return el ? el.dataset.value ?? null : null; };
  const t = (f) => document.querySelector(`[data-field="${f}"]`).textContent;
  return {
    refreshes: Number(document.getElementById("updated").dataset.refreshes),
    error: document.getElementById("error").hidden ? null : document.getElementById("error").textContent,
    health: document.getElementById("health").dataset.state,
    readiness: document.getElementById("readiness").textContent,
    overlay: v("overlay"), reserveSize: v("reserveSize"), reserveSizeText: t("reserveSize"),
    storageRadius: v("storageRadius"), committedDepth: v("committedDepth"), capacity: v("capacity"),
    withinRadius: v("reserveSizeWithinRadius"), hashBackend: v("hashBackend"), dataDirBytes: v("dataDirBytes"),
    windowSeconds: v("windowSeconds"), batchRadius: v("batchRadius"), commitment: v("commitment"),
    capacityDoubling: v("capacityDoubling"),
    bins: [...document.querySelectorAll("#bins-chart rect[data-bin]")].map((r) => Number(r.dataset.value)),
    samples: [...document.querySelectorAll("#samples-chart rect")].map((r) => Number(r.dataset.value)),
    failedSamples: document.querySelectorAll("#samples-chart rect.failed").length,
    batches: [...document.querySelectorAll("#batches tbody tr[data-batch]")].map((tr) => ({
      id: tr.dataset.batch,
      ttl: Number(tr.querySelector('[data-col="batchTTL"]').dataset.value),
      entries: Number(tr.querySelector('[data-col="entries"]').dataset.value),
      share: Number(tr.querySelector('[data-col="share"]').dataset.value),
    })),
    resources: performance.getEntriesByType("resource").map((e) => e.name),
  };
})()"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not on PATH: install Debian's `chromium` package "
                                             "(.ci/run does)")
async def test_status_page_in_chromium(tmp_path):
    daemon = Daemon(tmp_path / "data", "--demo", "--demo-chunks", "600")
    browser = Browser(tmp_path / "profile")
    try:
        daemon.wait_ready()
        # a second batch with a known share, a chain state for real TTLs, a failed sample and two good ones
        up = Uploader(seed=os.urandom(8))
        assert daemon.request("POST", "/batches", up.batch_json(value=10**12))[0] == 201
        assert daemon.request("POST", "/chainstate", {"block": 100, "totalAmount": "1000",
                                                      "currentPrice": "24000"})[0] == 200
        for _ in range(60):
            _, data, stamp = up.cac()
            assert daemon.request("POST", "/chunks", data, {"swarm-postage-stamp": stamp.hex()})[0] == 201
        for path, want in (("/rchash/31/aa/bb", 422), ("/rchash/0/aa/bb", 200), ("/rchash/1/5a/01", 200)):
            assert daemon.request("GET", path, timeout=120)[0] == want

        await browser.open()
        await browser.navigate(daemon.url + "/ui/")
        await browser.wait_until('Number(document.getElementById("updated").dataset.refreshes) >= 1')
        dom = await browser.evaluate(READ_DOM)
        status, own = daemon.json("/status"), daemon.json("/chunkstore/status")
        reserve_state = daemon.json("/reservestate")
        batches = {b["batchID"]: b for b in daemon.json("/batches")["batches"]}

        assert dom["error"] is None and dom["health"] == "ok" and dom["readiness"] == "ready"
        assert int(dom["reserveSize"]) == status["reserveSize"] == 660
        assert dom["reserveSizeText"] == f"{status['reserveSize']:,}"
        assert dom["overlay"] == status["overlay"] == daemon.listening["overlay"]
        assert int(dom["storageRadius"]) == status["storageRadius"]
        assert int(dom["committedDepth"]) == status["committedDepth"]
        assert int(dom["withinRadius"]) == status["reserveSizeWithinRadius"]
        assert int(dom["capacity"]) == own["reserve"]["capacity"] == 1 << 22
        assert int(dom["batchRadius"]) == reserve_state["radius"]
        assert int(dom["commitment"]) == reserve_state["commitment"] == status["batchCommitment"]
        assert int(dom["capacityDoubling"]) == reserve_state["reserveCapacityDoubling"]
        assert dom["bins"] == own["reserve"]["bins"] and sum(dom["bins"]) == status["reserveSize"]
        assert float(dom["windowSeconds"]) == own["samples"]["windowSeconds"] == 585
        assert dom["samples"] == [r["durationSeconds"] for r in own["samples"]["recent"]] and len(dom["samples"]) == 3
        assert dom["failedSamples"] == 1
        assert int(dom["dataDirBytes"]) > 0
        assert {b["id"] for b in dom["batches"]} == set(batches)
        for row in dom["batches"]:
            assert row["ttl"] == batches[row["id"]]["batchTTL"] > 0
            assert row["entries"] == own["batches"]["entries"][row["id"]]
            assert row["share"] == pytest.approx(row["entries"] / status["reserveSize"])
        assert next(r for r in dom["batches"] if r["id"] == up.batch_id.hex())["entries"] == 60
        origin = daemon.url + "/"
        assert dom["resources"] and all(u.startswith(origin) for u in dom["resources"]), dom["resources"]

        # refreshed on its own: new chunks show up without a reload
        for _ in range(5):
            _, data, stamp = up.cac()
            assert daemon.request("POST", "/chunks", data, {"swarm-postage-stamp": stamp.hex()})[0] == 201
        await browser.wait_until(
            f'document.querySelector(\'[data-field="reserveSize"]\').dataset.value === "{daemon.json("/status")["reserveSize"]}"',
            timeout=15)

        shot = tmp_path / "status-page.png"
        await browser.screenshot(shot)
        print(f"\nstatus page screenshot: {shot}")
        assert shot.stat().st_size > 10_000
        assert not browser.errors, browser.errors
        # the hash backend, once the daemon reports it (GET /chunkstore/status "hashBackend")
        assert dom["hashBackend"] == own["hashBackend"]["name"]
    finally:
        await browser.close()
        daemon.stop()


async def test_readiness_and_its_metric_wait_for_the_hashing_kernels(tmp_path, monkeypatch):
    """While the kernels load in the background (``serve`` on a fresh install), ``/readiness`` is notReady with
    the reason and ``chunkstore_ready`` is 0; both follow when the load ends. ``chunkstore_build_info`` names
    the version and the Bee API version served."""
    import chunkstore
    from api.version import API_VERSION
    from chunkstore.swarm.bmt import backend as hashing

    loading = True
    monkeypatch.setattr(hashing, "settled", lambda: not loading)
    store = ReserveStore(tmp_path / "store")
    async with TestClient(TestServer(build(tmp_path, store))) as client:
        r = await client.get("/readiness")
        assert r.status == 400 and "hashing kernels are loading" in (await r.json())["reason"]
        text = await (await client.get("/metrics")).text()
        assert "chunkstore_ready 0.0" in text
        assert (f'chunkstore_build_info{{api_version="{API_VERSION}",python="{sys.version.split()[0]}",'
                f'version="{chunkstore.__version__}"}} 1.0') in text
        loading = False
        assert (await client.get("/readiness")).status == 200
        assert "chunkstore_ready 1.0" in await (await client.get("/metrics")).text()
    store.close()
