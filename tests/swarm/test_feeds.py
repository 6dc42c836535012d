"""Feed identifiers, update payloads and their resolution, and the sequence finder's answers and cost."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.feeds import (
    MAX_INDEX,
    V1,
    V2,
    InvalidFeedIndex,
    InvalidFeedTopic,
    InvalidFeedUpdate,
    find_latest,
    index_bytes,
    legacy_payload,
    make_payload_update,
    make_update,
    next_index,
    parse_index,
    parse_update,
    resolve_update,
    topic_from_string,
    update_address,
    update_identifier,
)
from chunkstore.swarm.signer import Signer
from tests.swarm.manifesthelpers import read_vectors

FV = read_vectors("beejs_feed_vectors.json")
OWNER = bytes.fromhex("8d3766440f0d7b949a5e32995d09619a7f86e632")
TOPIC = topic_from_string("testtopic")


@pytest.mark.parametrize("case", FV["topics"], ids=lambda c: c["text"])
def test_topic_from_string(case: dict) -> None:
    assert topic_from_string(case["text"]).hex() == case["topic"]


@pytest.mark.parametrize(("index", "following"), FV["index_next"])
def test_index_next(index: str, following: str) -> None:
    assert index_bytes(next_index(parse_index(index))).hex() == following


def test_index_encoding_and_errors() -> None:
    assert index_bytes(1) == bytes(7) + b"\x01"
    assert parse_index(bytes(7) + b"\x01") == 1
    assert next_index(None) == 0
    for bad in (-1, MAX_INDEX + 1):
        with pytest.raises(InvalidFeedIndex):
            index_bytes(bad)
    for raw in ("00", "zz" * 8, bytes(9), "0x00000000000001"):
        with pytest.raises(InvalidFeedIndex):
            parse_index(raw)
    with pytest.raises(InvalidFeedTopic):
        update_address(OWNER[:19], TOPIC, 0)
    with pytest.raises(InvalidFeedTopic):
        update_identifier(b"", 0)


@pytest.mark.parametrize("case", FV["updates"], ids=lambda c: c["identifier"][:8])
def test_update_vector(case: dict) -> None:
    signer = Signer(bytes.fromhex(case["private_key"]))
    assert signer.address.hex() == case["owner"]
    topic = bytes.fromhex(case["topic"])
    assert update_identifier(topic, case["index"]).hex() == case["identifier"]
    assert update_address(signer.address, topic, case["index"]).hex() == case["address"]
    soc = make_update(signer, topic, case["index"], bytes.fromhex(case["wrapped_data"]))
    assert soc.signature.hex() == case["signature"]
    assert soc.address.hex() == case["address"]
    parsed = parse_update(soc.data, signer.address, topic, case["index"])
    assert parsed.wrapped_data.hex() == case["wrapped_data"]
    # The payload is v1: timestamp | zero reference.
    wrapped = bytes.fromhex(case["wrapped_data"])
    assert wrapped[8:] == legacy_payload(bytes(32), int.from_bytes(wrapped[8:16], "big"))


def test_parse_update_refuses_other_updates_and_garbage() -> None:
    signer = Signer(bytes(31) + b"\x07")
    soc = make_payload_update(signer, TOPIC, 3, b"hello")
    assert parse_update(soc.data, signer.address, TOPIC, 3).wrapped_data[8:] == b"hello"
    with pytest.raises(InvalidFeedUpdate):
        parse_update(soc.data, signer.address, TOPIC, 4)
    with pytest.raises(InvalidFeedUpdate):
        parse_update(soc.data, OWNER, TOPIC, 3)
    with pytest.raises(InvalidFeedUpdate):
        parse_update(b"\x00" * 50, signer.address, TOPIC, 3)


def _wrapped(payload: bytes) -> bytes:
    return make_cac(payload)[1]


def test_resolve_v1_when_the_reference_is_retrievable() -> None:
    content, _ = make_cac(b"<h1>hello</h1>")
    for reference in (content, content + bytes(32)):
        resolved = resolve_update(_wrapped(legacy_payload(reference, 121212)), lambda r, ref=reference: r == ref)
        assert (resolved.version, resolved.address, resolved.timestamp, resolved.root_chunk) == (
            V1,
            reference,
            121212,
            None,
        )


def test_resolve_v1_sized_but_unretrievable_is_v2() -> None:
    wrapped = _wrapped(legacy_payload(bytes(32), 1))
    resolved = resolve_update(wrapped, lambda r: False)
    assert resolved.version == V2 and resolved.root_chunk == wrapped
    assert resolved.address == make_cac(wrapped[8:])[0]


@pytest.mark.parametrize("size", [0, 1, 39, 41, 71, 73, 4096])
def test_resolve_other_sizes_are_v2_without_asking(size: int) -> None:
    wrapped = _wrapped(bytes(range(256)) * 16)[: 8 + size]
    wrapped = make_cac(wrapped[8:])[1]
    resolved = resolve_update(wrapped, lambda r: pytest.fail("only v1-sized payloads are dereferenced"))
    assert resolved.version == V2 and resolved.address == make_cac(wrapped[8:])[0]


def test_resolve_v2_root_of_a_larger_tree() -> None:
    # bee-js uploadPayload for data over 4096 bytes wraps the tree's root chunk: span 5000, two child refs.
    root = (5000).to_bytes(8, "little") + bytes(range(64))
    resolved = resolve_update(root, lambda r: False)
    assert resolved.version == V2 and resolved.root_chunk == root


def test_resolve_refuses_short_data() -> None:
    with pytest.raises(InvalidFeedUpdate):
        resolve_update(b"\x01\x02", lambda r: False)


def test_legacy_payload_errors() -> None:
    with pytest.raises(InvalidFeedUpdate):
        legacy_payload(bytes(31), 0)
    with pytest.raises(InvalidFeedUpdate):
        legacy_payload(bytes(32), -1)


class Feed:
    """An in-memory chunk map holding updates 0..n-1 of (OWNER, TOPIC), counting reads."""

    def __init__(self, n: int, skip: frozenset[int] = frozenset()) -> None:
        self.chunks = {update_address(OWNER, TOPIC, i): b"update %d" % i for i in range(n) if i not in skip}
        self.reads = 0

    def get(self, address: bytes) -> bytes | None:
        self.reads += 1
        return self.chunks.get(address)


def test_no_updates() -> None:
    feed = Feed(0)
    found = find_latest(feed.get, OWNER, TOPIC)
    assert (found.index, found.next_index, found.chunk, found.reads) == (None, 0, None, 1)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 254, 255, 256, 257, 511, 1000, 1023, 1024, 1025])
def test_latest_of_n_updates(n: int) -> None:
    feed = Feed(n)
    found = find_latest(feed.get, OWNER, TOPIC)
    assert (found.index, found.next_index, found.chunk) == (n - 1, n, b"update %d" % (n - 1))
    assert found.reads == feed.reads <= 2 * math.ceil(math.log2(n + 1)) + 1


def test_ten_thousand_updates_cost_logarithmic_reads() -> None:
    n = 10_000
    feed = Feed(n)
    found = find_latest(feed.get, OWNER, TOPIC)
    assert (found.index, found.next_index) == (n - 1, n)
    # 1 + 14 doubling probes (1, 3, ..., 8191 found; 16383 missing) + 13 bisection steps.
    assert feed.reads == found.reads == 28
    # The reference node's finder moves at most 255 indexes per round of 8 reads.
    assert found.reads < 8 * (n // 255)


def test_after_hint() -> None:
    feed = Feed(10_000)
    found = find_latest(feed.get, OWNER, TOPIC, after=9_000)
    assert (found.index, found.next_index) == (9_999, 10_000)
    assert found.reads < 28
    # No update at the hint: "no update", next index = the hint, as the reference answers.
    missing = find_latest(feed.get, OWNER, TOPIC, after=20_000)
    assert (missing.index, missing.next_index, missing.chunk, missing.reads) == (None, 20_000, None, 1)


def test_last_possible_index() -> None:
    chunks = {update_address(OWNER, TOPIC, MAX_INDEX): b"last"}
    found = find_latest(chunks.get, OWNER, TOPIC, after=MAX_INDEX)
    assert (found.index, found.next_index, found.chunk) == (MAX_INDEX, 0, b"last")


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 3000), st.integers(0, 3100))
def test_latest_for_any_length_and_hint(n: int, after: int) -> None:
    feed = Feed(n)
    found = find_latest(feed.get, OWNER, TOPIC, after=after)
    if after < n:
        assert (found.index, found.next_index) == (n - 1, n)
        assert found.reads <= 2 * math.ceil(math.log2(n - after + 1)) + 1
    else:
        assert (found.index, found.next_index, found.reads) == (None, after, 1)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 2000), st.data())
def test_a_gap_gives_a_present_update_followed_by_a_missing_one(n: int, data: st.DataObject) -> None:
    gap = data.draw(st.integers(1, n - 1))
    feed = Feed(n, frozenset({gap}))
    found = find_latest(feed.get, OWNER, TOPIC)
    assert found.index is not None
    assert update_address(OWNER, TOPIC, found.index) in feed.chunks
    assert update_address(OWNER, TOPIC, found.index + 1) not in feed.chunks
