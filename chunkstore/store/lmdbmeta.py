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
                    newest = (last_pg, txnid, struct.unpack_from("<Q", raw, FREE_ROOT_AT)[0])
    except OSError:
        return None
    if newest is None:
        return None
    need = (newest[0] + 1) * psize
    if size >= need:
        return None
    # LMDB writes a page only when it holds data: one that a transaction took past the file's end and freed
    # again before its commit is counted in the last page number, and listed free, yet never written (a
    # batch removal followed by a put left such a page about one time in three). Such a file is whole.
    if size % psize == 0 and _all_free(data_file, psize, newest[2], range(size // psize, newest[0] + 1)):
        return None
    return (f"{data_file} is {size} bytes, but its transaction {newest[1]} reaches page {newest[0]} "
            f"({need} bytes): the file was cut short (copy it again, or restore it)")


P_BRANCH, P_LEAF, P_OVERFLOW = 0x01, 0x02, 0x04
F_BIGDATA = 0x01  # a leaf node whose data lies on overflow pages
NODE_HEADER = 8  # lo, hi, flags, key size (2 bytes each)
FREE_ROOT_AT = DBS_AT + 40  # md_root of the free database's record
NO_PAGE = (1 << 64) - 1  # P_INVALID: an empty tree's root
MAX_FREE_PAGES = 1 << 16  # pages of the free database read at most, to tell a short file from a cut one


def _all_free(data_file: str, psize: int, root: int, pages: range) -> bool:
    """Are all of ``pages`` listed in the file's free database (whose tree starts at page ``root``)?

    Any page of that tree that cannot be read (it lies past the file's end too, or is not what the tree
    says) answers False: the file is then treated as cut short.
    """
    if root == NO_PAGE:
        return False
    want = set(pages)
    try:
        with open(data_file, "rb") as f:
            size = os.fstat(f.fileno()).st_size

            def page(pgno: int, count: int = 1) -> bytes | None:
                if (pgno + count) * psize > size:
                    return None
                f.seek(pgno * psize)
                raw = f.read(count * psize)
                return raw if len(raw) == count * psize else None

            stack, seen = [root], 0
            while stack and want:
                seen += 1
                raw = page(stack.pop())
                if raw is None or seen > MAX_FREE_PAGES:
                    return False
                flags, lower = struct.unpack_from("<HH", raw, 10)
                for i in range(max(0, (lower - PAGE_HEADER) // 2)):
                    at = struct.unpack_from("<H", raw, PAGE_HEADER + 2 * i)[0]
                    lo, hi, nflags, ksize = struct.unpack_from("<HHHH", raw, at)
                    if flags & P_BRANCH:
                        stack.append(lo | hi << 16 | nflags << 32)
                        continue
                    if not flags & P_LEAF:
                        return False
                    dsize, data_at = lo | hi << 16, at + NODE_HEADER + ksize
                    if nflags & F_BIGDATA:
                        (first,) = struct.unpack_from("<Q", raw, data_at)
                        head = page(first)
                        if head is None or not struct.unpack_from("<H", head, 10)[0] & P_OVERFLOW:
                            return False
                        pages_n = struct.unpack_from("<I", head, 12)[0]
                        body = page(first, pages_n)
                        if body is None:
                            return False
                        ids = body[PAGE_HEADER : PAGE_HEADER + dsize]
                    else:
                        ids = raw[data_at : data_at + dsize]
                    (count,) = struct.unpack_from("<Q", ids, 0) if len(ids) >= 8 else (0,)
                    count = min(count, len(ids) // 8 - 1)
                    want.difference_update(struct.unpack_from(f"<{count}Q", ids, 8))
    except (OSError, struct.error):
        return False
    return not want
