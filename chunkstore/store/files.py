"""Creating and opening a store directory: the meta env, the shard envs, the format check.

A new store is created shards first, the meta env's ``info`` last: a store
whose meta info is missing was never finished (no chunk can have been put) and
is simply created again. Every env carries the magic and the format version,
so a stray ``ShardReader`` refuses a foreign directory as firmly as the store.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import lmdb

from .envs import Database, acquire_env, release_env
from .errors import StoreFormatError
from .layout import (
    DB_BATCHES,
    DB_CHUNKS,
    DB_INFO,
    DB_ISSUERS,
    DB_PINNING,
    DB_PINS,
    DB_TAGS,
    FORMAT_VERSION,
    INFO_BYTES,
    INFO_FORMAT,
    INFO_MAGIC,
    INFO_SHARD,
    INFO_SHARDS,
    MAGIC,
    MAX_SHARDS,
    META_DBS,
    META_DIR,
    SHARD_DBS,
    V1_META_DBS,
    read_u32,
    shard_path,
    u32,
    u64,
)
from .shard import check_info
from .upgrade import open_databases


class MetaEnv:
    """The meta environment: store-wide info, the batch records, the node's stamp issuers, pins and tags."""

    def __init__(self, env: lmdb.Environment, shard_count: int, *, readonly: bool, where: str) -> None:
        self.env = env
        added = [name for name in META_DBS if name not in V1_META_DBS]
        dbs = open_databases(env, META_DBS, added, readonly=readonly, where=where)
        self.info = env.open_db(DB_INFO, create=False)
        self.batches = env.open_db(DB_BATCHES, create=False)
        # None only in a version-1 store opened read-only: then they are empty (upgrade.py).
        self.issuers: Database | None = dbs[DB_ISSUERS]
        self.pins: Database | None = dbs[DB_PINS]
        self.pinning: Database | None = dbs[DB_PINNING]
        self.tags: Database | None = dbs[DB_TAGS]
        self.shard_count = shard_count

    def close(self) -> None:
        release_env(self.env)


def check_shard_count(shards: int) -> int:
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"shard count {shards!r} outside 1..{MAX_SHARDS}")
    return shards


def open_meta(
    root: str,
    shards: int | None,
    *,
    readonly: bool,
    map_size: int,
    shard_map_size: Callable[[int], int],
    default_shards: int,
) -> MetaEnv:
    """Open (creating when writable and absent) the store at ``root``; returns its meta env.

    ``map_size`` is the meta env's map size; ``shard_map_size(count)`` that of
    each shard of a store with ``count`` shards (used when creating them).
    """
    meta_path = os.path.join(root, META_DIR)
    meta_file = os.path.join(meta_path, "data.mdb")
    exists = os.path.isfile(meta_file) and os.path.getsize(meta_file) > 0
    if readonly and not exists:
        refuse_lost_meta(root)
        raise StoreFormatError(f"{root}: no chunk store here ({META_DIR}/data.mdb is missing or empty)")
    if shards is not None:
        check_shard_count(shards)
    if exists:
        env = acquire_env(meta_path, readonly=readonly, map_size=map_size, max_dbs=len(META_DBS))
        try:
            with env.begin() as txn:
                unfinished = txn.stat()["entries"] == 0
            if not (unfinished and not readonly):
                return _check_meta(env, meta_path, root, shards, readonly=readonly)
        except BaseException:
            release_env(env)
            raise
        release_env(env)  # an interrupted creation: do it again (LMDB forbids a second handle)
    refuse_lost_meta(root)
    count = shards or default_shards
    return _create(root, meta_path, count, map_size, shard_map_size(count))


def refuse_lost_meta(root: str) -> None:
    """Refuse to create the meta env again over shards that hold chunks: its loss is not a creation cut short.

    An interrupted creation leaves shards with their info and no chunk. Shards with chunks mean the meta
    env (batches, pins, the node's stamp positions) was lost or emptied: a new one would serve the
    chunks without their batches and hand out stamp positions already used.
    """
    held = 0
    for index in range(MAX_SHARDS):
        path = shard_path(root, index)
        if not os.path.isdir(path):
            break
        data = os.path.join(path, "data.mdb")
        if not os.path.isfile(data) or os.path.getsize(data) == 0:
            continue
        try:  # the store's own open: a file cut short is refused before it is mapped (a SIGBUS otherwise)
            env = acquire_env(path, readonly=True, map_size=0, max_dbs=len(SHARD_DBS))
        except (StoreFormatError, lmdb.Error):
            continue  # a damaged shard: the shard's own open check names it
        try:
            with env.begin() as txn:
                held += txn.stat(env.open_db(DB_CHUNKS, txn=txn, create=False))["entries"]
        except lmdb.Error:
            pass  # no chunks database: a shard whose creation was cut short
        finally:
            release_env(env)
    if held:
        raise StoreFormatError(
            f"{root}: {META_DIR}/data.mdb is missing or empty, yet the shards hold {held} chunk(s): the store's "
            f"batches, pins and stamp positions are lost with it; restore {META_DIR}/ from a backup (a new "
            "meta environment would serve the chunks without their batches and hand out used stamp positions "
            "again), or move the data dir away to start an empty store"
        )


def _check_meta(env: lmdb.Environment, meta_path: str, root: str, shards: int | None, *, readonly: bool) -> MetaEnv:
    try:
        db = env.open_db(DB_INFO, create=False)
    except lmdb.NotFoundError:
        raise StoreFormatError(f"{meta_path}: not a chunk store environment (no info database)") from None
    info = check_info(env, db, meta_path)
    count = read_u32(info[INFO_SHARDS])
    if shards is not None and shards != count:
        raise StoreFormatError(f"{root}: store has {count} shards; opened asking for {shards}")
    return MetaEnv(env, count, readonly=readonly, where=meta_path)


def _create(root: str, meta_path: str, count: int, map_size: int, shard_size: int) -> MetaEnv:
    check_shard_count(count)
    for index in range(count):
        env = acquire_env(shard_path(root, index), readonly=False, map_size=shard_size, max_dbs=len(SHARD_DBS))
        try:
            with env.begin(write=True) as txn:
                dbs = {name: env.open_db(name, txn=txn) for name in SHARD_DBS}
                info = dbs[DB_INFO]
                txn.put(INFO_MAGIC, MAGIC, db=info)
                txn.put(INFO_FORMAT, u32(FORMAT_VERSION), db=info)
                txn.put(INFO_SHARDS, u32(count), db=info)
                txn.put(INFO_SHARD, u32(index), db=info)
                txn.put(INFO_BYTES, u64(0), db=info, overwrite=False)
        finally:
            release_env(env)
    env = acquire_env(meta_path, readonly=False, map_size=map_size, max_dbs=len(META_DBS))
    try:
        with env.begin(write=True) as txn:
            dbs = {name: env.open_db(name, txn=txn) for name in META_DBS}
            info = dbs[DB_INFO]
            txn.put(INFO_SHARDS, u32(count), db=info)
            txn.put(INFO_FORMAT, u32(FORMAT_VERSION), db=info)
            txn.put(INFO_MAGIC, MAGIC, db=info)
        return MetaEnv(env, count, readonly=False, where=meta_path)
    except BaseException:
        release_env(env)
        raise
