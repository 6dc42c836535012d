"""Write sessions: the slot rule applied over several shard environments.

A slot (batch, bucket, position) is recorded in the ``slots`` database of the
shard holding its chunk, so a put that only fills an empty slot touches one
environment and commits once. When a newer stamp takes a slot whose old chunk
lives in another shard, two environments change and no LMDB transaction spans
both. The order is then:

1. commit the new chunk, its stamp entry and slot, plus a ``pending`` record
   of the slot key, in the new chunk's shard;
2. commit the eviction of the older holder(s) in their shards;
3. drop the pending record lazily, in a later transaction on that shard.

A crash between 1 and 2 leaves a slot held in two shards, with a pending
record naming it; ``resolve`` (run at the next writable open) keeps the holder
with the newest stamp and evicts the rest. That is idempotent and always right,
so a pending record that outlives its need costs one redundant check.

Every stamp entry added or dropped goes through ``put_entry`` / ``drop_entry``,
which keep the shard's per-bin counters (chunkstore/store/bins.py) in the same
transaction; a writer that changes ``stamps`` any other way leaves them to the
next open's recount.

What keeps a chunk: its stamp entries (the reserve), the pin collections
holding it (``pinrefs``/``pinsets``, kept as mirror images in the chunk's
shard) and a cache entry (``cache``/``lru``). ``drop_if_orphan`` deletes a
chunk only when none of the three is left, so evictions, expiry and batch
removal drop a pinned chunk's stamps but never its data, and unpinning or a
cache eviction deletes the data only of a chunk nothing else keeps.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress

import lmdb

from chunkstore.swarm.constants import ADDRESS_SIZE, PROXIMITY_BINS, ChunkType
from chunkstore.swarm.proximity import proximity
from chunkstore.swarm.stamp import split_index

from .admission import Admitted
from .bins import decode_bins, encode_bins
from .errors import StampConflict
from .layout import (
    HEAD_SIZE,
    INFO_BINS,
    INFO_BYTES,
    INFO_OVERLAY,
    read_u64,
    shard_of,
    slot_value,
    stamp_key,
    stamp_value,
    u64,
)
from .shard import Shard, iter_prefix, txn_held, txn_load
from .writefailures import WriteHealth

Holder = tuple[int, int, bytes]  # (stamp timestamp, shard, chunk address)


def commit_txn(txn: lmdb.Transaction) -> None:
    """Commit one shard transaction: the single point where a full disk or map shows up at commit time
    (tests replace it to inject failures where LMDB would raise them)."""
    txn.commit()


class WriteSession:
    """Write transactions on the shards one operation touches; the caller holds the writer lock."""

    def __init__(
        self, shards: list[Shard], settled: dict[int, set[bytes]], health: WriteHealth | None = None
    ) -> None:
        self.shards = shards
        self.settled = settled  # per shard: pending slot keys already resolved, to delete
        self.health = health
        self.committed: list[int] = []  # shards whose transaction this session has committed
        self._taken: dict[int, set[bytes]] = {}  # settled keys deleted in an open transaction, per shard
        self.txns: dict[int, lmdb.Transaction] = {}
        self.readers: dict[int, lmdb.Transaction] = {}
        self.byte_delta: dict[int, int] = {}
        # Per shard: the overlay its bin counters refer to (None: no counters to keep) and their changes.
        self.overlays: dict[int, bytes | None] = {}
        self.bin_delta: dict[int, list[int]] = {}
        self.contested: dict[bytes, set[int]] = {}  # slot key -> shards holding a pending record of it

    # Transactions.

    def write(self, s: int) -> lmdb.Transaction:
        txn = self.txns.get(s)
        if txn is None:
            reader = self.readers.pop(s, None)
            if reader is not None:
                reader.abort()
            txn = self.shards[s].env.begin(write=True, buffers=True)
            self.txns[s] = txn
            raw = txn.get(INFO_OVERLAY, db=self.shards[s].info_db)
            self.overlays[s] = bytes(raw) if raw is not None and len(raw) == ADDRESS_SIZE else None
            self._drop_settled(s, txn)
        return txn

    def read(self, s: int) -> lmdb.Transaction:
        txn = self.txns.get(s) or self.readers.get(s)
        if txn is None:
            txn = self.readers[s] = self.shards[s].env.begin(buffers=True)
        return txn

    def commit(self) -> None:
        """Commit every touched shard, then evict the losers of cross-shard slot contests."""
        contested = self.contested
        self._commit_all()
        if contested:
            follow = WriteSession(self.shards, self.settled, self.health)
            try:
                for key in contested:
                    follow.resolve(key)
                follow._commit_all()
            except (lmdb.Error, OSError) as exc:
                # The new holders are durable and each carries a pending record, so the store is
                # consistent; the next writable open evicts the old holders (chunkstore/store/recovery.py).
                # The write itself succeeded: only its clean-up is left for later.
                follow.abort()
                if self.health is None or self.health.translate(exc) is None:
                    raise
                return
            except BaseException:
                follow.abort()
                raise
            for key, homes in contested.items():
                for s in homes:
                    self.settled.setdefault(s, set()).add(key)

    def abort(self) -> None:
        for txn in (*self.txns.values(), *self.readers.values()):
            txn.abort()
        for s, keys in self._taken.items():  # their deletion was not committed: keep them for the next write
            self.settled.setdefault(s, set()).update(keys)
        self._taken.clear()
        self.txns.clear()
        self.readers.clear()
        self.byte_delta.clear()
        self.overlays.clear()
        self.bin_delta.clear()
        self.contested = {}

    def _commit_all(self) -> None:
        for reader in self.readers.values():
            reader.abort()
        self.readers.clear()
        try:
            while self.txns:
                s, txn = self.txns.popitem()
                try:
                    delta = self.byte_delta.pop(s, 0)
                    if delta:
                        info = self.shards[s].info_db
                        raw = txn.get(INFO_BYTES, db=info)
                        txn.put(INFO_BYTES, u64((read_u64(raw) if raw else 0) + delta), db=info)
                    self._write_bins(s, txn)
                    commit_txn(txn)
                except BaseException:
                    # Out of self.txns already, so abort() below would miss it: left open (a full map
                    # fails these puts), it would hold the environment's write lock for good.
                    with suppress(lmdb.Error):
                        txn.abort()
                    raise
                self._taken.pop(s, None)
                self.committed.append(s)
                if self.health is not None:
                    self.health.committed(self.shards[s].path)
        finally:
            self.abort()

    def _write_bins(self, s: int, txn: lmdb.Transaction) -> None:
        delta = self.bin_delta.pop(s, None)
        if not delta or not any(delta):
            return
        info = self.shards[s].info_db
        bins = decode_bins(txn.get(INFO_BINS, db=info))
        if bins is None:
            return  # no valid counters: the next writable open recounts this shard
        txn.put(INFO_BINS, encode_bins([max(0, n + d) for n, d in zip(bins, delta, strict=True)]), db=info)

    def _count(self, s: int, address: bytes, change: int) -> None:
        overlay = self.overlays.get(s)
        if overlay is None:
            return
        delta = self.bin_delta.get(s)
        if delta is None:
            delta = self.bin_delta[s] = [0] * PROXIMITY_BINS
        delta[proximity(overlay, address)] += change

    def _drop_settled(self, s: int, txn: lmdb.Transaction) -> None:
        keys = self.settled.pop(s, None)
        if keys:
            self._taken[s] = keys
        for key in keys or ():
            # Another process may have crashed mid-contest on the same slot
            # since we resolved it; keep the record while the slot is doubled.
            if len(self.holders(key)) <= 1:
                txn.delete(key, db=self.shards[s].pending)

    # The slot rule.

    def holders(self, key: bytes) -> list[Holder]:
        """Every shard's claim on a slot; more than one only after an interrupted contest."""
        out = []
        for s, shard in enumerate(self.shards):
            raw = self.read(s).get(key, db=shard.slots)
            if raw is not None:
                out.append((read_u64(raw[ADDRESS_SIZE:]), s, bytes(raw[:ADDRESS_SIZE])))
        return out

    def apply(self, item: Admitted) -> bool:
        """Store one admitted chunk under its stamp; False for an exact repeat."""
        return self.put_item(item)[0]

    def put_item(
        self,
        item: Admitted,
        *,
        reserve: bool = True,
        pin: bytes | None = None,
        cache: int | None = None,
        restamped: bool = False,
    ) -> tuple[bool, bool]:
        """Store one admitted chunk; returns ``(stored, fresh)``: whether anything of its data or stamp
        was new (False: an exact repeat), and whether its data was (False: the chunk was here already).

        ``reserve``: under its stamp, by the slot rule (else the data alone, which a pin or the cache
        must then keep); ``pin``: also into that pin collection; ``cache``: also into the cache, with
        that access time. ``restamped``: the stamp is the node's own (``put_signed``), whose stamper gives
        a chunk the batch holds its slot again with a newer time; this chunk held under a newer stamp of
        the slot is then a repeat, not a conflict (below).
        """
        assert reserve or pin is not None or cache is not None, "a chunk without stamp, pin or cache is an orphan"
        home = shard_of(item.address, len(self.shards))
        if reserve:
            stored, fresh = self._apply_stamp(item, restamped)
        else:
            stored = fresh = self._put_data(home, item)
        if pin is not None:
            self.pin_chunk(home, pin, item.address)
        if cache is not None:
            self.cache_put(home, item.address, cache)
        return stored, fresh

    def _apply_stamp(self, item: Admitted, restamped: bool = False) -> tuple[bool, bool]:
        st = item.stamp
        key = st.batch_id + st.index
        ts = st.timestamp_ns
        home = shard_of(item.address, len(self.shards))
        holders = self.holders(key)
        evicted: list[bytes] = []
        if holders:
            top_ts, _, top_addr = max(holders)
            if restamped and ts < top_ts and top_addr == item.address and self._data(home, item.address) == item.data:
                # Two uploads of this chunk at once share its slot and sign it each at its own time; the
                # newer committed first. The slot holds exactly this chunk already: Bee's upload store
                # counts it as seen (uploadPutter.Put), where the slot rule would refuse the older upload.
                return False, False
            if ts < top_ts or (ts == top_ts and top_addr != item.address):
                bucket, position = split_index(st.index)
                raise StampConflict(st.batch_id, bucket, position, top_addr, top_ts, ts)
            if ts == top_ts:
                if item.chunk_type == ChunkType.SOC and self._data(home, item.address) != item.data:
                    bucket, position = split_index(st.index)
                    raise StampConflict(
                        st.batch_id, bucket, position, top_addr, top_ts, ts,
                        why="new SOC data under a stamp that is not newer (a SOC update needs a newer stamp)",
                    )
                return False, False
            for _, s, addr in holders:
                if s == home:
                    self.drop_entry(s, addr, key)
                    evicted.append(addr)
                else:
                    self.contested.setdefault(key, set()).add(home)
        txn = self.write(home)
        fresh = self._put_data(home, item)
        self.put_entry(home, stamp_key(item.address, st.batch_id, st.index),
                       stamp_value(item.chunk_type, st.timestamp, st.signature))
        txn.put(key, slot_value(item.address, st.timestamp), db=self.shards[home].slots)
        if key in self.contested:
            txn.put(key, b"", db=self.shards[home].pending)
        for addr in evicted:
            self.drop_if_orphan(home, addr)
        return True, fresh

    def resolve(self, key: bytes) -> None:
        """Leave a slot to its newest holder, evicting the others."""
        holders = self.holders(key)
        if len(holders) <= 1:
            return
        top = max(holders)
        for holder in holders:
            if holder != top:
                _, s, addr = holder
                self.drop_entry(s, addr, key)
                self.drop_if_orphan(s, addr)

    # Row-level changes.

    def _data(self, s: int, address: bytes) -> bytes | None:
        return txn_load(self.read(s), self.shards[s], address)

    def _put_data(self, s: int, item: Admitted) -> bool:
        """Write the chunk's data unless the same is there; True if it was new."""
        old = self._data(s, item.address)
        if old is not None and (item.chunk_type != ChunkType.SOC or old == item.data):
            return False  # a CAC's data is fixed by its address; only a SOC's may change
        txn = self.write(s)
        shard = self.shards[s]
        data = item.data
        txn.put(item.address, data[:HEAD_SIZE], db=shard.chunks)
        if len(data) > HEAD_SIZE:
            txn.put(item.address, data[HEAD_SIZE:], db=shard.tails)
        else:
            txn.delete(item.address, db=shard.tails)
        self.byte_delta[s] = self.byte_delta.get(s, 0) + len(data) - (0 if old is None else len(old))
        return old is None

    def put_entry(self, s: int, entry_key: bytes, value: bytes, *, replace: bool = True) -> bool:
        """Write a stamp entry (``address | batch | index``), counting it if new; True if written.

        With ``replace=False`` an existing entry is left alone.
        """
        txn = self.write(s)
        db = self.shards[s].stamps
        if replace:
            if txn.replace(entry_key, value, db=db) is None:
                self._count(s, entry_key[:ADDRESS_SIZE], 1)
            return True
        written = txn.put(entry_key, value, db=db, overwrite=False)
        if written:
            self._count(s, entry_key[:ADDRESS_SIZE], 1)
        return bool(written)

    def drop_entry(self, s: int, address: bytes, key: bytes) -> bool:
        """Remove one (chunk, stamp) entry and its slot if the slot still points at it.

        True if the entry was there (a stale request, e.g. from an eviction
        that read the index before a newer stamp took the slot, changes nothing).
        """
        txn = self.write(s)
        shard = self.shards[s]
        found = bool(txn.delete(address + key, db=shard.stamps))
        if found:
            self._count(s, address, -1)
        raw = txn.get(key, db=shard.slots)
        if raw is not None and raw[:ADDRESS_SIZE] == address:
            txn.delete(key, db=shard.slots)
        return found

    def drop_if_orphan(self, s: int, address: bytes) -> bool:
        """Delete a chunk that no stamp, pin or cache entry keeps; True if it was deleted."""
        txn = self.write(s)
        shard = self.shards[s]
        for _ in iter_prefix(txn, shard.stamps, address):
            return False
        if txn_held(txn, shard, address):
            return False
        return self.drop_chunk(s, address)

    # Pins and the cache (layout.py: pinrefs/pinsets, cache/lru).

    def pin_chunk(self, s: int, pin: bytes, address: bytes) -> bool:
        """Add a chunk to pin collection ``pin`` (both mirror rows); True if it was not in it yet."""
        txn = self.write(s)
        shard = self.shards[s]
        added = bool(txn.put(address + pin, b"", db=shard.db(shard.pinrefs), overwrite=False))
        if added:
            txn.put(pin + address, b"", db=shard.db(shard.pinsets))
        return added

    def unpin_chunk(self, s: int, pin: bytes, address: bytes) -> bool:
        """Take a chunk out of pin collection ``pin``, deleting it if nothing else keeps it."""
        txn = self.write(s)
        shard = self.shards[s]
        found = bool(txn.delete(address + pin, db=shard.db(shard.pinrefs)))
        found = bool(txn.delete(pin + address, db=shard.db(shard.pinsets))) or found
        if found:
            self.drop_if_orphan(s, address)
        return found

    def cache_put(self, s: int, address: bytes, when: int) -> None:
        """Enter a chunk in the cache, or move it to access time ``when`` if it is there already."""
        txn = self.write(s)
        shard = self.shards[s]
        cache, lru = shard.db(shard.cache), shard.db(shard.lru)
        old = txn.get(address, db=cache)
        if old is not None:
            if bytes(old) == u64(when):
                return
            txn.delete(bytes(old) + address, db=lru)
        txn.put(address, u64(when), db=cache)
        txn.put(u64(when) + address, b"", db=lru)

    def cache_touch(self, s: int, address: bytes, when: int) -> bool:
        """Move a cached chunk to access time ``when`` (if later than its own); False if it is not cached."""
        txn = self.write(s)
        shard = self.shards[s]
        old = txn.get(address, db=shard.db(shard.cache))
        if old is None:
            return False
        if read_u64(old) < when:
            self.cache_put(s, address, when)
        return True

    def cache_drop(self, s: int, address: bytes, when: int | None = None) -> bool:
        """Take a chunk out of the cache, deleting it if nothing else keeps it; False if it was not cached.

        With ``when``, only if its access time is still that (a read since makes it recent again).
        """
        txn = self.write(s)
        shard = self.shards[s]
        cache, lru = shard.db(shard.cache), shard.db(shard.lru)
        old = txn.get(address, db=cache)
        if old is None or (when is not None and read_u64(old) != when):
            return False
        txn.delete(bytes(old) + address, db=lru)
        txn.delete(address, db=cache)
        self.drop_if_orphan(s, address)
        return True

    def drop_chunk(self, s: int, address: bytes) -> bool:
        txn = self.write(s)
        shard = self.shards[s]
        head = txn.pop(address, db=shard.chunks)
        if head is None:
            return False
        size = len(head)
        tail = txn.pop(address, db=shard.tails)
        if tail is not None:
            size += len(tail)
        self.byte_delta[s] = self.byte_delta.get(s, 0) - size
        return True

    def delete_chunk(self, address: bytes) -> bool:
        """Remove a chunk's stamp entries (with the slots they hold) and its cache entry, and its data
        unless a pin keeps it; False if there was no such chunk."""
        s = shard_of(address, len(self.shards))
        txn = self.write(s)
        shard = self.shards[s]
        present = txn.get(address, db=shard.chunks) is not None
        keys = [bytes(k[ADDRESS_SIZE:]) for k, _ in iter_prefix(txn, shard.stamps, address)]
        for key in keys:
            self.drop_entry(s, address, key)
        self.cache_drop(s, address)
        self.drop_if_orphan(s, address)
        return present

    def purge_batch_part(self, s: int, batch_id: bytes, limit: int) -> int:
        """Remove up to ``limit`` slots of a batch from shard ``s``; returns how many."""
        txn = self.write(s)
        shard = self.shards[s]
        rows = []
        for key, value in iter_prefix(txn, shard.slots, batch_id):
            rows.append((bytes(key), bytes(value[:ADDRESS_SIZE])))
            if len(rows) >= limit:
                break
        for key, addr in rows:
            self.drop_entry(s, addr, key)
            self.drop_if_orphan(s, addr)
        if len(rows) < limit:
            pend = [bytes(k) for k, _ in iter_prefix(txn, shard.pending, batch_id)]
            for key in pend:
                txn.delete(key, db=shard.pending)
        return len(rows)

    def pending_keys(self, s: int) -> list[bytes]:
        return [bytes(k) for k, _ in iter_prefix(self.read(s), self.shards[s].pending, b"")]

    def clear_pending(self, s: int, keys: Iterable[bytes]) -> None:
        txn = self.write(s)
        for key in keys:
            txn.delete(key, db=self.shards[s].pending)
