"""How much disk the data dir takes and how much its file system has left.

Used by ``/metrics`` and the status page. LMDB files grow as pages are
written, so the allocated size of every file under the data dir (not the
apparent size of a sparse file) is what the store costs on disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class DiskUse:
    data_dir_bytes: int  # allocated by the files under the data dir
    free_bytes: int  # available to this (unprivileged) process on the data dir's file system
    size_bytes: int  # the file system's size

    def as_json(self) -> dict[str, int]:
        return {"dataDirBytes": self.data_dir_bytes, "freeBytes": self.free_bytes, "sizeBytes": self.size_bytes}


def allocated_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes allocated to the regular files under ``path`` (a store has a few dozen: no need to be clever)."""
    total = 0
    stack = [os.fspath(path)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue  # a file removed meanwhile (an import's staging area) is not an error
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


def disk_use(path: str | os.PathLike[str]) -> DiskUse:
    fs = os.statvfs(path)
    return DiskUse(
        data_dir_bytes=allocated_bytes(path),
        free_bytes=fs.f_bavail * fs.f_frsize,
        size_bytes=fs.f_blocks * fs.f_frsize,
    )
