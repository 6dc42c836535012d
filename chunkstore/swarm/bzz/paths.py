"""Slash-path rules of Go's ``path`` package, and checks for collection entry paths.

The reference node names manifest entries with Go's ``path``/``filepath``
functions (``Clean`` for tar entry names, ``Join`` for index documents,
``Base`` for file names, ``Ext`` for the content type), whose corner cases
differ from ``posixpath`` (``//a`` cleans to ``/a``, ``Base("")`` is ``.``).
"""

from __future__ import annotations

from .errors import UnsafeArchivePath


def go_clean(path: str) -> str:
    """Go's ``path.Clean``: the shortest equivalent slash path ("." for empty)."""
    if not path:
        return "."
    rooted = path.startswith("/")
    out: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if out and out[-1] != "..":
                out.pop()
            elif not rooted:
                out.append("..")
            continue
        out.append(segment)
    joined = "/".join(out)
    if rooted:
        return "/" + joined
    return joined or "."


def go_join(*elements: str) -> str:
    """Go's ``path.Join``: non-empty elements joined by "/" and cleaned; "" if all are empty."""
    parts = [e for e in elements if e]
    return go_clean("/".join(parts)) if parts else ""


def go_base(path: str) -> str:
    """Go's ``path.Base`` (also ``filepath.Base`` on unix): the last element, trailing slashes dropped."""
    if not path:
        return "."
    stripped = path.rstrip("/")
    if not stripped:
        return "/"
    return stripped.rsplit("/", 1)[-1]


def go_ext(path: str) -> str:
    """Go's ``filepath.Ext``: from the last "." of the last element, or ""."""
    for i in range(len(path) - 1, -1, -1):
        ch = path[i]
        if ch == "/":
            break
        if ch == ".":
            return path[i:]
    return ""


def validate_entry_path(path: str) -> str:
    """Check a collection entry path already in its final form; return it unchanged.

    Refused (``UnsafeArchivePath``): empty, absolute, empty segments (``a//b``,
    trailing ``/``), ``.`` or ``..`` segments, NUL or other control bytes. The
    reference node accepts some of these and stores paths no client can ask
    for (or that escape the collection when unpacked); this project does not.
    """
    if not path:
        raise UnsafeArchivePath("entry path is empty")
    if path.startswith("/"):
        raise UnsafeArchivePath(f"entry path {path!r} is absolute")
    if any(ord(ch) < 0x20 or ch == "\x7f" for ch in path):
        raise UnsafeArchivePath(f"entry path {path!r} contains control characters")
    for segment in path.split("/"):
        if segment == "":
            raise UnsafeArchivePath(f"entry path {path!r} has an empty segment")
        if segment in (".", ".."):
            raise UnsafeArchivePath(f"entry path {path!r} has a {segment!r} segment")
    return path


def tar_entry_path(name: str) -> str | None:
    """The manifest path of a tar entry named ``name``, or ``None`` to skip it.

    The reference node stores ``path.Clean(name)`` and skips names that clean
    to ".". Cleaning removes ``./``, doubled slashes and inner ``..``; what
    is left must pass ``validate_entry_path`` (so ``../x`` and ``/x`` are
    refused where the reference would store them as given).
    """
    cleaned = go_clean(name)
    if cleaned == ".":
        return None
    return validate_entry_path(cleaned)
