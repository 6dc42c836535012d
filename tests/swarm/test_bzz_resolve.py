"""GET /bzz path resolution: index and error documents, directory redirects, headers, feed manifests."""

from __future__ import annotations

import pytest

from chunkstore.swarm.bzz import (
    CollectionFile,
    FeedPointer,
    NotFound,
    Redirect,
    Serve,
    collection_manifest,
    entry_headers,
    feed_manifest,
    feed_pointer,
    file_manifest,
    header_value,
    request_path,
    resolve_path,
)
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.mantaray import Manifest
from tests.swarm.manifesthelpers import ChunkNodes

SITE = ["index.html", "about.html", "img/logo.png", "dir/index.html", "docs/guide/intro.html", "404.html"]


def ref(name: str) -> bytes:
    return make_cac(name.encode())[0]


def site(index: str = "index.html", error: str = "404.html", files: list[str] = SITE) -> Manifest:
    nodes = ChunkNodes()
    entries = [CollectionFile(p, ref(p), "text/html; charset=utf-8", p.rsplit("/", 1)[-1]) for p in files]
    stored = collection_manifest(entries, index_document=index, error_document=error, save=nodes.save).store()
    return Manifest.open(stored, load=nodes.load)


def served(result: object) -> str:
    assert isinstance(result, Serve), result
    assert result.entry.reference == ref(result.path)
    return result.path


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("", "index.html"),
        ("index.html", "index.html"),
        ("about.html", "about.html"),
        ("img/logo.png", "img/logo.png"),
        ("dir/", "dir/index.html"),
        ("dir///", "dir/index.html"),
        ("img/", "404.html"),  # no img/index.html: the error document
        ("nope", "404.html"),
        ("_non_existent_file_path_", "404.html"),
        ("docs/guide/", "404.html"),
    ],
)
def test_site_paths(path: str, want: str) -> None:
    assert served(resolve_path(site(), path)) == want


@pytest.mark.parametrize("path", ["dir", "img", "docs", "docs/guide"])
def test_directory_without_slash_redirects(path: str) -> None:
    assert resolve_path(site(), path) == Redirect(path + "/")


def test_missing_error_document_itself_is_404() -> None:
    m = site(files=["index.html"])
    assert resolve_path(m, "404.html") == NotFound("path address not found")
    assert resolve_path(m, "x") == NotFound("path address not found")


def test_no_index_document() -> None:
    m = site(index="", error="")
    assert resolve_path(m, "") == NotFound("address not found or incorrect")
    assert resolve_path(m, "dir/") == NotFound("path address not found")
    assert served(resolve_path(m, "dir/index.html")) == "dir/index.html"


def test_index_named_path_is_not_doubled() -> None:
    # A path already ending in the index suffix is not retried as path/index.html (and a
    # path starting with "/" is never redirected), so this stored file stays unreachable.
    m = Manifest.new()
    m.add("/x/index.html/index.html", ref("/x/index.html/index.html"))
    m.add("/", b"", {"website-index-document": "index.html"})
    assert resolve_path(m, "/x/index.html") == NotFound("path address not found")
    assert served(resolve_path(m, "/x/index.html/")) == "/x/index.html/index.html"


def test_single_file_manifest_resolution_and_headers() -> None:
    nodes = ChunkNodes()
    stored = file_manifest(ref("f"), "image/jpeg; charset=utf-8", "my-pictures.jpeg", save=nodes.save).store()
    m = Manifest.open(stored, load=nodes.load)
    result = resolve_path(m, "")
    assert isinstance(result, Serve) and result.path == "my-pictures.jpeg"
    assert result.content_type == "image/jpeg; charset=utf-8"
    assert result.content_disposition == 'inline; filename="my-pictures.jpeg"'


def test_single_file_named_with_dot_dot_serves_base_name() -> None:
    m = file_manifest(ref("f"), "image/jpeg", "../../my-pictures.jpeg")
    result = resolve_path(m, "")
    assert isinstance(result, Serve)
    assert result.content_disposition == 'inline; filename="my-pictures.jpeg"'


@pytest.mark.parametrize(
    ("metadata", "want"),
    [
        ({"Filename": 'a"b\\c.txt', "Content-Type": "text/plain"}, ("text/plain", 'inline; filename="a\\"b\\\\c.txt"')),
        ({"Filename": "dir/x.txt"}, (None, 'inline; filename="x.txt"')),
        ({"Content-Type": ""}, ("", None)),
        ({}, (None, None)),
    ],
)
def test_entry_headers(metadata: dict[str, str], want: tuple) -> None:
    assert entry_headers(metadata) == want


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("text/plain", "text/plain"),
        ("a\r\nX-Injected: 1", "a  X-Injected: 1"),  # Go: CR and LF become spaces
        ("a\x00b\x01c\x1fd\x7fe", "a b c d e"),  # what aiohttp refuses besides
        ("a\tb", "a\tb"),  # tab is allowed
        ("  \r\ntext/plain\n\t", "text/plain"),  # Go trims blanks at both ends after the replacement
        ("x\udcffy", "x\ufffdy"),  # a lone surrogate cannot be written as UTF-8
        ("caf\u00e9 \u2028", "caf\u00e9 \u2028"),
        ("", ""),
    ],
)
def test_header_value(raw: str, want: str) -> None:
    assert header_value(raw) == want


def test_header_value_leaves_nothing_aiohttp_refuses() -> None:
    from aiohttp.http_writer import _py_serialize_headers
    from multidict import CIMultiDict

    every = "".join(chr(c) for c in range(0x100)) + "\ud800\udfff"
    value = header_value(every)
    _py_serialize_headers("HTTP/1.1 200 OK", CIMultiDict({"X": value}))  # raises on a forbidden character
    assert all(c == "\t" or " " <= c for c in value)


def test_entry_headers_are_header_safe() -> None:
    metadata = {"Filename": 'a"\r\nX-Injected: 1\x00', "Content-Type": "text/\x01plain\r\n"}
    assert entry_headers(metadata) == ("text/ plain", 'inline; filename="a\\"  X-Injected: 1 "')


def test_request_path() -> None:
    assert request_path("a///") == "a/"
    assert request_path("a") == "a"
    assert request_path("") == ""
    assert request_path("///") == "/"


def test_value_check_not_prefix_only() -> None:
    # "img/" exists as a directory node but is no entry: it resolves through the fallbacks.
    m = site(error="")
    with pytest.raises(Exception):  # noqa: B017 - any manifest error is fine here
        m.lookup("img/")
    assert resolve_path(m, "img/") == NotFound("path address not found")


def test_malformed_node_on_the_path_is_plain_404() -> None:
    nodes = ChunkNodes()
    stored = collection_manifest([CollectionFile("a/b", ref("a/b"), "", "b")], save=nodes.save).store()
    for address, data in list(nodes.nodes.items()):
        if address != stored:
            nodes.nodes[address] = b"\x01" * len(data)  # not a node: unknown version hash
    assert resolve_path(Manifest.open(stored, load=nodes.load), "a/b") == NotFound("Not Found")


def test_loader_errors_propagate() -> None:
    nodes = ChunkNodes()
    stored = collection_manifest([CollectionFile("a/b", ref("a/b"), "", "b")], save=nodes.save).store()
    for address in list(nodes.nodes):
        if address != stored:
            del nodes.nodes[address]
    with pytest.raises(LookupError):
        resolve_path(Manifest.open(stored, load=nodes.load), "a/b")


def test_a_served_path_does_not_read_the_root_metadata() -> None:
    nodes = ChunkNodes()
    files = [CollectionFile("x", ref("x"), "", "x")]
    stored = collection_manifest(files, index_document="index.html", save=nodes.save).store()
    slash = Manifest.open(stored, load=nodes.load).lookup_node("/").ref
    loaded: list[bytes] = []

    def load(reference: bytes) -> bytes:
        loaded.append(reference)
        return nodes.load(reference)

    assert served(resolve_path(Manifest.open(stored, load=load), "x")) == "x"
    assert slash not in loaded
    resolve_path(Manifest.open(stored, load=load), "y")
    assert slash in loaded


OWNER = bytes.fromhex("8d3766440f0d7b949a5e32995d09619a7f86e632")


def _with_root(metadata: dict[str, str]) -> Manifest:
    m = Manifest.new()
    m.add("/", bytes(32), metadata)
    return m


def test_feed_pointer_of_feed_manifest() -> None:
    assert feed_pointer(feed_manifest(OWNER, b"\xaa\xbb\xcc")) == FeedPointer(OWNER, b"\xaa\xbb\xcc", "Sequence")


@pytest.mark.parametrize(
    ("metadata", "want"),
    [
        # bee's TestFeedIndirection manifest
        (
            {"swarm-feed-owner": OWNER.hex(), "swarm-feed-topic": "abcc", "swarm-feed-type": "epoch"},
            FeedPointer(OWNER, b"\xab\xcc", "Epoch"),
        ),
        ({"swarm-feed-owner": OWNER.hex(), "swarm-feed-topic": "ab"}, FeedPointer(OWNER, b"\xab", "Sequence")),
        ({"swarm-feed-owner": OWNER.hex().upper(), "swarm-feed-topic": "AB", "swarm-feed-type": "SEQUENCE"},
         FeedPointer(OWNER, b"\xab", "Sequence")),
        ({"swarm-feed-owner": "00" + OWNER.hex(), "swarm-feed-topic": "ab"}, FeedPointer(OWNER, b"\xab", "Sequence")),
        ({"swarm-feed-owner": "01", "swarm-feed-topic": "ab"}, FeedPointer(bytes(19) + b"\x01", b"\xab", "Sequence")),
        ({"swarm-feed-owner": OWNER.hex(), "swarm-feed-topic": "abc"}, None),
        ({"swarm-feed-owner": OWNER.hex(), "swarm-feed-topic": " ab"}, None),
        ({"swarm-feed-owner": OWNER.hex(), "swarm-feed-topic": "ab", "swarm-feed-type": "daily"}, None),
        ({"swarm-feed-owner": OWNER.hex()}, None),
        ({"swarm-feed-topic": "ab"}, None),
        ({"website-index-document": "index.html"}, None),
    ],
)  # fmt: skip
def test_feed_pointer_rules(metadata: dict[str, str], want: FeedPointer | None) -> None:
    assert feed_pointer(_with_root(metadata)) == want


def test_ordinary_manifests_are_no_feeds() -> None:
    assert feed_pointer(site()) is None
    assert feed_pointer(file_manifest(ref("f"), "text/plain", "f")) is None
