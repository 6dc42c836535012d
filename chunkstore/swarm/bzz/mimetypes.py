"""Content type from a file extension, as Go's ``mime.TypeByExtension`` answers it.

The reference node types each file of a tar collection with
``mime.TypeByExtension(filepath.Ext(name))``. Go's built-in table is small;
on unix Go adds the host's MIME database (``/usr/share/mime/globs2``, or else
``/etc/mime.types`` and friends), so the same tar gives different manifests
on different hosts: ``.txt`` is "" with the built-in table alone (the
reference's Debian-slim container) and ``text/plain; charset=utf-8`` where
``/etc/mime.types`` exists (the reference's own CI, whose test vectors
assume it). ``MimeTable()`` is the built-in table; ``add`` and
``load_mime_types`` reproduce a host's additions.
"""

from __future__ import annotations

from pathlib import Path

from .paths import go_ext

# Go 1.26 src/mime/type.go builtinTypesLower.
BUILTIN_TYPES: dict[str, str] = {
    ".avif": "image/avif",
    ".css": "text/css; charset=utf-8",
    ".gif": "image/gif",
    ".htm": "text/html; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".jpeg": "image/jpeg",
    ".jpg": "image/jpeg",
    ".js": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".mjs": "text/javascript; charset=utf-8",
    ".pdf": "application/pdf",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".wasm": "application/wasm",
    ".webp": "image/webp",
    ".xml": "text/xml; charset=utf-8",
}


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _go_lower_rune(ch: str) -> str:
    # unicode.ToLower is the simple one-rune mapping. Python's str.lower() is the full
    # mapping, which differs only for U+0130 ("i" + U+0307 where Go gives "i"), and
    # applied per character it has no final-sigma context.
    return "i" if ch == "\u0130" else ch.lower()


def _go_lower(text: str) -> str:
    # Go lowers ASCII letters only on its fast path; non-ASCII goes through
    # strings.ToLower, which maps unicode.ToLower over the runes.
    if text.isascii():
        return text.translate(_ASCII_LOWER)
    return "".join(map(_go_lower_rune, text))


class MimeTable:
    """Extension -> type lookups, case-sensitive first, then case-insensitive (as Go)."""

    def __init__(self) -> None:
        self._exact: dict[str, str] = dict(BUILTIN_TYPES)
        self._lower: dict[str, str] = dict(BUILTIN_TYPES)

    def add(self, extension: str, mime_type: str) -> None:
        """Go's ``setExtensionType``: text types without parameters get ``charset=utf-8``."""
        if not extension.startswith("."):
            raise ValueError(f"extension {extension!r} must start with '.'")
        if mime_type.startswith("text/") and ";" not in mime_type:
            mime_type = f"{mime_type.lower()}; charset=utf-8"
        self._exact[extension] = mime_type
        self._lower[_go_lower(extension)] = mime_type

    def load_mime_types(self, path: str | Path) -> None:
        """Add a ``mime.types`` file (``type ext ext ...`` lines, ``#`` comments) the way Go reads it."""
        for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
            fields = line.split()
            if len(fields) <= 1 or fields[0].startswith("#"):
                continue
            for ext in fields[1:]:
                if ext.startswith("#"):
                    break
                self.add("." + ext, fields[0])

    def type_by_extension(self, extension: str) -> str:
        """The type for ``extension`` (with its dot), or "" when unknown."""
        found = self._exact.get(extension)
        if found is not None:
            return found
        return self._lower.get(_go_lower(extension), "")

    def type_of(self, name: str) -> str:
        """The type of a file name by its extension (Go's ``filepath.Ext`` rules), or ""."""
        return self.type_by_extension(go_ext(name))


_BUILTIN = MimeTable()


def type_by_extension(extension: str) -> str:
    """Go's built-in-table answer for ``extension`` (e.g. ".html")."""
    return _BUILTIN.type_by_extension(extension)
