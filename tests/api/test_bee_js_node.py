"""bee-js 12.3.1 against ``chunkstore serve --dev`` with node-owned stamps: feeds, tags, pins, node identity.

``tests/js/drive_node.mjs`` buys a batch (the node stamps every upload),
then: ``getNodeInfo``, ``getTopology``, ``getNodeAddresses``; ``createTag``
and a tagged ``uploadData``; a feed writer and reader without explicit
indexes (two reference updates: the reader gets the second, at index 1,
next 2), ``fetchLatestFeedUpdate``, two payload updates the same way,
``createFeedManifest`` and the manifest read through ``/bzz``; the error
for a feed with no updates; ``makeSOCWriter``/``makeSOCReader``; ``pin``,
``getAllPins``, ``getPin`` and its error for an unknown pin, the error for
an unknown tag; ``isReferenceRetrievable``; ``streamDirectory``.

Skipped when node is not on PATH or ``npm ci --prefix tests/js`` has not
been run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from chunkstore.swarm.feeds import update_address
from chunkstore.swarm.signer import Signer
from tests.api.daemonproc import Daemon

ROOT = Path(__file__).resolve().parents[2]
JS_DIR = ROOT / "tests" / "js"
DRIVER = JS_DIR / "drive_node.mjs"
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not on PATH; bee-js compatibility needs Node.js >= 18"),
    pytest.mark.skipif(
        not (JS_DIR / "node_modules" / "@ethersphere" / "bee-js").is_dir(),
        reason="bee-js is not installed: run `npm ci --prefix tests/js`",
    ),
]


@pytest.fixture
def daemon(tmp_path: Path):
    d = Daemon(tmp_path / "data", "--dev")
    try:
        d.wait_ready(60)
        yield d
    finally:
        d.stop()


def transcript(result: dict[str, Any], code: int) -> str:
    """Each bee-js call the driver made, in order: what it returned, or the error it threw."""
    out = [f"$ node tests/js/drive_node.mjs  (bee-js {result.get('client', {}).get('version')})"]
    for c in result.get("calls", []):
        if c["ok"]:
            out.append(f"{c['call']}\n    -> {c['returned']}")
        else:
            e = c["error"]
            body = json.dumps(e.get("responseBody")) if "responseBody" in e else e.get("message")
            label = "expected error" if c.get("expected") else "ERROR"
            out.append(f"{c['call']}\n    -> {label} {e.get('status', '')}: {body}")
    out.append(f"[driver exit {code}]")
    return "\n".join(out)


def run_driver(d: Daemon, key: bytes, folder: Path) -> dict[str, Any]:
    assert NODE is not None
    cmd = [NODE, str(DRIVER), "--url", d.url, "--key", key.hex(), "--dir", str(folder)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"driver printed no JSON (exit {proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
    result = json.loads(lines[-1])
    print("\n" + transcript(result, proc.returncode))  # pytest -s shows it
    assert proc.returncode == 0 and result.get("ok"), (
        f"bee-js failed at step {result.get('step')!r}: {json.dumps(result.get('error'), indent=1)}\n"
        f"{result.get('stack', '')}\nstderr: {proc.stderr[-2000:]}\ndaemon log tail: {d.raw[-15:]}"
    )
    return result


def test_bee_js_node_owned_surface(daemon: Daemon, tmp_path: Path) -> None:
    key = os.urandom(32)
    owner = Signer(key).address
    site = tmp_path / "site"
    (site / "css").mkdir(parents=True)
    (site / "index.html").write_text("<h1>streamed</h1>")
    (site / "css" / "a.css").write_text("h1 { color: red }")

    r = run_driver(daemon, key, site)
    assert r["client"]["version"] == "12.3.1"
    assert r["owner"] == owner.hex()

    # node identity, honest about having no peers
    addresses = daemon.json("/addresses")
    assert r["addresses"]["overlay"] == addresses["overlay"]
    assert r["nodeInfo"]["beeMode"] in ("full", "dev")
    assert r["topology"]["connected"] == 0 and r["topology"]["population"] == 0

    # the two feeds: the second update wins, at index 1 (bee-js found index 1 through GET /feeds)
    assert r["feedLatest"] == {"payloadIsSecond": True, "index": "0000000000000001", "next": "0000000000000002"}
    assert r["fetchLatest"] == r["feedLatest"]
    assert r["feedLatestReference"] == r["feedReferences"][1]
    assert r["payloadLatest"] == {"payload": "payload two", "index": "0000000000000001", "next": "0000000000000002"}
    topic = bytes.fromhex(r["topic"])
    assert r["feedUploads"] == [update_address(owner, topic, i).hex() for i in (0, 1)], "updates at 0 and then 1"
    for address in r["feedUploads"]:
        assert daemon.request("GET", f"/chunks/{address}")[0] == 200
    assert r["feedManifestContent"] == "second update"
    status, body = daemon.request("GET", f"/bzz/{r['feedManifest']}/")
    assert status == 200 and body == b"second update"

    # the errors a client can trigger: Bee's status codes with a JSON message
    for name in ("noUpdates", "unknownPin", "unknownTag"):
        err = r["errors"][name]
        assert err["status"] == 404, (name, err)
        assert err["responseBody"]["code"] == 404 and err["responseBody"]["message"], (name, err)

    # SOC, tag, pins, retrievability, streamed directory
    assert r["soc"]["owner"] == owner.hex()
    tag = r["tagAfter"]
    assert tag["uid"] == r["tagCreated"]["uid"]
    assert tag["split"] >= 4 and tag["stored"] >= 4  # at least the 4 chunks of the 3-chunk tree's data and root
    assert r["tagged"]["reference"] in r["pins"]
    assert r["pin"]["reference"] == r["tagged"]["reference"]
    assert r["retrievable"] is True
    status, body = daemon.request("GET", f"/bzz/{r['streamed']}/css/a.css")
    assert status == 200 and body == b"h1 { color: red }"
    assert r["streamedIndex"] == "<h1>streamed</h1>"
