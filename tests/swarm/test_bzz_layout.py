"""bzz manifest layouts against the references bee answers, and the path and MIME rules under them."""

from __future__ import annotations

import io
import tarfile

import pytest

from chunkstore.swarm.bzz import (
    CollectionFile,
    EmptyCollection,
    InvalidFeedManifest,
    InvalidFileName,
    InvalidIndexDocument,
    MimeTable,
    UnsafeArchivePath,
    collection_manifest,
    feed_manifest,
    file_manifest,
    go_base,
    go_clean,
    go_ext,
    go_join,
    tar_entry_path,
    type_by_extension,
    validate_entry_path,
)
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.mantaray import Manifest
from tests.swarm.manifesthelpers import TESTDATA, ChunkNodes, read_vectors

API = read_vectors("bee_api_vectors.json")
GO_PATH = read_vectors("go_path_vectors.json")


def _data(case: dict) -> bytes:
    if "data_file" in case:
        return (TESTDATA / case["data_file"]).read_bytes()
    return case["data"].encode()


@pytest.mark.parametrize("case", API["single_file"], ids=lambda c: c["test"].split()[-1])
def test_single_file_manifest_matches_bee(case: dict) -> None:
    nodes = ChunkNodes()
    reference, _ = make_cac(_data(case))
    manifest = file_manifest(reference, case["content_type"], case["name"], save=nodes.save)
    assert manifest.store().hex() == case["reference"]
    name = case["name"] or reference.hex()
    reopened = Manifest.open(bytes.fromhex(case["reference"]), load=nodes.load)
    assert dict(reopened.lookup("/").metadata) == {"website-index-document": name}
    entry = reopened.lookup(name)
    assert entry.reference == reference
    assert dict(entry.metadata) == {"Content-Type": case["content_type"], "Filename": name}


def test_single_file_slash_node_has_no_entry_bytes() -> None:
    """'/' is added before any entry fixes the width, so bee writes its node with entry size 0."""
    nodes = ChunkNodes()
    reference, _ = make_cac(b"x")
    file_manifest(reference, "text/plain", "a.txt", save=nodes.save).store()
    sizes = sorted(data[63] for data in nodes.nodes.values())
    assert sizes == [0, 32, 32]
    assert sorted(len(d) for d in nodes.nodes.values())[0] == 96


def test_tar_vector_file_is_the_tar_bee_wrote() -> None:
    with tarfile.open(fileobj=io.BytesIO((TESTDATA / "bee-tar-robots-img.tar").read_bytes())) as tar:
        members = [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]
    assert members == [("robots.txt", b"robots text"), ("img/1.png", b"image 1"), ("img/2.png", b"image 2")]


@pytest.mark.parametrize("case", API["collections"], ids=lambda c: c["test"].split("/")[-1])
def test_collection_manifest_matches_bee(case: dict) -> None:
    nodes = ChunkNodes()
    files = [
        CollectionFile(f["path"], make_cac(f["data"].encode())[0], f["content_type"], f["filename"])
        for f in case["files"]
    ]
    manifest = collection_manifest(
        files, index_document=case["index_document"], error_document=case["error_document"], save=nodes.save
    )
    assert manifest.store().hex() == case["reference"]


@pytest.mark.parametrize("case", [c for c in API["collections"] if "tar_names" in c], ids=lambda c: c["test"])
def test_collection_from_tar_names(case: dict) -> None:
    """The tar path: names cleaned, typed by extension (host table: .txt known), base names as Filename."""
    table = MimeTable()
    table.add(".txt", "text/plain")
    files = [
        CollectionFile.from_tar(name, make_cac(f["data"].encode())[0], table)
        for name, f in zip(case["tar_names"], case["files"], strict=True)
    ]
    assert [(f.path, f.content_type, f.filename) for f in files] == [
        (f["path"], f["content_type"], f["filename"]) for f in case["files"]
    ]
    nodes = ChunkNodes()
    assert collection_manifest(files, save=nodes.save).store().hex() == case["reference"]


def test_collection_slash_node_gets_a_zero_entry() -> None:
    nodes = ChunkNodes()
    files = [CollectionFile("index.html", make_cac(b"x")[0], "text/html; charset=utf-8", "index.html")]
    manifest = collection_manifest(files, index_document="index.html", save=nodes.save)
    reopened = Manifest.open(manifest.store(), load=nodes.load)
    assert reopened.lookup("/").reference == bytes(32)


@pytest.mark.parametrize("case", API["feed_manifests"], ids=lambda c: c["topic"])
def test_feed_manifest_matches_bee(case: dict) -> None:
    nodes = ChunkNodes()
    owner, topic = bytes.fromhex(case["owner"]), bytes.fromhex(case["topic"])
    assert feed_manifest(owner, topic, save=nodes.save).store().hex() == case["reference"]
    entry = Manifest.open(bytes.fromhex(case["reference"]), load=nodes.load).lookup("/")
    assert entry.reference == bytes(32)
    assert dict(entry.metadata) == {
        "swarm-feed-owner": case["owner"],
        "swarm-feed-topic": case["topic"],
        "swarm-feed-type": "Sequence",
    }


def test_layout_errors() -> None:
    ref = bytes(32)
    with pytest.raises(InvalidFileName):
        file_manifest(ref, "text/plain", "/abs")
    with pytest.raises(EmptyCollection):
        collection_manifest([])
    with pytest.raises(InvalidIndexDocument):
        collection_manifest([CollectionFile("a", ref, "", "a")], index_document="dir/index.html")
    with pytest.raises(UnsafeArchivePath):
        collection_manifest([CollectionFile("../a", ref, "", "a")])
    with pytest.raises(InvalidFeedManifest):
        feed_manifest(bytes(19), b"t")
    with pytest.raises(InvalidFeedManifest):
        feed_manifest(bytes(20), b"")


def test_single_file_name_defaults_to_reference_and_keeps_dot_dot() -> None:
    ref = make_cac(b"data")[0]
    nodes = ChunkNodes()
    m = file_manifest(ref, "text/plain", save=nodes.save)
    assert m.lookup(ref.hex()).reference == ref
    # bee keeps "../../x" as the single file's name ("filter out filename path" test).
    assert file_manifest(ref, "image/jpeg", "../../my.jpeg").lookup("../../my.jpeg").reference == ref


@pytest.mark.parametrize(("path", "want"), GO_PATH["clean"])
def test_go_clean(path: str, want: str) -> None:
    assert go_clean(path) == want
    assert go_clean(want) == want


@pytest.mark.parametrize(("elements", "want"), GO_PATH["join"])
def test_go_join(elements: list[str], want: str) -> None:
    assert go_join(*elements) == want


@pytest.mark.parametrize(("path", "want"), GO_PATH["ext"])
def test_go_ext(path: str, want: str) -> None:
    assert go_ext(path) == want


@pytest.mark.parametrize(("path", "want"), GO_PATH["base"])
def test_go_base(path: str, want: str) -> None:
    assert go_base(path) == want


@pytest.mark.parametrize(
    ("name", "want"),
    [("./index.html", "index.html"), ("a//b", "a/b"), ("dir/../x", "x"), (".", None), ("./", None), ("a/./b/", "a/b")],
)
def test_tar_entry_path(name: str, want: str | None) -> None:
    assert tar_entry_path(name) == want


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/../../x", "..", "a\x00b", "a\nb"])
def test_tar_entry_path_refuses_escapes(name: str) -> None:
    with pytest.raises(UnsafeArchivePath):
        tar_entry_path(name)


@pytest.mark.parametrize("path", ["", "/a", "a//b", "a/", "./a", "a/../b", "a/.", "x\x7f"])
def test_validate_entry_path_refuses(path: str) -> None:
    with pytest.raises(UnsafeArchivePath):
        validate_entry_path(path)


def test_validate_entry_path_accepts_ordinary_paths() -> None:
    for path in ["a", "img/1.png", "über/ß.txt", ".well-known/x", "a..b/c"]:
        assert validate_entry_path(path) == path


def test_mime_builtin_table() -> None:
    assert type_by_extension(".html") == "text/html; charset=utf-8"
    assert type_by_extension(".HTML") == "text/html; charset=utf-8"
    assert type_by_extension(".png") == "image/png"
    assert type_by_extension(".txt") == ""
    assert type_by_extension("") == ""
    assert MimeTable().type_of("archive/site.tar.JS") == "text/javascript; charset=utf-8"
    assert MimeTable().type_of("a.dir/README") == ""


def test_mime_lookup_lowers_non_ascii_as_go() -> None:
    # Go's mime.TypeByExtension lowers a non-ASCII extension with strings.ToLower,
    # the simple per-rune mapping: U+0130 (capital I with dot) becomes a plain "i",
    # where Python's str.lower() gives "i" + U+0307. So Bee types "x.gİf" as a GIF.
    assert type_by_extension(".g\u0130f") == "image/gif"
    assert type_by_extension(".AV\u0130F") == "image/avif"
    assert MimeTable().type_of("photos/x.G\u0130F") == "image/gif"
    # per rune, so no final sigma either: Go lowers ".ΑΣ" to ".ασ", Python to ".ας"
    table = MimeTable()
    table.add(".\u03b1\u03c3", "application/x-sigma")
    assert table.type_by_extension(".\u0391\u03a3") == "application/x-sigma"


def test_mime_host_additions(tmp_path) -> None:
    types = tmp_path / "mime.types"
    types.write_text("# comment\ntext/plain txt text  # trailing\napplication/x-thing THING\nonlytype\n")
    table = MimeTable()
    table.load_mime_types(types)
    assert table.type_by_extension(".txt") == "text/plain; charset=utf-8"
    assert table.type_by_extension(".text") == "text/plain; charset=utf-8"
    assert table.type_by_extension(".THING") == "application/x-thing"
    assert table.type_by_extension(".thing") == "application/x-thing"
    assert type_by_extension(".txt") == "", "the module-level builtin table is not changed"


def test_references_cover_every_node_and_file_but_no_zero_entry() -> None:
    """What pinning or traversal must keep: every stored node and every file, not the "/" zero entry."""
    nodes = ChunkNodes()
    files = [CollectionFile(p, make_cac(p.encode())[0], "", p) for p in ("a.txt", "img/1.png", "img/2.png")]
    root = collection_manifest(files, index_document="a.txt", save=nodes.save).store()
    refs = list(Manifest.open(root, load=nodes.load).references())
    assert len(refs) == len(set(refs))
    assert set(refs) == set(nodes.nodes) | {f.reference for f in files}
    assert bytes(32) not in refs
