"""Opening an environment's databases, and upgrading an older format in place.

Format version 2 added databases (the pin and cache indexes, pins, tags;
layout.py) and changed no existing encoding, so a version-1 environment is a
version-2 one whose new databases are empty. A read-only open takes it as
such: the absent databases are ``None`` and readers treat them as empty. A
writable open creates them and records version 2, in one transaction per
environment: a crash between environments leaves some upgraded and some
not, and the next writable open finishes. Version 2 must not be opened by
older builds (they would delete pinned chunks that carry no stamp as
orphans), which is why the version moves at all.
"""

from __future__ import annotations

from collections.abc import Sequence

import lmdb

from .envs import Database
from .errors import StoreFormatError
from .layout import DB_INFO, FORMAT_VERSION, INFO_FORMAT, READABLE_FORMATS, read_u32, u32


def stored_version(env: lmdb.Environment, info: Database) -> int | None:
    with env.begin() as txn:
        raw = txn.get(INFO_FORMAT, db=info)
    return read_u32(raw) if raw is not None and len(raw) == 4 else None


def open_databases(
    env: lmdb.Environment, names: Sequence[bytes], added: Sequence[bytes], *, readonly: bool, where: str
) -> dict[bytes, Database | None]:
    """Every database of ``names``; those of ``added`` (new since version 1's first release) may be
    absent: created when writable, else None.

    Call after the info database passed the format check. A writable open of
    an older format upgrades it here (see the module docstring).
    """
    info = env.open_db(DB_INFO, create=False)
    version = stored_version(env, info)
    if version not in READABLE_FORMATS:
        raise StoreFormatError(f"{where}: on-disk format version {version} is not supported")
    dbs: dict[bytes, Database | None] = {DB_INFO: info}
    missing = []
    for name in names:
        if name == DB_INFO:
            continue
        try:
            dbs[name] = env.open_db(name, create=False)
        except lmdb.NotFoundError:
            missing.append(name)
            dbs[name] = None
    if any(name not in added for name in missing):
        raise StoreFormatError(f"{where}: lacks its databases {sorted(n.decode() for n in missing)}")
    if readonly:
        return dbs
    if missing or version != FORMAT_VERSION:
        with env.begin(write=True) as txn:
            for name in missing:
                dbs[name] = env.open_db(name, txn=txn)
            txn.put(INFO_FORMAT, u32(FORMAT_VERSION), db=info)
    return dbs
