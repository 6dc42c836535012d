"""bee-js 12.3.1 against ``chunkstore serve --dev`` with node-owned stamps: feeds, tags, pins, node identity.

``tests/js/drive_node.mjs`` buys a batch (the node stamps every upload),
then: ``getNodeInfo``, ``getTopology``, ``getNodeAddresses``; ``createTag``
and a tagged ``uploadData``; a feed writer and reader without explicit
indexes (two reference updates: the reader gets the second, at index 1,
next 2), ``fetchLatestFeedUpdate``, two payload updates the same way,
``createFeedManifest`` and the manifest read through ``/bzz``; the error
for a feed with no updates; ``makeSOCWriter``/``makeSOCReader``; ``pin``,
``getAllPins``, ``getPin`` and its error for an unknown pin, the error for
an unknown tag; ``isReferenceRetrievable``; ``streamDirectory``;
``createEnvelope`` and ``uploadChunk`` of the chunk with that envelope;
``pssSend`` heard by this node's own ``pssReceive``; the errors of
``depositStake``, ``withdrawSurplusStake`` and
``withdrawBZZToExternalWallet`` (no chain) and of a ``downloadData``
through access control (not served).

Skipped when node is not on PATH or ``npm ci --prefix tests/js`` has not
been run.
"""

from __future__ import annotations

import os
from pathlib import Path

from chunkstore.swarm.feeds import update_address
from chunkstore.swarm.signer import Signer
from tests.api.beejs import requires_bee_js, run_driver
from tests.api.daemonproc import Daemon

pytestmark = requires_bee_js()


def test_bee_js_node_owned_surface(dev_daemon: Daemon, tmp_path: Path) -> None:
    key = os.urandom(32)
    owner = Signer(key).address
    site = tmp_path / "site"
    (site / "css").mkdir(parents=True)
    (site / "index.html").write_text("<h1>streamed</h1>")
    (site / "css" / "a.css").write_text("h1 { color: red }")

    daemon = dev_daemon
    r = run_driver("drive_node.mjs", daemon, "--key", key.hex(), "--dir", str(site), timeout=120)
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
    # chain writes: Bee's answers of a node without a chain backend, with the reason
    for name, status, message in (("depositStake", 500, "cannot stake: no chain backend"),
                                  ("withdrawSurplusStake", 500, "cannot withdraw stake: no chain backend"),
                                  ("withdrawBZZ", 403, "Chain is disabled. This endpoint is unavailable."),
                                  ("actDownload", 500, "act download failed")):
        err = r["errors"][name]
        assert err["status"] == status and err["responseBody"]["code"] == status, (name, err)
        assert err["responseBody"]["message"].startswith(message), (name, err)

    # SOC, tag, pins, retrievability, streamed directory
    assert r["soc"]["owner"] == owner.hex()
    assert r["pssReceived"] == "hello over pss"
    assert r["gsocReceived"] == "hello over gsoc"
    env = r["envelope"]
    assert env["reference"] == env["address"] and env["batchId"] == r["batchId"]
    assert env["issuer"].removeprefix("0x").lower() == addresses["ethereum"].removeprefix("0x")  # the node signed it
    tag = r["tagAfter"]
    assert tag["uid"] == r["tagCreated"]["uid"]
    assert tag["split"] >= 4 and tag["stored"] >= 4  # at least the 4 chunks of the 3-chunk tree's data and root
    assert r["tagged"]["reference"] in r["pins"]
    assert r["pin"]["reference"] == r["tagged"]["reference"]
    assert r["retrievable"] is True
    status, body = daemon.request("GET", f"/bzz/{r['streamed']}/css/a.css")
    assert status == 200 and body == b"h1 { color: red }"
    assert r["streamedIndex"] == "<h1>streamed</h1>"
