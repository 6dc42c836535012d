"""Hypothesis properties of the mantaray trie and its serialisation."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from chunkstore.swarm.mantaray import (
    InvalidEntry,
    InvalidManifest,
    Manifest,
    ManifestNotFound,
    Node,
    decode_metadata,
    encode_metadata,
    marshal_node,
    trie,
    unmarshal_node,
)
from tests.swarm.manifesthelpers import HashNodes, WideNodes

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Paths over a small alphabet share prefixes often, which is what exercises edge splits;
# a few arbitrary bytes (NUL, 0xff) keep the byte-level cases in.
path_bytes = st.binary(min_size=1, max_size=70) | st.lists(
    st.sampled_from([b"a", b"b", b"/", b".", b"\x00", b"\xff", b"ab", b"img/", b"x" * 31]), min_size=1, max_size=8
).map(b"".join)
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
metadata = st.none() | st.dictionaries(text, text, max_size=3)


def tree(width: int) -> st.SearchStrategy[dict[bytes, tuple[bytes, dict[str, str] | None]]]:
    return st.dictionaries(path_bytes, st.tuples(st.binary(min_size=width, max_size=width), metadata), max_size=25)


def build(
    entries: dict[bytes, tuple[bytes, dict[str, str] | None]],
    store: HashNodes,
    *,
    encrypted: bool = False,
) -> Manifest:
    m = Manifest.new(save=store.save, load=store.load, encrypted=encrypted)
    for path, (entry, meta) in entries.items():
        m.add(path, entry, meta)
    return m


def logical(m: Manifest) -> dict[bytes, tuple[bytes, dict[str, str]]]:
    return {path: (e.reference, dict(e.metadata)) for path, e in m.entries()}


def expected(entries: dict[bytes, tuple[bytes, dict[str, str] | None]]) -> dict[bytes, tuple[bytes, dict[str, str]]]:
    return {path: (entry, dict(meta or {})) for path, (entry, meta) in entries.items()}


@SETTINGS
@given(tree(32))
def test_every_added_path_is_found_before_and_after_store(entries: dict) -> None:
    store = HashNodes()
    m = build(entries, store)
    assert logical(m) == expected(entries)
    reopened = Manifest.open(m.store(), load=store.load)
    for path, (entry, meta) in entries.items():
        found = reopened.lookup(path)
        assert found.reference == entry and dict(found.metadata) == (meta or {})
    assert logical(reopened) == expected(entries)


@SETTINGS
@given(tree(32))
def test_every_stored_node_unmarshals_and_marshals_to_the_same_bytes(entries: dict) -> None:
    store = HashNodes()
    build(entries, store).store()
    for data in store.nodes.values():
        node = Node()
        unmarshal_node(node, data, 32)
        for fork in (node.forks or {}).values():
            assert fork.node.ref in store.nodes
        assert marshal_node(node, lambda: pytest.fail("keys come from the data")) == data


@SETTINGS
@given(tree(32), st.data())
def test_removed_path_is_gone_and_the_rest_stay(entries: dict, data: st.DataObject) -> None:
    assume(entries)
    store = HashNodes()
    m = build(entries, store)
    gone = data.draw(st.sampled_from(sorted(entries)))
    m.remove(gone)
    with pytest.raises(ManifestNotFound):
        m.lookup(gone)
    rest = expected(entries)
    del rest[gone]
    assert logical(m) == rest
    reopened = Manifest.open(m.store(), load=store.load, save=store.save)
    with pytest.raises(ManifestNotFound):
        reopened.lookup(gone)
    assert logical(reopened) == rest
    # Removing from a stored manifest: read back, change, store again.
    if rest:
        again = data.draw(st.sampled_from(sorted(rest)))
        reopened.remove(again)
        del rest[again]
        assert logical(Manifest.open(reopened.store(), load=store.load)) == rest


@SETTINGS
@given(tree(64))
def test_obfuscated_and_plain_give_the_same_tree(entries: dict) -> None:
    plain_store, secret_store = WideNodes(), WideNodes()
    plain = build(entries, plain_store)
    secret = build(entries, secret_store, encrypted=True)
    plain_ref, secret_ref = plain.store(), secret.store()
    assert logical(Manifest.open(plain_ref, load=plain_store.load)) == expected(entries)
    assert logical(Manifest.open(secret_ref, load=secret_store.load)) == expected(entries)
    keys = {data[:32] for data in secret_store.nodes.values()}
    assert bytes(32) not in keys, "every node of an encrypted manifest has its own random key"
    assert {data[:32] for data in plain_store.nodes.values()} == {bytes(32)}


@SETTINGS
@given(tree(32), tree(32))
def test_adding_after_a_store_equals_adding_at_once(first: dict, second: dict) -> None:
    """Store, reopen, add more: the stored manifest must be readable with all entries."""
    store = HashNodes()
    m = build(first, store)
    m.store()
    for path, (entry, meta) in second.items():
        m.add(path, entry, meta)
    merged = expected(first)
    for path, (entry, meta) in second.items():
        old_meta = merged.get(path, (b"", {}))[1]
        # Re-adding without metadata keeps the old metadata, as the reference does.
        merged[path] = (entry, dict(meta) if meta else old_meta)
    assert logical(Manifest.open(m.store(), load=store.load)) == merged


@SETTINGS
@given(st.dictionaries(text, text, max_size=6))
def test_metadata_json_is_go_compatible(meta: dict[str, str]) -> None:
    raw = encode_metadata(meta)
    assert json.loads(raw) == meta
    assert decode_metadata(raw) == meta
    assert not any(ch in raw for ch in b"<>&") and all(ch >= 0x20 for ch in raw)
    assert list(json.loads(raw)) == sorted(meta, key=lambda k: k.encode())


def test_metadata_go_escapes() -> None:
    raw = encode_metadata({"b": '<a href="x">&\u2028\x7f\x01\b\f\t', "a": "\udcff"})
    assert raw == b'{"a":"\\ufffd","b":"\\u003ca href=\\"x\\"\\u003e\\u0026\\u2028\x7f\\u0001\\b\\f\\t"}'


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [(b"null", None), (b'{"a":null}\n\n', {"a": ""}), (b'{"a":"\\ud800"}', {"a": "\ufffd"})],
)
def test_metadata_go_decoding(raw: bytes, parsed: dict | None) -> None:
    assert decode_metadata(raw) == parsed


@pytest.mark.parametrize("raw", [b"", b"[]", b'{"a":1}', b'{"a":"b"} x', b"\n\n"])
def test_metadata_refused(raw: bytes) -> None:
    with pytest.raises(InvalidManifest):
        decode_metadata(raw)


def test_metadata_padding_follows_bee() -> None:
    from chunkstore.swarm.mantaray.marshal import padded_metadata

    for n in range(0, 200):
        meta = {"k": "v" * n}
        raw = encode_metadata(meta)
        out = padded_metadata(meta)
        assert int.from_bytes(out[:2], "big") == len(out) - 2
        assert out[2 : 2 + len(raw)] == raw and set(out[2 + len(raw) :]) <= {10}
        with_size = len(raw) + 2
        # bee pads to a multiple of 32, and adds a whole 32 when already aligned above 32.
        want = 32 if with_size <= 32 else (with_size // 32 + 1) * 32
        assert len(out) == want


def test_oversized_metadata_is_refused_at_add_time_on_store() -> None:
    store = HashNodes()
    m = Manifest.new(save=store.save, load=store.load)
    m.add("big", bytes(32), {"k": "v" * 70000})
    with pytest.raises(InvalidEntry):
        m.store()


def test_entry_width_mismatch_is_refused_without_change() -> None:
    store = HashNodes()
    m = Manifest.new(save=store.save, load=store.load)
    m.add("a/b", bytes(32))
    before = logical(m)
    with pytest.raises(InvalidEntry):
        m.add("a/c", bytes(64))
    assert logical(m) == before
    assert store.nodes == {}


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([0, 32, 64]))
def test_unmarshal_of_arbitrary_bytes_only_raises_invalid_manifest(data: bytes, own: int) -> None:
    from chunkstore.swarm.mantaray import VERSION_02_HASH

    for candidate in (data, bytes(32) + VERSION_02_HASH + data):
        try:
            unmarshal_node(Node(), candidate, own)
        except InvalidManifest:
            pass


def test_random_obfuscation_key_source_is_injectable() -> None:
    store = HashNodes()
    key = os.urandom(32)
    m = Manifest.new(save=store.save, load=store.load, encrypted=True, key_source=lambda: key)
    m.add("x", bytes(32))
    ref = m.store()
    assert store.nodes[ref][:32] == key


class _CountingPath(bytes):
    """A path that counts the bytes every slice of it (and of its slices) copies."""

    copied = 0

    def __getitem__(self, key):  # type: ignore[no-untyped-def, override]
        item = super().__getitem__(key)
        if isinstance(key, slice):
            _CountingPath.copied += len(item)
            return _CountingPath(item)
        return item


@pytest.mark.parametrize("separators", [False, True])
def test_a_long_path_is_walked_without_copying_it_edge_by_edge(separators):
    """A 1 MiB PAX name took 1.3 s to add: each 30-byte edge sliced the rest of the path off anew,
    quadratic in its length. The walks now keep an offset: the bytes they copy stay linear."""
    unit = b"abcdefghi/" if separators else b"abcdefghij"
    long_path = _CountingPath(unit * 20_000)  # 200,000 bytes, 6,667 edges
    other = _CountingPath(bytes(long_path)[:-5] + b"other")  # shares all but its end: the add splits edges
    root = Node()
    _CountingPath.copied = 0
    trie.add(root, long_path, os.urandom(32), None, None)
    trie.add(root, other, os.urandom(32), None, None)
    assert len(trie.lookup(root, long_path, None)) == 32 and trie.has_prefix(root, other, None)
    trie.remove(root, long_path, None)
    assert _CountingPath.copied < 10 * len(long_path), _CountingPath.copied


@given(st.binary(min_size=1, max_size=40).map(lambda b: b.replace(b"\x2e", b"/")), st.integers(0, 39))
@SETTINGS
def test_separator_flag_from_offsets_equals_the_flag_from_the_rest(path, at):
    """``add`` sets the split node's flag from the path's last separator instead of scanning the rest."""
    assume(at < len(path))
    sliced, offset = Node(), Node()
    sliced.update_path_separator_flag(path[at:])
    offset.set_path_separator_flag(path[at] != 0x2F and path.rfind(b"/") > at)
    assert sliced.node_type == offset.node_type
