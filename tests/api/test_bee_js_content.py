"""bee-js 12.3.1's content calls against the real daemon in ``--dev`` mode (``tests/js/content.mjs``).

The driver buys a batch (``createPostageBatch``, which waits until
``getPostageBatch`` says usable), reads the node's identity and stamps,
uploads and downloads data (plain and encrypted), a file and a folder,
saves a ``MantarayNode`` through ``/bytes`` and reads it through ``/bzz``,
reads the daemon's folder manifest with ``MantarayNode``, streams a folder
chunk by chunk, tops up and dilutes the batch, and collects the error
answers. This test then checks what it reports with this project's own
code: the references bee-js got are the ones Bee's splitter and manifest
layout give for the same bytes, the identity is the key in the data dir.

Skipped when ``node`` is not on PATH or ``npm ci --prefix tests/js`` has not run.
"""

from __future__ import annotations

import json
from pathlib import Path

from api.nodekey import NODE_KEY_FILE, read_key
from chunkstore.swarm.bzz import CollectionFile, collection_manifest
from chunkstore.swarm.file import split_bytes
from chunkstore.swarm.redundancy.level import Level
from tests.api.beejs import requires_bee_js, run_driver
from tests.api.daemonproc import Daemon

pytestmark = requires_bee_js()


def test_bee_js_content_calls(dev_daemon: Daemon, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    r = run_driver("content.mjs", dev_daemon, "--dir", str(scratch))

    # identity: the key the daemon created in its data dir
    signer = read_key(dev_daemon.data_dir / NODE_KEY_FILE)
    assert r["addresses"] == {"overlay": dev_daemon.listening["overlay"], "ethereum": signer.address.hex(),
                              "publicKey": signer.public_key.hex(), "underlay": []}
    assert r["wallet"]["walletAddress"] == signer.address.hex() and int(r["wallet"]["bzz"]) > 0
    assert r["nodeInfo"]["beeMode"] == "full" and r["topology"]["bins"] == 32
    assert r["stake"] == r["withdrawable"] == "0"

    # the bought batch: the node's, listed with bee-js's label and amount, usable at once
    batch = r["batchId"]
    assert [s["batchID"] for s in r["stamps"]] == [batch]
    assert r["stamp"] == r["stamps"][0]
    assert (r["stamp"]["label"], r["stamp"]["depth"], r["stamp"]["bucketDepth"], r["stamp"]["usable"]) == (
        "bee-js content", 20, 16, True)
    assert r["stamp"]["amount"] == r["amount"] == str(24000 * 17280 + 1)
    assert r["buckets"] == {"depth": 20, "bucketDepth": 16, "upperBound": 16, "count": 65536}
    status, body = dev_daemon.request("GET", f"/batches/{batch}")
    assert status == 200 and json.loads(body)["owner"] == signer.address.hex()

    # /bytes: the reference Bee's splitter gives these bytes at Bee's default level
    data = (scratch / "data.bin").read_bytes()
    assert data[:64].hex() == r["dataHex"] and len(data) == r["dataSize"] == r["probe"]
    assert r["dataReference"] == split_bytes(data, level=Level.MEDIUM).hex()
    assert r["plainReference"] == r["dataReference"]  # bee-js sends no header for level 0: the default applies
    assert len(r["encryptedReference"]) == 128

    # the single file kept its name and type
    assert r["fileBack"] == {"name": "greeting.txt", "contentType": "text/plain; charset=utf-8"}
    status, body = dev_daemon.request("GET", f"/bzz/{r['fileReference']}/")
    assert status == 200 and body == b"hello from bee-js, as a file"

    # the folder: the manifest Bee writes for these files, read back by bee-js's MantarayNode
    site = scratch / "site"
    files = {p.relative_to(site).as_posix(): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    assert set(r["siteMap"]) == set(files) == {"index.html", "sub/a.txt", "b.bin"}
    types = {"index.html": "text/html; charset=utf-8", "sub/a.txt": "", "b.bin": ""}  # Go's built-in table
    expected = collection_manifest(
        [CollectionFile(p, split_bytes(d, level=Level.MEDIUM), types[p], p.split("/")[-1]) for p, d in files.items()],
        index_document="index.html", save=lambda node: split_bytes(node, level=Level.MEDIUM),
    )
    assert r["siteReference"] == expected.store().hex()
    for path, data_ in files.items():
        assert r["siteMap"][path] == split_bytes(data_, level=Level.MEDIUM).hex()
        assert r["siteMetadata"][path] == {"Content-Type": types[path], "Filename": path.split("/")[-1]}
    assert r["siteDocs"] == {"indexDocument": "index.html", "errorDocument": None}
    assert r["subFile"]["name"] == "a.txt"

    # bee-js's own manifest resolves here, path by path, with its metadata
    assert r["mantarayMap"] == {p: f["reference"] for p, f in r["mantarayForks"].items()}
    for path, f in r["mantarayForks"].items():
        status, body = dev_daemon.request("GET", f"/bzz/{r['mantarayReference']}/{path}")
        assert status == 200 and body.decode() == f["body"]
    status, body = dev_daemon.request("GET", f"/bzz/{r['mantarayReference']}/")
    assert status == 200 and body == b"# readme"  # its index document
    status, _ = dev_daemon.request("GET", f"/bzz/{r['streamedReference']}/index.html")
    assert status == 200

    # top-up and dilution went through, and the uploads used the batch
    after = r["stampAfter"]
    assert after["depth"] == 21 and after["utilization"] >= 1

    # errors reached bee-js as BeeResponseError with the daemon's JSON
    errors = r["errors"]
    assert errors["missingData"]["status"] == 404
    assert errors["missingPath"]["status"] == 404
    assert errors["unknownBatch"]["status"] == 404
    assert "batch with id not found" in errors["unknownBatch"]["responseBody"]["message"]
