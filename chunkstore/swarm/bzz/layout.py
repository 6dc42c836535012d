"""The manifests the reference node writes for ``POST /bzz`` and ``POST /feeds``.

* single file (``fileUploadHandler``): ``/`` first, a metadata-only entry
  with ``website-index-document: <name>``; then ``<name>`` with
  ``Content-Type`` and ``Filename``. ``/`` is added while the root's entry
  width is still unknown, so its node is written with no entry bytes.
* collection (``storeDir``, tar or multipart): every file in upload order
  with ``Content-Type`` and ``Filename``, then, if an index or error
  document is given, ``/`` with those keys. Added last, ``/`` inherits the
  32- or 64-byte width and is written with an all-zero entry.
* feed manifest (``feedPostHandler``): ``/`` alone, with a 32-byte zero
  entry and the ``swarm-feed-*`` keys.

The builders return an unsaved ``Manifest``; ``.store()`` saves it through
the ``save`` callable (see ``chunkstore.swarm.mantaray.manifest``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from chunkstore.swarm.mantaray import Manifest
from chunkstore.swarm.mantaray.marshal import KeySource
from chunkstore.swarm.mantaray.persist import Saver
from chunkstore.swarm.mantaray.trie import Loader

from .errors import EmptyCollection, InvalidFeedManifest, InvalidFileName, InvalidIndexDocument, UnsafeArchivePath
from .mimetypes import MimeTable
from .paths import go_base, tar_entry_path, validate_entry_path

ROOT_PATH = "/"
INDEX_DOCUMENT_KEY = "website-index-document"
ERROR_DOCUMENT_KEY = "website-error-document"
CONTENT_TYPE_KEY = "Content-Type"
FILENAME_KEY = "Filename"
FEED_OWNER_KEY = "swarm-feed-owner"
FEED_TOPIC_KEY = "swarm-feed-topic"
FEED_TYPE_KEY = "swarm-feed-type"
SEQUENCE_FEED_TYPE = "Sequence"
MANIFEST_CONTENT_TYPE = "application/bzz-manifest-mantaray+octet-stream"
TAR_CONTENT_TYPE = "application/x-tar"


def file_manifest(
    reference: bytes,
    content_type: str,
    name: str = "",
    *,
    save: Saver | None = None,
    load: Loader | None = None,
    encrypted: bool = False,
    key_source: KeySource | None = None,
) -> Manifest:
    """The manifest of a single-file upload of ``reference``.

    ``name`` is the ``name`` query parameter, used as given (the reference
    node keeps ``../x`` too; only a leading "/" is refused); empty means the
    file reference in hex. ``content_type`` is the request's (trimmed, or
    sniffed when absent, by the caller).
    """
    if name.startswith("/"):
        raise InvalidFileName(f"file name {name!r} must not start with '/'")
    name = name or bytes(reference).hex()
    manifest = Manifest.new(save=save, load=load, encrypted=encrypted, key_source=key_source)
    manifest.add(ROOT_PATH, b"", {INDEX_DOCUMENT_KEY: name})
    manifest.add(name, reference, {CONTENT_TYPE_KEY: content_type, FILENAME_KEY: name})
    return manifest


@dataclass(frozen=True)
class CollectionFile:
    """One file of a collection: its manifest path, file reference and metadata values."""

    path: str
    reference: bytes
    content_type: str
    filename: str

    @classmethod
    def from_tar(cls, name: str, reference: bytes, mime: MimeTable | None = None) -> CollectionFile:
        """A regular tar member named ``name``: cleaned path, type by extension, base name.

        Call ``paths.tar_entry_path(name)`` before storing the member's data:
        it says whether the reference node would skip the member (``None``).
        """
        path = tar_entry_path(name)
        if path is None:
            raise UnsafeArchivePath(f"tar entry {name!r} names no file")
        table = mime or MimeTable()
        return cls(path, bytes(reference), table.type_of(name), go_base(name))


def collection_manifest(
    files: Iterable[CollectionFile],
    *,
    index_document: str = "",
    error_document: str = "",
    save: Saver | None = None,
    load: Loader | None = None,
    encrypted: bool = False,
    key_source: KeySource | None = None,
) -> Manifest:
    """The manifest of a collection upload, files in the order given."""
    if "/" in index_document:
        raise InvalidIndexDocument(f"index document {index_document!r} must not contain '/'")
    manifest = Manifest.new(save=save, load=load, encrypted=encrypted, key_source=key_source)
    count = 0
    for file in files:
        validate_entry_path(file.path)
        manifest.add(file.path, file.reference, {CONTENT_TYPE_KEY: file.content_type, FILENAME_KEY: file.filename})
        count += 1
    if count == 0:
        raise EmptyCollection("no files in root directory")
    website: dict[str, str] = {}
    if index_document:
        website[INDEX_DOCUMENT_KEY] = index_document
    if error_document:
        website[ERROR_DOCUMENT_KEY] = error_document
    if website:
        manifest.add(ROOT_PATH, b"", website)
    return manifest


def feed_manifest(owner: bytes, topic: bytes, *, save: Saver | None = None, load: Loader | None = None) -> Manifest:
    """The manifest ``POST /feeds/{owner}/{topic}`` stores (sequence feeds only, as the reference)."""
    if len(owner) != 20:
        raise InvalidFeedManifest(f"feed owner is {len(owner)} bytes; must be 20")
    if not topic:
        raise InvalidFeedManifest("feed topic is empty")
    manifest = Manifest.new(save=save, load=load)
    metadata = {
        FEED_OWNER_KEY: bytes(owner).hex(),
        FEED_TOPIC_KEY: bytes(topic).hex(),
        FEED_TYPE_KEY: SEQUENCE_FEED_TYPE,
    }
    manifest.add(ROOT_PATH, bytes(32), metadata)
    return manifest
