"""bee-js 12.3.1's tag and pin calls against the real daemon in ``--dev`` mode (``tests/js/pins.mjs``).

bee-js parses every answer with its own schemas (a tag's eight fields and
their types, ``{"references"}``, ``{"reference"}``), so the driver getting
through is itself the shape check; this test then checks the numbers: the
counters of a tagged upload and of a repeat, tag uids in order, the pins
the store holds, and the status codes of the errors.

Skipped when ``node`` is not on PATH or ``npm ci --prefix tests/js`` has not run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from chunkstore.reserve import ReserveStore
from chunkstore.swarm.file import split_bytes
from chunkstore.swarm.redundancy.level import Level
from tests.api.daemonproc import Daemon

ROOT = Path(__file__).resolve().parents[2]
JS_DIR = ROOT / "tests" / "js"
DRIVER = JS_DIR / "pins.mjs"
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not on PATH; the bee-js test needs Node.js >= 18"),
    pytest.mark.skipif(not (JS_DIR / "node_modules" / "@ethersphere" / "bee-js").is_dir(),
                       reason="bee-js is not installed: run `npm ci --prefix tests/js`"),
]


def test_bee_js_tags_and_pins(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "data", "--dev")
    try:
        d.wait_ready(30)
        proc = subprocess.run([NODE, str(DRIVER), "--url", d.url], cwd=ROOT, capture_output=True, text=True,
                              timeout=240)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        assert lines, f"driver printed no JSON (exit {proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
        r = json.loads(lines[-1])
        assert proc.returncode == 0 and r.get("ok"), (
            f"bee-js failed at step {r.get('step')!r}: {json.dumps(r.get('error'), indent=1)}\n{r.get('stack', '')}"
        )
    finally:
        d.stop()

    uid = r["created"]["uid"]
    assert r["created"]["split"] == r["created"]["synced"] == 0 and r["created"]["address"] == ""
    # every chunk the upload made (Bee's default level: leaves, parities, the root and its replicas)
    chunks = []
    assert split_bytes(bytes.fromhex(r["dataHex"]), lambda a, d: chunks.append(a), level=Level.MEDIUM) == bytes.fromhex(
        r["taggedReference"])
    n = len(chunks)
    after = r["afterUpload"]
    assert (after["split"], after["seen"], after["stored"], after["sent"], after["synced"]) == (n, 0, n, 0, n)
    assert after["address"] == r["taggedReference"] and r["uploadTagUid"] == uid
    repeat = r["repeat"]
    assert r["repeatTagUid"] == uid + 1, "an upload without a tag gets the next one"
    assert (repeat["split"], repeat["seen"], repeat["stored"], repeat["synced"]) == (n, n, 0, 0)
    assert r["allTags"][:2] == [uid, uid + 1] and r["pagedTags"] == [uid + 1]
    assert r["updated"]["address"] == "00" * 31 + "01"
    assert r["deletedTag"]["status"] == 404 and r["deletedTag"]["responseBody"]["message"] == "tag not present"

    assert r["pins"] == sorted([r["pinnedFile"], r["taggedReference"]])
    assert r["getPin"] == r["pinnedFile"] and r["pinsAfterUnpin"] == [r["pinnedFile"]]
    errors = r["errors"]
    assert errors["getPin"]["status"] == errors["unpin"]["status"] == errors["pinMissing"]["status"] == 404
    assert "pin collection failed" in errors["pinMissing"]["responseBody"]["message"]
    assert errors["unknownTag"]["status"] == 404 and "tag not found" in errors["unknownTag"]["responseBody"]["message"]

    with ReserveStore(tmp_path / "data", readonly=True) as store:
        assert store.pins.list() == [bytes.fromhex(r["pinnedFile"])]
        check = store.pins.check(bytes.fromhex(r["pinnedFile"]))
        assert check.total > 3 and check.missing == check.invalid == 0
