"""What an LMDB data file's two meta pages say about its size, read before LMDB maps the file.

LMDB maps ``data.mdb`` and trusts its newest meta page: a file cut short
(a bad copy, a full disk outside LMDB's control, ``truncate``) makes the
first read past its end a SIGBUS, and the process dies with no message (a
CLI sweep: ``verify``, ``sample`` and ``export`` each exited -7). Reading the
two meta pages with ``pread`` first lets the store refuse such a file by
name. The layout is LMDB 0.9's, on a 64-bit little-endian host, as
``sampler/lmdbfile.py`` reads it too.
"""

from __future__ import annotations

import os
import struct

PAGE_HEADER = 16  # pgno (8), pad (2), flags (2), lower/upper (4)
META = struct.Struct("<IIQQ")  # magic, version, address, map size (after the page header)
DB_SIZE = 48  # one MDB_db record; two follow META (free, main), then last page number and transaction id
MAGIC = 0xBEEFC0DE
VERSION = 1
DBS_AT = PAGE_HEADER + META.size  # the free and main databases' records
LAST_PG_AT = DBS_AT + 2 * DB_SIZE  # the last page number, then the transaction id
META_BYTES = LAST_PG_AT + 16  # a meta page through its transaction id


def page_size(head: bytes) -> int | None:
    """The page size the first meta page (``head``, its first ``META_BYTES``) names, or None when it is no
    LMDB 0.9 data file of this layout (magic, version, or a page size that is no power of two in 512-65536)."""
    if len(head) < DBS_AT + 4:
        return None
    magic, version, _address, _map_size = META.unpack_from(head, PAGE_HEADER)
    psize: int = struct.unpack_from("<I", head, DBS_AT)[0]  # mm_psize is the free database's md_pad
    if magic != MAGIC or version != VERSION or psize < 512 or psize > 65536 or psize & (psize - 1):
        return None
    return psize


def last_page_and_txn(meta: bytes) -> tuple[int, int]:
    """A meta page's last page number and transaction id."""
    last_pg, txnid = struct.unpack_from("<QQ", meta, LAST_PG_AT)
    return int(last_pg), int(txnid)


def shortfall(data_file: str) -> str | None:
    """Why ``data_file`` is shorter than its newest meta page says, or None (also when it is no LMDB file
    at all, or cannot be read: LMDB's own open reports those)."""
    try:
        with open(data_file, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            psize = page_size(f.read(META_BYTES))
            if psize is None:
                return None
            newest = None
            for page in (0, 1):
                f.seek(page * psize)
                raw = f.read(META_BYTES)
                if len(raw) < META_BYTES or META.unpack_from(raw, PAGE_HEADER)[0] != MAGIC:
                    continue
                last_pg, txnid = last_page_and_txn(raw)
                if newest is None or txnid > newest[1]:
                    newest = (last_pg, txnid)
    except OSError:
        return None
    if newest is None:
        return None
    need = (newest[0] + 1) * psize
    if size >= need:
        return None
    return (f"{data_file} is {size} bytes, but its transaction {newest[1]} reaches page {newest[0]} "
            f"({need} bytes): the file was cut short (copy it again, or restore it)")
