"""What ``GET /bzz/{reference}/{path}`` serves, decided from the manifest alone.

The reference node's ``serveReference`` order, after a feed manifest (if
any) has been dereferenced to the manifest it points at:

1. trailing slashes of the request path collapse to one;
2. empty path: the root's ``website-index-document`` is looked up (joined
   with Go's ``path.Join``); found -> serve it, else 404 "address not found
   or incorrect" (no error document here);
3. otherwise the path itself; found -> serve it. If not found:
   a. a path not starting with "/" whose ``path + "/"`` is a prefix of
      stored paths -> 308 redirect to the URL path plus "/" (``dir`` ->
      ``dir/``);
   b. with an index document, a path not ending in it -> ``path/index``;
   c. with an error document other than the path -> the error document
      (served with status 200, as the reference does);
   d. 404 "path address not found".

"Found" means a value node: a directory node alone is not an entry.
Exceptions raised by the caller's ``load`` propagate unchanged. Malformed
manifest data on the requested path answers a plain 404 "Not Found"; in the
root metadata, the prefix test and the fallback lookups it counts as
"absent", as the reference swallows those errors.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass

from chunkstore.swarm.mantaray import Entry, Manifest, ManifestError, ManifestNotFound
from chunkstore.swarm.mantaray.metadata import without_surrogates

from .layout import (
    CONTENT_TYPE_KEY,
    ERROR_DOCUMENT_KEY,
    FEED_OWNER_KEY,
    FEED_TOPIC_KEY,
    FEED_TYPE_KEY,
    FILENAME_KEY,
    INDEX_DOCUMENT_KEY,
    ROOT_PATH,
)
from .paths import go_base, go_join

NOT_FOUND_NO_INDEX = "address not found or incorrect"
NOT_FOUND_PATH = "path address not found"
NOT_FOUND_DEFAULT = "Not Found"


@dataclass(frozen=True)
class Serve:
    """Serve ``entry`` (found at manifest ``path``) with these headers."""

    path: str
    entry: Entry
    # None: the metadata has no Content-Type; the reference then sniffs the content.
    content_type: str | None
    content_disposition: str | None


@dataclass(frozen=True)
class Redirect:
    """Answer 308 Permanent Redirect to the request URL with ``/`` appended to its path."""

    path: str


@dataclass(frozen=True)
class NotFound:
    """Answer 404 with this message."""

    message: str


Resolution = Serve | Redirect | NotFound


def request_path(path: str) -> str:
    """Collapse trailing slashes to one, as the reference does before resolving."""
    if path.endswith("/"):
        return path.rstrip("/") + "/"
    return path


def _quote_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


# What aiohttp refuses in a header ("Forbidden control character detected in headers"): C0 controls but
# tab, and DEL. Lone surrogates cannot be written as UTF-8 at all.
_HEADER_FORBIDDEN = re.compile("[\x00-\x08\x0a-\x1f\x7f]")


def header_value(value: str) -> str:
    """``value`` made writable as a response header, as the reference node's ``net/http`` writes it.

    Go replaces CR and LF with a space and trims leading and trailing blanks
    (``textproto.TrimString``); the other control characters aiohttp refuses,
    which Go would send raw, become a space too, and a lone surrogate U+FFFD.
    Metadata can come from any node's manifest, so whatever it holds must not
    fail the answer.
    """
    value = value.replace("\r", " ").replace("\n", " ").strip(" \t")
    return without_surrogates(_HEADER_FORBIDDEN.sub(" ", value))


def entry_headers(metadata: Mapping[str, str]) -> tuple[str | None, str | None]:
    """``(Content-Type, Content-Disposition)`` for an entry's metadata (either may be absent), header-safe."""
    content_type = metadata.get(CONTENT_TYPE_KEY)
    disposition = None
    filename = metadata.get(FILENAME_KEY)
    if filename is not None:
        disposition = header_value(f'inline; filename="{_quote_escape(go_base(filename))}"')
    return None if content_type is None else header_value(content_type), disposition


def _serve(path: str, entry: Entry) -> Serve:
    content_type, disposition = entry_headers(entry.metadata)
    return Serve(path, entry, content_type, disposition)


def root_metadata(manifest: Manifest) -> Mapping[str, str]:
    """Metadata of the ``/`` entry, empty when there is none."""
    try:
        return manifest.lookup(ROOT_PATH).metadata
    except ManifestError:
        return {}


def _lookup(manifest: Manifest, path: str) -> Entry | None:
    # Fallback lookups: the reference tries each and moves on after any manifest error.
    try:
        return manifest.lookup(path)
    except ManifestError:
        return None


def resolve_path(manifest: Manifest, path: str) -> Resolution:
    """Decide what a GET of ``path`` under this manifest answers (see the module docstring)."""
    path = request_path(path)
    root: Mapping[str, str] | None = None

    def website(key: str) -> str | None:
        # Read lazily: a request the path itself answers never touches the "/" node.
        nonlocal root
        if root is None:
            root = root_metadata(manifest)
        return root.get(key)

    if not path:
        index = website(INDEX_DOCUMENT_KEY)
        if index is not None:
            target = go_join(path, index)
            entry = _lookup(manifest, target)
            if entry is not None:
                return _serve(target, entry)
        return NotFound(NOT_FOUND_NO_INDEX)
    try:
        return _serve(path, manifest.lookup(path))
    except ManifestNotFound:
        pass
    except ManifestError:
        # A malformed node on the way is a plain 404 for the reference, without the fallbacks.
        return NotFound(NOT_FOUND_DEFAULT)
    if not path.startswith("/"):
        try:
            is_dir = manifest.has_prefix(path + "/")
        except ManifestError:
            is_dir = False
        if is_dir:
            return Redirect(path + "/")
    index = website(INDEX_DOCUMENT_KEY)
    if index is not None and not path.endswith(index):
        target = go_join(path, index)
        entry = _lookup(manifest, target)
        if entry is not None:
            return _serve(target, entry)
    error_document = website(ERROR_DOCUMENT_KEY)
    if error_document is not None and path != error_document:
        entry = _lookup(manifest, error_document)
        if entry is not None:
            return _serve(error_document, entry)
    return NotFound(NOT_FOUND_PATH)


@dataclass(frozen=True)
class FeedPointer:
    """A feed manifest's target: the feed to look up instead of serving the manifest."""

    owner: bytes  # 20 bytes
    topic: bytes
    feed_type: str  # "Sequence" or "Epoch"


def _hex(text: str) -> bytes | None:
    try:
        return binascii.unhexlify(text.encode("ascii"))
    except (UnicodeEncodeError, binascii.Error, ValueError):
        return None


def feed_pointer(manifest: Manifest) -> FeedPointer | None:
    """The feed a manifest stands for, or ``None`` for an ordinary manifest.

    The reference node treats a manifest as a feed when its ``/`` entry
    carries non-empty hex ``swarm-feed-owner`` and ``swarm-feed-topic``; a
    malformed value or an unknown ``swarm-feed-type`` makes it an ordinary
    manifest. The type is case-insensitive and defaults to sequence; the
    owner is fitted to 20 bytes the way Go's ``BytesToAddress`` does (keep
    the last 20, or left-pad with zeros).
    """
    metadata = root_metadata(manifest)
    owner_hex = metadata.get(FEED_OWNER_KEY, "")
    topic_hex = metadata.get(FEED_TOPIC_KEY, "")
    owner = _hex(owner_hex) if owner_hex else b""
    topic = _hex(topic_hex) if topic_hex else b""
    if owner is None or topic is None:
        return None
    kind = metadata.get(FEED_TYPE_KEY, "")
    feed_type = {"": "Sequence", "sequence": "Sequence", "epoch": "Epoch"}.get(kind.lower())
    if feed_type is None or not owner or not topic:
        return None
    return FeedPointer(owner[-20:].rjust(20, b"\0"), topic, feed_type)
