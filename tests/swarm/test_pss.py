"""PSS trojan chunks: what ``wrap`` makes, ``unwrap`` opens, for the right key and topic only."""

from __future__ import annotations

import os

import coincurve
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.swarm import pss
from chunkstore.swarm.bmt import chunk_hash
from chunkstore.swarm.encryption import transcrypt
from chunkstore.swarm.keccak import keccak256

KEY = coincurve.PrivateKey(bytes.fromhex("2a" * 32))


@settings(max_examples=25, deadline=None)
@given(msg=st.binary(max_size=pss.MAX_PAYLOAD), name=st.text(min_size=1, max_size=20),
       target=st.binary(min_size=1, max_size=1))
def test_a_message_wrapped_for_a_key_opens_with_that_key_only(msg, name, target):
    topic = pss.topic_of(name)
    address, data = pss.wrap(topic, msg, KEY.public_key, [target])
    assert len(data) == 4104 and chunk_hash(data) == address and address[:1] == target
    other_topic = pss.topic_of(name + "!")
    assert pss.unwrap(data, [KEY], [other_topic, topic]) == (topic, msg)
    assert pss.unwrap(data, [coincurve.PrivateKey()], [topic]) is None  # another key
    assert pss.unwrap(data, [KEY], [other_topic]) is None  # another topic


def test_the_layout_is_the_references():
    """hint | nonce | ephemeral x | ciphertext, the hint being keccak(key | topic)[:8] and the span of the CAC."""
    topic = pss.topic_of("layout")
    handed = []

    def randomness(n: int) -> bytes:  # the first 32 bytes asked for are the ephemeral key
        handed.append(n)
        return bytes.fromhex("11" * 32) if len(handed) == 1 else os.urandom(n)

    address, data = pss.wrap(topic, b"payload", KEY.public_key, [b"\x07", b"\x09"], random_bytes=randomness)
    eph = coincurve.PrivateKey(bytes.fromhex("11" * 32))
    x = int.from_bytes(KEY.public_key.multiply(eph.secret).format(compressed=False)[1:33], "big")
    key = keccak256(x.to_bytes((x.bit_length() + 7) // 8, "big"), topic)
    assert data[:8] == keccak256(key, topic)[:8]
    assert data[40:72] == eph.public_key.format(compressed=True)[1:]
    assert data[36] & 1 == eph.public_key.format(compressed=True)[0] & 1  # nonce byte 28 carries the parity
    plain = transcrypt(key, data[72:72 + 32 + 7])
    assert plain[:2] == (7).to_bytes(2, "big") and plain[2:32] == keccak256(b"payload")[2:] and plain[32:] == b"payload"
    assert address[:1] in (b"\x07", b"\x09")


def test_without_a_recipient_anyone_with_the_topic_opens_it():
    topic = pss.topic_of("public")
    _, data = pss.wrap(topic, b"to all", pss.topic_key(topic).public_key, [b"\x00"])
    assert pss.unwrap(data, [coincurve.PrivateKey()], [topic]) == (topic, b"to all")


@pytest.mark.parametrize(("msg", "targets", "match"), [
    (b"x" * (pss.MAX_PAYLOAD + 1), [b"\x01"], "cannot be greater than 4000"),
    (b"x", [], "cannot be empty"),
    (b"x", [b"\x01", b"\x01\x02"], "different length"),
    (b"x", [b"\x01\x02\x03\x04"], "1 to 3 bytes"),
])  # fmt: skip
def test_refusals(msg, targets, match):
    with pytest.raises(pss.PssError, match=match):
        pss.wrap(pss.topic_of("t"), msg, KEY.public_key, targets)


def test_mining_stops_when_given_up():
    with pytest.raises(pss.PssError, match="given up"):
        pss.wrap(pss.topic_of("t"), b"x", KEY.public_key, [b"\x01\x02\x03"], give_up=lambda: True)


def test_chunks_that_are_no_trojan_do_not_open():
    topic = pss.topic_of("t")
    assert pss.unwrap(b"short", [KEY], [topic]) is None
    assert pss.unwrap(os.urandom(4104), [KEY], [topic]) is None
