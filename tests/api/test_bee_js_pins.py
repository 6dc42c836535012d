"""bee-js 12.3.1's tag and pin calls against the real daemon in ``--dev`` mode (``tests/js/pins.mjs``).

bee-js parses every answer with its own schemas (a tag's eight fields and
their types, ``{"references"}``, ``{"reference"}``), so the driver getting
through is itself the shape check; this test then checks the numbers: the
counters of a tagged upload and of a repeat, tag uids in order, the pins
the store holds, and the status codes of the errors.

Skipped when ``node`` is not on PATH or ``npm ci --prefix tests/js`` has not run.
"""

from __future__ import annotations

from pathlib import Path

from chunkstore.reserve import ReserveStore
from chunkstore.swarm.file import split_bytes
from chunkstore.swarm.redundancy.level import Level
from tests.api.beejs import requires_bee_js, run_driver
from tests.api.daemonproc import Daemon

pytestmark = requires_bee_js()


def test_bee_js_tags_and_pins(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "data", "--dev")
    try:
        d.wait_ready(30)
        r = run_driver("pins.mjs", d)
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
