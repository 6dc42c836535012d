"""``/bzz`` uploads as the reference node lays them out: a single file or a collection, then its manifest.

Both write through one ``UploadSession``: the files' chunk trees first, in
upload order, then the manifest's nodes (each stored like a "bytes" upload,
with the upload's redundancy level and encryption, as the reference's
``loadsave`` does), the manifest root last of all. The manifest layouts are
``chunkstore.swarm.bzz`` (``file_manifest``, ``collection_manifest``).

- ``write_single_file``: the body is the file; ``content_type`` is the
  request's, or, when it sent none, Go's sniffing of the first 512 bytes
  (which the manifest records, so it changes the reference as on Bee).
- ``write_collection``: the regular files of a tar, or the parts of a
  multipart body (``chunkstore.content.multipart``), each typed by its
  extension (Go's ``mime.TypeByExtension``) or, for a multipart part, by its
  own ``Content-Type``; entry paths are checked (no ``..`` climbing out, no
  absolute names) before any of the entry's data is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from chunkstore.swarm.bzz import (
    CollectionFile,
    InvalidFileName,
    InvalidIndexDocument,
    MimeTable,
    collection_manifest,
    file_manifest,
    go_base,
    tar_entry_path,
)
from chunkstore.swarm.bzz.sniff import SNIFF_LENGTH, detect_content_type
from chunkstore.swarm.redundancy.level import Level

from .files import Reader, write_bytes, write_file
from .session import UploadSession


@dataclass(frozen=True)
class Stored:
    """What a ``/bzz`` upload stored: the manifest reference (the answer) and each file's reference."""

    reference: bytes
    files: dict[str, bytes]


def check_file_name(name: str) -> None:
    """The reference node's rule for the ``name`` query parameter (refused before any data is read)."""
    if name.startswith("/"):
        raise InvalidFileName(f"file name {name!r} must not start with '/'")


def check_index_document(index_document: str) -> None:
    if "/" in index_document:
        raise InvalidIndexDocument(f"index document {index_document!r} must not contain '/'")


def _saver(session: UploadSession, level: Level, encrypt: bool) -> Callable[[bytes], bytes]:
    def save(data: bytes) -> bytes:
        return write_bytes(data, session, level=level, encrypt=encrypt)

    return save


def write_single_file(
    reader: Reader,
    session: UploadSession,
    *,
    name: str,
    content_type: str,
    level: Level,
    encrypt: bool,
) -> Stored:
    """Store ``reader``'s data as one file and its single-file manifest; ``content_type`` "" means sniff."""
    check_file_name(name)
    prefix = b""
    if not content_type:
        prefix = reader.read(SNIFF_LENGTH)
        content_type = detect_content_type(prefix)
    file_ref = write_file(reader, session, level=level, encrypt=encrypt, prefix=prefix)
    manifest = file_manifest(file_ref, content_type, name, save=_saver(session, level, encrypt), encrypted=encrypt)
    return Stored(manifest.store(), {name or file_ref.hex(): file_ref})


@dataclass(frozen=True)
class IncomingFile:
    """One file of a collection as it arrives: its name in the archive, its type (None: by extension), its data."""

    name: str
    content_type: str | None
    data: Reader


def write_collection(
    incoming: Iterable[IncomingFile],
    session: UploadSession,
    *,
    level: Level,
    encrypt: bool,
    mime: MimeTable,
    index_document: str = "",
    error_document: str = "",
) -> Stored:
    """Store every file of ``incoming`` in order, then the collection manifest (``EmptyCollection`` if none)."""
    check_index_document(index_document)
    files: list[CollectionFile] = []
    refs: dict[str, bytes] = {}
    for item in incoming:
        path = tar_entry_path(item.name)  # UnsafeArchivePath before the entry's data is stored
        if path is None:
            continue
        reference = write_file(item.data, session, level=level, encrypt=encrypt)
        content_type = mime.type_of(item.name) if item.content_type is None else item.content_type
        files.append(CollectionFile(path, reference, content_type, go_base(item.name)))
        refs[path] = reference
    manifest = collection_manifest(
        files,
        index_document=index_document,
        error_document=error_document,
        save=_saver(session, level, encrypt),
        encrypted=encrypt,
    )
    return Stored(manifest.store(), refs)
