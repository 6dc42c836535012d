"""The ACT controller over a chunk store (``chunkstore.content.act``), as Bee's ``pkg/accesscontrol`` behaves:
history lookups (Bee's ``TestMultiNodeHistoryLookup``), the ACT as stored (a simple manifest file), grant and
revoke (``controller.go: UpdateHandler``), and what a grantee's own node can open."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import coincurve
import pytest

from chunkstore.content.act import (
    ENCRYPTED_GL_REF_KEY,
    ActController,
    ActNotFound,
    ActStorage,
    History,
    InvalidTimestamp,
    Kvs,
    NoGranteeFound,
    NothingToSave,
)
from chunkstore.swarm import act as actfmt
from chunkstore.swarm.file import join_bytes
from chunkstore.swarm.mantaray import Manifest

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "testdata" / "act" / "bee_accesscontrol_vectors.json").read_text()
)
KEYS = [bytes.fromhex(k) for k in VECTORS["private_keys"]]


def _unix(date: str) -> int:
    return int(datetime.fromisoformat(date).replace(tzinfo=UTC).timestamp())


class Chunks(dict[bytes, bytes]):
    def storage(self) -> ActStorage:
        return ActStorage(get=self.__getitem__, put=self.__setitem__)

    def reader(self) -> ActStorage:
        """A fresh read-only view: nothing from a writer's memory."""
        return ActStorage(get=self.__getitem__)


def _pub(private: bytes) -> coincurve.PublicKey:
    return coincurve.PrivateKey(private).public_key


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_history_lookup_is_bees():
    """TestMultiNodeHistoryLookup: the newest entry at or before the time, the oldest before them all;
    stored and read back from a fresh view (TestHistoryStore)."""
    chunks = Chunks()
    history = History(chunks.storage())
    entries = VECTORS["history"]["entries"]
    for e in entries:
        history.add(e["ref_ascii"].encode(), _unix(e["date"]), e["metadata"])
    reference = history.store()
    for h in (history, History(chunks.reader(), reference)):
        for lookup in VECTORS["history"]["lookups"]:
            want = entries[lookup["expect"]]
            assert h.lookup(_unix(lookup["date"])) == (want["ref_ascii"].encode(), want["metadata"])
    with pytest.raises(InvalidTimestamp):
        history.lookup(0)
    with pytest.raises(ActNotFound):
        History(chunks.storage()).lookup(5)  # an empty history has no entry
    # the paths are the reversed times, in a plain (zero-key) mantaray manifest
    opened = Manifest.open(reference, load=chunks.reader().load)
    paths = [p for p, _ in opened.entries()]
    assert paths == sorted(actfmt.history_path(_unix(e["date"])) for e in entries)


def test_an_upload_stores_a_new_history_and_act_as_bee_does():
    """UploadHandler with no history: a new ACT holding the publisher's entry (a random access key
    encrypted with its decryption key) saved as a simple-manifest file, one history entry at now."""
    chunks = Chunks()
    access_key = bytes(range(32))
    node = ActController(KEYS[0], clock=Clock(1_700_000_000), random_key=lambda n: access_key[:n])
    content = bytes.fromhex(VECTORS["test_reference"])
    encrypted, history_ref = node.upload(chunks.storage(), content, None)
    assert encrypted == actfmt.transcrypt_reference(access_key, content) != content
    manifest = Manifest.open(history_ref, load=chunks.reader().load)
    ((path, entry),) = list(manifest.entries())
    assert path == b"9223372035154775807" and dict(entry.metadata) == {}
    lookup, decryption = actfmt.access_keys(KEYS[0], _pub(KEYS[0]))
    expected_kvs = json.dumps(
        {"entries": {lookup.hex(): {"reference": actfmt.transcrypt_reference(decryption, access_key).hex()}}},
        separators=(",", ":"),
    ).encode()
    assert join_bytes(entry.reference, chunks.__getitem__) == expected_kvs
    # the same history again: the same access key, nothing new stored
    stored = len(chunks)
    again = node.upload(chunks.storage(), content, history_ref)
    assert again == (encrypted, history_ref) and len(chunks) == stored
    assert node.download(chunks.reader(), encrypted, _pub(KEYS[0]), history_ref, 1_700_000_000) == content


def test_grant_then_revoke_as_bees_update_handler():
    chunks = Chunks()
    clock = Clock(1_700_000_000)
    publisher = ActController(KEYS[0], clock=clock)
    grantee1, grantee2 = ActController(KEYS[1]), ActController(KEYS[2])
    pub0, pub1, pub2 = (_pub(k) for k in KEYS)

    gl, history1 = publisher.update(chunks.storage(), None, None, [pub1, pub2, pub1], [])
    assert len(gl) == 64  # an encrypted grantee list: 64-byte reference, encrypted again for the publisher
    assert [actfmt.uncompressed(k) for k in publisher.grantees(chunks.reader(), gl)] == [
        actfmt.uncompressed(pub1),
        actfmt.uncompressed(pub2),
    ]
    (key_for_publisher,) = actfmt.session_keys(KEYS[0], pub0, [b"\x01"])
    plain_gl = actfmt.transcrypt_reference(key_for_publisher, gl)
    assert join_bytes(plain_gl, chunks.__getitem__) == actfmt.encode_grantees([pub1, pub2])
    # the history entry names the encrypted list
    act_ref, metadata = History(chunks.reader(), history1).lookup(clock.now)
    assert metadata == {ENCRYPTED_GL_REF_KEY: gl.hex()}
    assert len(Kvs.open(chunks.reader(), act_ref).entries) == 3  # publisher and both grantees

    clock.now += 10
    content1 = bytes(range(32))
    enc1, same = publisher.upload(chunks.storage(), content1, history1)
    assert same == history1
    for node in (publisher, grantee1, grantee2):
        assert node.download(chunks.reader(), enc1, pub0, history1, clock.now) == content1
    stranger = ActController(bytes([9]) * 32)
    with pytest.raises(ActNotFound):
        stranger.download(chunks.reader(), enc1, pub0, history1, clock.now)
    with pytest.raises(ActNotFound):  # the publisher's key names the ACT: a wrong one finds no entry
        grantee1.download(chunks.reader(), enc1, pub2, history1, clock.now)

    clock.now += 10
    gl2, history2 = publisher.update(chunks.storage(), gl, history1, [], [pub2])
    assert [actfmt.uncompressed(k) for k in publisher.grantees(chunks.reader(), gl2)] == [actfmt.uncompressed(pub1)]
    clock.now += 10
    content2 = bytes(range(1, 33))
    enc2, _ = publisher.upload(chunks.storage(), content2, history2)
    assert grantee1.download(chunks.reader(), enc2, pub0, history2, clock.now) == content2
    with pytest.raises(ActNotFound):  # revoked: the new ACT has no entry for it
        grantee2.download(chunks.reader(), enc2, pub0, history2, clock.now)
    # what was granted before stays open at its time (the older history entry)
    assert grantee2.download(chunks.reader(), enc1, pub0, history2, clock.now - 20) == content1
    # a revoke gave a new access key: the older content does not decrypt with the newest ACT
    assert publisher.download(chunks.reader(), enc1, pub0, history2, clock.now) != content1


def test_update_refusals_are_bees():
    chunks = Chunks()
    publisher = ActController(KEYS[0], clock=Clock(1_700_000_000))
    pub1 = _pub(KEYS[1])
    with pytest.raises(NoGranteeFound):  # a revoke from an empty list
        publisher.update(chunks.storage(), None, None, [], [pub1])
    gl, history = publisher.update(chunks.storage(), None, None, [pub1], [])
    with pytest.raises(NothingToSave):  # nothing added nor revoked: the ACT from the history has no new entry
        publisher.update(chunks.storage(), gl, history, [], [])
    # an empty list with no history is stored (the new ACT holds the publisher)
    empty, _ = publisher.update(chunks.storage(), None, None, [], [])
    assert publisher.grantees(chunks.reader(), empty) == []
