"""Mantaray format and trie behaviour against the reference implementations' own tests."""

from __future__ import annotations

import pytest

from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.mantaray import (
    VERSION_01_HASH,
    VERSION_02_HASH,
    InvalidManifest,
    Manifest,
    ManifestNotFound,
    Node,
    add,
    has_prefix,
    lookup,
    lookup_node,
    marshal_node,
    remove,
    unmarshal_node,
    walk,
)
from tests.swarm.manifesthelpers import ChunkNodes, HashNodes, WideNodes, padded, read_vectors

MV = read_vectors("bee_mantaray_vectors.json")


def test_version_hashes() -> None:
    for name, digest in MV["version_hashes"].items():
        assert keccak256(name.encode()).hex() == digest
    assert VERSION_01_HASH.hex() == MV["version_hashes"]["mantaray:0.1"][:62]
    assert VERSION_02_HASH.hex() == MV["version_hashes"]["mantaray:0.2"][:62]


def _marshal_case_trie() -> Node:
    case = MV["marshal"]
    root = Node()
    for e in case["entries"]:
        path = e["path"].encode()
        add(root, path, padded(path), e.get("metadata"), None)
    # bee's TestMarshal stubs fork references: the i-th fork written gets 31 zero bytes then i.
    assert root.forks is not None
    for i, b in enumerate(sorted(root.forks)):
        root.forks[b].node.ref = bytes(31) + bytes([i])
    return root


def test_marshal_matches_bee() -> None:
    case = MV["marshal"]
    key = bytes.fromhex(case["obfuscation_key"])
    assert marshal_node(_marshal_case_trie(), lambda: key).hex() == case["output_v02"]


@pytest.mark.parametrize("version", ["output_v01", "output_v02"])
def test_unmarshal_bee_output(version: str) -> None:
    case = MV["marshal"]
    node = Node()
    unmarshal_node(node, bytes.fromhex(case[version]))
    assert node.obfuscation_key == bytes.fromhex(case["obfuscation_key"])
    assert node.forks is not None and len(node.forks) == len(case["entries"])
    for e in case["entries"]:
        path = e["path"].encode()
        fork = node.forks[path[0]]
        assert fork.prefix == path
        if version == "output_v02" and "metadata" in e:
            assert fork.node.metadata == e["metadata"]
    # The root entry was never set: bee writes it as 32 zero bytes.
    assert node.entry == bytes(32)


def test_marshal_roundtrip_of_bee_output_is_identical() -> None:
    case = MV["marshal"]
    node = Node()
    unmarshal_node(node, bytes.fromhex(case["output_v02"]))
    assert marshal_node(node, lambda: pytest.fail("a loaded node keeps its key")).hex() == case["output_v02"]


@pytest.mark.parametrize("case", MV["unmarshal_cases"], ids=lambda c: c["name"])
def test_unmarshal_fork_metadata_sizes(case: dict) -> None:
    node = Node()
    if case["error"]:
        with pytest.raises(InvalidManifest):
            unmarshal_node(node, bytes.fromhex(case["data"]))
        assert node.forks == {} and node.entry == b""  # a refused parse leaves the node as it was
    else:
        unmarshal_node(node, bytes.fromhex(case["data"]))
        assert node.forks is not None
        (fork,) = node.forks.values()
        assert fork.prefix == b"/" and "website-index-document" in (fork.node.metadata or {})


@pytest.mark.parametrize("data", [b"", bytes(63), bytes(64)], ids=["nil", "short header", "zero header"])
def test_unmarshal_short_or_unknown(data: bytes) -> None:
    with pytest.raises(InvalidManifest):
        unmarshal_node(Node(), data)


def test_truncated_bee_output_is_refused_at_every_length() -> None:
    full = bytes.fromhex(MV["marshal"]["output_v02"])
    for n in range(len(full)):
        node = Node()
        try:
            unmarshal_node(node, full[:n])
        except InvalidManifest:
            continue
        # Every fork the bitmap announces must be present in full, so no shorter input parses.
        pytest.fail(f"{n}-byte prefix parsed")


def test_bee_directory_node_read_and_rewritten_byte_for_byte() -> None:
    case = MV["beejs_reads_bee_directory_node"]
    data = bytes.fromhex(case["data"])
    node = Node()
    unmarshal_node(node, data, 32)
    assert node.forks is not None
    assert {chr(b): f.prefix.decode() for b, f in node.forks.items()} == case["forks"]
    assert {f.node.node_type for f in node.forks.values()} == {case["fork_type"]}
    assert marshal_node(node, lambda: bytes(32)) == data


# bee's node_test.go / persist_test.go / walker_test.go cases

ADD_CASES = {
    "a": [b"aaaaaa", b"aaaaab", b"abbbb", b"abbba", b"bbbbba", b"bbbaaa", b"bbbaab", b"aa", b"b"],
    "simple": [b"/", b"index.html", b"img/1.png", b"img/2.png", b"robots.txt"],
    "nested-value-node-is-recognized": [b"." * 30 + b"@", b"." * 30],
    "nested-prefix-is-not-collapsed": [b"index.html", b"img/1.png", b"img/2/test1.png", b"img/2/test2.png", b"robots.txt"],
    "conflicting-path": [b"app.js.map", b"app.js"],
    "spa-website": [
        b"css/", b"css/app.css", b"favicon.ico", b"img/", b"img/logo.png", b"index.html", b"js/",
        b"js/chunk-vendors.js.map", b"js/chunk-vendors.js", b"js/app.js.map", b"js/app.js",
    ],
}  # fmt: skip


def test_nil_path_lookup() -> None:
    assert lookup(Node(), b"", None) == b""


@pytest.mark.parametrize("name", sorted(ADD_CASES))
def test_add_and_lookup_node(name: str) -> None:
    paths = ADD_CASES[name]
    root = Node()
    for i, path in enumerate(paths):
        add(root, path, padded(path), None, None)
        for earlier in paths[: i + 1]:
            node = lookup_node(root, earlier, None)
            assert node.is_value
            assert node.entry == padded(earlier)


@pytest.mark.parametrize("name", sorted(ADD_CASES))
def test_add_and_lookup_node_after_save(name: str) -> None:
    paths = ADD_CASES[name]
    store = HashNodes()
    m = Manifest.new(save=store.save, load=store.load)
    for path in paths:
        m.add(path, padded(path))
    reopened = Manifest.open(m.store(), load=store.load)
    for path in paths:
        node = reopened.lookup_node(path)
        assert node.is_value and node.entry == padded(path)


def test_persist_idempotence() -> None:
    """bee's TestPersistIdempotence: saving between adds changes nothing observable."""
    store = HashNodes()
    m = Manifest.new(save=store.save, load=store.load)
    paths = [b"aa", b"b", b"aaaaaa", b"aaaaab", b"abbbb", b"abbba", b"bbbbba", b"bbbaaa", b"bbbaab"]
    for path in paths:
        m.store()
        m.add(path, path.ljust(32, b"\0"))
    m.store()
    for path in paths:
        assert m.lookup(path).reference == path.ljust(32, b"\0")


REMOVE_CASES = {
    "simple": (
        [(b"/", {"index-document": "index.html"}), (b"index.html", None), (b"img/1.png", None),
         (b"img/2.png", None), (b"robots.txt", None)],
        [b"img/2.png"],
    ),
    "nested-prefix-is-not-collapsed": (
        [(b"index.html", None), (b"img/1.png", None), (b"img/2/test1.png", None), (b"img/2/test2.png", None),
         (b"robots.txt", None)],
        [b"img/2/test1.png"],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(REMOVE_CASES))
def test_remove(name: str) -> None:
    entries, removed = REMOVE_CASES[name]
    root = Node()
    for path, metadata in entries:
        add(root, path, padded(path), metadata, None)
    for path in removed:
        remove(root, path, None)
        with pytest.raises(ManifestNotFound):
            lookup(root, path, None)
    for path, _ in entries:
        if path not in removed:
            assert lookup(root, path, None) == padded(path)


@pytest.mark.parametrize("name", sorted(REMOVE_CASES))
def test_persist_remove(name: str) -> None:
    entries, removed = REMOVE_CASES[name]
    store = HashNodes()
    m = Manifest.new(save=store.save, load=store.load)
    for path, metadata in entries:
        m.add(path, padded(path), metadata)
    second = Manifest.open(m.store(), load=store.load, save=store.save)
    for path in removed:
        second.remove(path)
    third = Manifest.open(second.store(), load=store.load)
    for path in removed:
        with pytest.raises(ManifestNotFound):
            third.lookup(path)
    for path, metadata in entries:
        if path not in removed:
            assert third.lookup(path).reference == padded(path)
            assert dict(third.lookup(path).metadata) == (metadata or {})


def test_persist_directory_only_adds() -> None:
    """bee's TestPersistDirectoryOnlyAdds: metadata-only entries still persist their forks."""
    store = ChunkNodes()
    m = Manifest.new(save=store.save, load=store.load)
    for path in (b"foo", b"bar", b"baz"):
        m.add(path, b"", {"k": "v"})
    reopened = Manifest.open(m.store(), load=store.load)
    for path in (b"foo", b"bar", b"baz"):
        assert reopened.lookup_node(path).metadata == {"k": "v"}


@pytest.mark.parametrize(
    ("paths", "prefix", "expected"),
    [
        ([b"index.html", b"img/1.png", b"img/2.png", b"robots.txt"], b"img/", True),
        ([b"index.html", b"img/1.png", b"img/2.png", b"robots.txt"], b"images/", False),
        ([b"some-path/file.ext"], b"some-path/", True),
        ([b"some-path/file.ext"], b"some-path/file", True),
        ([b"some-path/file.ext"], b"some-other-path/", False),
    ],
)
def test_has_prefix(paths: list[bytes], prefix: bytes, expected: bool) -> None:
    root = Node()
    for path in paths:
        add(root, path, padded(path), None, None)
    assert has_prefix(root, prefix, None) is expected


WALK_ADD = [
    b"index.html.backup", b"index.html", b"img/test/oho.png", b"img/test/old/test.png.backup",
    b"img/test/old/test.png", b"img/2.png", b"img/1.png", b"robots.txt",
]  # fmt: skip
WALK_EXPECTED = [
    b"", b"i", b"img/", b"img/1.png", b"img/2.png", b"img/test/o", b"img/test/oho.png",
    b"img/test/old/test.png", b"img/test/old/test.png.backup", b"index.html", b"index.html.backup", b"robots.txt",
]  # fmt: skip


def test_walk_order_matches_bee() -> None:
    root = Node()
    for path in WALK_ADD:
        add(root, path, padded(path), None, None)
    assert [p for p, _ in walk(root, None)] == WALK_EXPECTED
    store = HashNodes()
    m = Manifest.new(save=store.save, load=store.load)
    for path in WALK_ADD:
        m.add(path, padded(path))
    assert [p for p, _ in Manifest.open(m.store(), load=store.load).walk()] == WALK_EXPECTED


def test_beejs_written_manifests_are_read() -> None:
    """Manifests bee-js 12.3.1's MantarayNode writes, incl. its entry-size-0 "/" nodes with forks."""
    vectors = read_vectors("beejs_12.3.1_mantaray.json")
    assert vectors["cases"]
    for case in vectors["cases"]:
        nodes = {bytes.fromhex(k): bytes.fromhex(v) for k, v in case["nodes"].items()}
        store = ChunkNodes()
        for data in nodes.values():
            store.save(data)
        assert set(store.nodes) == set(nodes), "bee-js node addresses are single-chunk BMT hashes"
        m = Manifest.open(bytes.fromhex(case["root"]), load=store.load)
        for path, expected in case["entries"].items():
            entry = m.lookup(path)
            assert entry.reference == bytes.fromhex(expected["reference"]) or not any(entry.reference)
            assert dict(entry.metadata) == (expected["metadata"] or {})
        value_paths = {p.decode() for p, _ in m.entries()}
        assert set(case["entries"]) <= value_paths


def test_beejs_slash_node_with_forks_needs_the_beejs_reading() -> None:
    case = next(c for c in read_vectors("beejs_12.3.1_mantaray.json")["cases"] if "slash" in c["name"])
    slash_nodes = [bytes.fromhex(v) for v in case["nodes"].values() if bytes.fromhex(v)[63] == 0]
    assert slash_nodes, "bee-js writes the '/' node with entry size 0"
    node = Node()
    unmarshal_node(node, slash_nodes[0], 32)
    assert node.forks and {f.prefix for f in node.forks.values()} == {b"index.html", b"about.html"}


GO_CASES = read_vectors("go_mantaray_generated.json")["cases"]


@pytest.mark.parametrize("case", GO_CASES, ids=lambda c: c["name"])
def test_trie_building_matches_bee_code(case: dict) -> None:
    """Replaying each case's adds and saves gives the root bee's own mantaray code saved."""
    store = WideNodes() if case["wide"] else HashNodes()
    m = Manifest.new(save=store.save, load=store.load)
    expected: dict[bytes, bytes] = {}
    for op in case["ops"]:
        if op.get("save"):
            m.store()
            continue
        path = op["path"].encode()
        m.add(path, bytes.fromhex(op["entry"]), op.get("metadata"))
        expected[path] = bytes.fromhex(op["entry"])
    assert m.store().hex() == case["root"]
    reopened = Manifest.open(bytes.fromhex(case["root"]), load=store.load)
    # A metadata-only entry reads back as zero bytes of its node's width (or none).
    assert {p: e.reference if any(e.reference) else b"" for p, e in reopened.entries()} == expected


def test_readding_a_stored_leaf_works() -> None:
    """bee's Save fails here (the leaf is changed without being loaded); this trie loads it first."""
    store = HashNodes()
    m = Manifest.new(save=store.save, load=store.load)
    m.add("dir/a.txt", bytes(32))
    m.add("dir/b.txt", bytes(32))
    m.store()
    m.add("dir/a.txt", b"\x01" * 32, {"k": "v"})
    reopened = Manifest.open(m.store(), load=store.load)
    assert reopened.lookup("dir/a.txt").reference == b"\x01" * 32
    assert dict(reopened.lookup("dir/a.txt").metadata) == {"k": "v"}
    assert reopened.lookup("dir/b.txt").reference == bytes(32)
