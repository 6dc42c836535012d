"""Integrity check of a store directory: ``chunkstore verify --data-dir DIR [--repair]``.

Walks every chunk and recomputes its address (CAC or SOC), checks every stamp
(batch known, owner by signature recovery, bucket, position bound), checks the
index both ways (stamp entry <-> chunk, stamp entry <-> slot), that each chunk
sits in its shard, that no slot is held in two shards, the byte counters and
the per-bin entry counters of the reserve (chunkstore/store/bins.py). It
knows what else keeps a chunk: the pin rows (both mirror images, each of a
pin that exists, each pinned chunk present, each pin's chunk count) and the
cache rows (both orders, each cached chunk present); a chunk is an orphan
only when no stamp, pin or cache entry keeps it. A collection being built or
taken apart when the store was last closed is ``pending`` (the next writable
open settles it), not corruption.

Without ``repair`` the store is opened read-only and nothing is written. With
``repair`` it is opened writable (which first finishes any interrupted
operation, see chunkstore/store/recovery.py) and, holding the writer lock, every
problem found is fixed by removing what cannot be trusted: dangling index
entries, invalid stamps, chunks whose data does not match their address or
that sit in the wrong shard, chunks nothing keeps, pin and cache rows of no
pin or no chunk. A pinned chunk that is missing (or whose bad data a repair
removed) cannot be brought back: it stays reported (``pin-missing``), as
``GET /pins/check`` reports it, until the content is uploaded again or unpinned.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

from chunkstore.swarm.constants import ADDRESS_SIZE, ChunkType
from chunkstore.swarm.errors import InvalidStamp
from chunkstore.swarm.stamp import Stamp, validate_stamp

from .admission import classify
from .batchstore import Batch, decode_batch
from .bins import count_bins, read_counters, write_counters
from .errors import StoreCorrupt
from .layout import (
    HEAD_SIZE,
    INFO_BYTES,
    INFO_OVERLAY,
    PIN_ID_SIZE,
    PINREF_KEY_SIZE,
    SLOT_KEY_SIZE,
    STAMP_KEY_SIZE,
    STAMP_VALUE_SIZE,
    read_u64,
    shard_of,
    slot_value,
    u64,
)
from .mapped import read_in_order
from .pins import decode_pin_record
from .shard import Shard, iter_prefix, txn_held, txn_load
from .store import ChunkStore, PolicyFactory
from .writes import WriteSession

Fix = Callable[[WriteSession], None]


@dataclass
class Problem:
    kind: str
    shard: int | None
    detail: str
    fix: Fix | None = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        where = "meta" if self.shard is None else f"shard {self.shard}"
        return f"[{self.kind}] {where}: {self.detail}"


@dataclass
class VerifyReport:
    path: str
    chunks: int = 0
    stamps: int = 0
    slots: int = 0
    bytes: int = 0
    batches: int = 0
    pins: int = 0
    pinned: int = 0  # pin rows (a chunk in two pins counts twice)
    cached: int = 0
    pending: int = 0  # slot contests and pin collections awaiting the next writable open (not corruption)
    problems: list[Problem] = field(default_factory=list)
    repaired: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        state = "clean" if self.ok else f"{len(self.problems)} problem(s)"
        line = (
            f"{self.path}: {state}; {self.chunks} chunks, {self.stamps} stamps, {self.slots} slots, "
            f"{self.bytes} bytes, {self.batches} batches, {self.pins} pins ({self.pinned} pinned chunks), "
            f"{self.cached} cached, {self.pending} pending"
        )
        return line + (f"; repaired {self.repaired}" if self.repaired else "")


def verify_store(
    path: str,
    repair: bool = False,
    progress: Callable[[int], object] | None = None,
    policy: PolicyFactory | None = None,
) -> VerifyReport:
    """Check the store at ``path``; with ``repair`` also fix what was found.

    ``progress``, if given, is called with 1 for each chunk checked (a progress bar's ``update``).
    ``policy`` is registered when the store is opened (for a repair: the node's reserve, so that the
    open settles its bin counters as the node's would).
    """
    with ChunkStore(path, readonly=not repair, policy=policy) as store:
        lock = store.writing() if repair else nullcontext()
        with lock:
            report = VerifyReport(path)
            batches = _load_batches(store, report)
            pins = _load_pins(store, report)
            rows: dict[bytes, int] = {}
            for s in range(store.shard_count):
                _ShardCheck(store, s, batches, pins, rows, report, progress).run()
            _check_pin_counts(store, pins, rows, report)
            if repair and report.problems:
                _repair(store, report)
    return report


def _load_batches(store: ChunkStore, report: VerifyReport) -> dict[bytes, Batch | None]:
    """Known batches by id; None marks one whose removal is still under way."""
    out: dict[bytes, Batch | None] = {}
    meta = store.meta
    with meta.env.begin() as txn:
        for key, raw in txn.cursor(db=meta.batches).iternext():
            try:
                batch, state = decode_batch(key, raw)
            except StoreCorrupt as exc:
                report.problems.append(Problem("bad-batch-record", None, str(exc), _delete_batch(store, key)))
                continue
            out[bytes(key)] = batch if state == 0 else None
            report.batches += state == 0
    return out


@dataclass
class _PinInfo:
    reference: bytes
    chunks: int | None  # the record's count; None for a collection in flux
    raw: bytes = b""


def _load_pins(store: ChunkStore, report: VerifyReport) -> dict[bytes, _PinInfo]:
    """Every pin collection by pin id: the pins, and those being built or taken apart (pending)."""
    out: dict[bytes, _PinInfo] = {}
    meta = store.meta
    with meta.env.begin() as txn:
        if meta.pins is not None:
            for key, raw in txn.cursor(db=meta.pins).iternext():
                pin = decode_pin_record(bytes(key), bytes(raw))
                if pin is None:
                    report.problems.append(
                        Problem("bad-pin-record", None, f"pin record of {bytes(key).hex()} is malformed",
                                _delete_meta(store, "pins", bytes(key))))
                    continue
                if pin.pin_id in out:
                    report.problems.append(
                        Problem("duplicate-pin-id", None,
                                f"pins {out[pin.pin_id].reference.hex()} and {pin.reference.hex()} share one collection",
                                None))
                out[pin.pin_id] = _PinInfo(pin.reference, pin.chunks, bytes(raw))
                report.pins += 1
        if meta.pinning is not None:
            for key, raw in txn.cursor(db=meta.pinning).iternext():
                out[bytes(key)] = _PinInfo(bytes(raw[9:]), None)
                report.pending += 1
    return out


def _check_pin_counts(store: ChunkStore, pins: dict[bytes, _PinInfo], rows: dict[bytes, int], report: VerifyReport) -> None:
    for pin_id, info in pins.items():
        counted = rows.get(pin_id, 0)
        if info.chunks is not None and info.chunks != counted:
            report.problems.append(
                Problem("pin-count", None,
                        f"pin {info.reference.hex()} says it holds {info.chunks} chunks; {counted} are in it",
                        _set_pin_count(store, info, counted)))


def _delete_meta(store: ChunkStore, name: str, key: bytes) -> Fix:
    def fix(_: WriteSession) -> None:
        db = getattr(store.meta, name)
        with store.meta.env.begin(write=True) as txn:
            txn.delete(key, db=db)

    return fix


def _set_pin_count(store: ChunkStore, info: _PinInfo, counted: int) -> Fix:
    def fix(_: WriteSession) -> None:
        with store.meta.env.begin(write=True) as txn:
            txn.put(info.reference, info.raw[:PIN_ID_SIZE] + u64(counted) + info.raw[16:], db=store.meta.pins)

    return fix


def _delete_batch(store: ChunkStore, key: bytes) -> Fix:
    def fix(_: WriteSession) -> None:
        with store.meta.env.begin(write=True) as txn:
            txn.delete(key, db=store.meta.batches)

    return fix


class _ShardCheck:
    """All checks of one shard, in one read snapshot of it."""

    def __init__(
        self,
        store: ChunkStore,
        s: int,
        batches: dict[bytes, Batch | None],
        pins: dict[bytes, _PinInfo],
        pin_rows: dict[bytes, int],
        report: VerifyReport,
        progress: Callable[[int], object] | None = None,
    ) -> None:
        self.store = store
        self.s = s
        self.shard: Shard = store.shard(s)
        self.batches = batches
        self.pins = pins
        self.pin_rows = pin_rows  # rows per pin id, summed over the shards
        self.report = report
        self.progress = progress

    def problem(self, kind: str, detail: str, fix: Fix | None) -> None:
        self.report.problems.append(Problem(kind, self.s, detail, fix))

    def run(self) -> None:
        # Every database is walked in key order: with read-ahead, a cold shard is not read a page a fault.
        data_file = os.path.join(self.shard.path, "data.mdb")
        with self.shard.env.begin() as txn, read_in_order(data_file):
            self.txn = txn
            total = self._chunks()
            self._stamps()
            self._bins()
            self._slots()
            self._tails()
            self._pin_rows()
            self._cache_rows()
            raw = txn.get(INFO_BYTES, db=self.shard.info_db)
            counted = read_u64(raw) if raw else 0
            if counted != total:
                self.problem("bytes-counter", f"byte counter says {counted}, the chunks hold {total}", None)
            self.report.bytes += total

    def _chunks(self) -> int:
        total = 0
        s, shard, txn = self.s, self.shard, self.txn
        for addr, head in txn.cursor(db=shard.chunks).iternext():
            self.report.chunks += 1
            if self.progress is not None:
                self.progress(1)
            tail = txn.get(addr, db=shard.tails) if len(head) == HEAD_SIZE else None
            data = head if tail is None else head + tail
            total += len(data)
            a = addr.hex()
            if len(addr) != ADDRESS_SIZE or shard_of(addr, self.store.shard_count) != s:
                self.problem("wrong-shard", f"chunk {a} belongs in shard {_home(addr, self.store)}", _move_home(s, addr))
                continue
            kind = classify(addr, data) if len(head) <= HEAD_SIZE else ChunkType.UNKNOWN
            if kind == ChunkType.UNKNOWN:
                self.problem("bad-chunk", f"chunk {a}: data ({len(data)} bytes) is no CAC or SOC at its address",
                             _drop_chunk(s, addr))
                continue
            entries = list(iter_prefix(txn, shard.stamps, addr))
            if not entries and not txn_held(txn, shard, addr):
                self.problem("orphan-chunk", f"chunk {a} has no stamp, pin or cache entry", _drop_chunk(s, addr))
            for key, value in entries:
                self._entry(addr, kind, key, value)
        return total

    def _entry(self, addr: bytes, kind: ChunkType, key: bytes, value: bytes) -> None:
        s, a = self.s, addr.hex()
        slot = key[ADDRESS_SIZE:]
        batch_id, index = slot[:32], slot[32:]
        what = f"stamp of chunk {a} (batch {batch_id.hex()}, index {index.hex()})"
        if len(key) != STAMP_KEY_SIZE or len(value) != STAMP_VALUE_SIZE:
            self.problem("bad-entry", f"{what}: malformed record", _drop_entry(s, addr, slot))
            return
        if value[0] != kind:
            self.problem("type-mismatch", f"{what}: says type {value[0]}, the data is {kind.name}",
                         _set_type(s, key, value, kind))
        if batch_id not in self.batches:
            self.problem("unknown-batch", f"{what}: batch unknown", _drop_entry(s, addr, slot))
            return
        batch = self.batches[batch_id]
        if batch is None:
            self.report.pending += 1  # its batch is being removed; the next open finishes that
            return
        stamp = Stamp(batch_id, index, value[1:9], value[9:])
        try:
            validate_stamp(stamp, addr, batch.owner, batch.depth, batch.bucket_depth)
        except InvalidStamp as exc:
            self.problem("bad-stamp", f"{what}: {exc}", _drop_entry(s, addr, slot))
            return
        held = self.txn.get(slot, db=self.shard.slots)
        if held is None:
            self.problem("missing-slot", f"{what}: its slot is not recorded", _restore_slot(s, addr, slot, value[1:9]))
        elif held != slot_value(addr, value[1:9]):
            self.problem("slot-mismatch", f"{what}: the slot records chunk {held[:32].hex()} instead",
                         _drop_entry(s, addr, slot))

    def _stamps(self) -> None:
        s, shard, txn = self.s, self.shard, self.txn
        last, present = b"", False
        for key, _ in txn.cursor(db=shard.stamps).iternext():
            self.report.stamps += 1
            addr = key[:ADDRESS_SIZE]
            if addr != last:
                last, present = addr, txn.get(addr, db=shard.chunks) is not None
            if not present:
                self.problem("dangling-stamp", f"stamp entry {key.hex()} has no chunk",
                             _drop_dangling(s, addr, key[ADDRESS_SIZE:]))

    def _bins(self) -> None:
        """The per-bin counters against a count of the entries (by the overlay they name)."""
        overlay, stored = read_counters(self.txn, self.shard)
        if overlay is None and stored is None:
            return  # never synced (a store last written before counters existed): the next writable open counts
        counted = count_bins(self.txn, self.shard, overlay or bytes(ADDRESS_SIZE))
        if overlay is None or stored != counted:
            where = [f"bin {b}: {n} counted, {(stored or [0] * len(counted))[b]} stored"
                     for b, n in enumerate(counted) if stored is None or stored[b] != n]
            self.problem("bin-counter", "per-bin entry counters are wrong (" + "; ".join(where[:4]) + ")", None)

    def _slots(self) -> None:
        s, shard, txn = self.s, self.shard, self.txn
        others = [(o, self.store.shard(o)) for o in range(self.store.shard_count) if o != s]
        readers = [(o, other, other.env.begin()) for o, other in others]
        try:
            for key, value in txn.cursor(db=shard.slots).iternext():
                self.report.slots += 1
                addr, ts = value[:ADDRESS_SIZE], value[ADDRESS_SIZE:]
                entry = txn.get(addr + key, db=shard.stamps)
                if len(key) != SLOT_KEY_SIZE or entry is None or entry[1:9] != ts:
                    self.problem("dangling-slot", f"slot {key.hex()} points at chunk {addr.hex()} without its stamp",
                                 _drop_slot(s, key))
                    continue
                for o, other, otxn in readers:
                    if o < s or otxn.get(key, db=other.slots) is None:
                        continue  # each doubled slot is reported once, from its lower shard
                    if otxn.get(key, db=other.pending) is not None or txn.get(key, db=shard.pending) is not None:
                        self.report.pending += 1
                    else:
                        self.problem("duplicate-slot", f"slot {key.hex()} is held in shards {s} and {o}", _resolve(key))
        finally:
            for _, _, otxn in readers:
                otxn.abort()

    def _tails(self) -> None:
        s, shard, txn = self.s, self.shard, self.txn
        for addr, _ in txn.cursor(db=shard.tails).iternext():
            head = txn.get(addr, db=shard.chunks)
            if head is None or len(head) != HEAD_SIZE:
                self.problem("orphan-tail", f"tail of chunk {addr.hex()} without its head", _drop_tail(s, addr))


    def _pin_rows(self) -> None:
        s, shard, txn = self.s, self.shard, self.txn
        if shard.pinrefs is None or shard.pinsets is None:
            return  # a version-1 shard opened read-only: no pins
        for key, _ in txn.cursor(db=shard.pinrefs).iternext():
            self.report.pinned += 1
            addr, pin_id = bytes(key[:ADDRESS_SIZE]), bytes(key[ADDRESS_SIZE:])
            what = f"pin row of chunk {addr.hex()} (pin id {pin_id.hex()})"
            if len(key) != PINREF_KEY_SIZE:
                self.problem("bad-pin-row", f"{what}: malformed key", _drop_pin_rows(s, pin_id, addr))
                continue
            if txn.get(pin_id + addr, db=shard.pinsets) is None:
                self.problem("pin-mirror", f"{what}: missing from the collection's list", _drop_pin_rows(s, pin_id, addr))
                continue
            info = self.pins.get(pin_id)
            if info is None:
                self.problem("stray-pin-row", f"{what}: no such pin", _drop_pin_rows(s, pin_id, addr))
                continue
            self.pin_rows[pin_id] = self.pin_rows.get(pin_id, 0) + 1
            if info.chunks is not None and txn.get(addr, db=shard.chunks) is None:
                self.problem("pin-missing", f"chunk {addr.hex()} of pin {info.reference.hex()} is missing", None)
        for key, _ in txn.cursor(db=shard.pinsets).iternext():
            pin_id, addr = bytes(key[:PIN_ID_SIZE]), bytes(key[PIN_ID_SIZE:])
            if txn.get(addr + pin_id, db=shard.pinrefs) is None:
                self.problem("pin-mirror", f"collection row {key.hex()} has no pin row of its chunk",
                             _drop_pin_rows(s, pin_id, addr))

    def _cache_rows(self) -> None:
        s, shard, txn = self.s, self.shard, self.txn
        if shard.cache is None or shard.lru is None:
            return
        for addr, when in txn.cursor(db=shard.cache).iternext():
            self.report.cached += 1
            addr, when = bytes(addr), bytes(when)
            if len(when) != 8 or txn.get(when + addr, db=shard.lru) is None:
                self.problem("cache-order", f"cache entry of chunk {addr.hex()} is not in the access order",
                             _drop_cache_rows(s, addr, when))
            elif txn.get(addr, db=shard.chunks) is None:
                self.problem("dangling-cache", f"cache entry of chunk {addr.hex()} has no chunk",
                             _drop_cache_rows(s, addr, when))
        for key, _ in txn.cursor(db=shard.lru).iternext():
            when, addr = bytes(key[:8]), bytes(key[8:])
            if txn.get(addr, db=shard.cache) != when:
                self.problem("cache-order", f"access-order row {key.hex()} has no matching cache entry",
                             _drop_cache_rows(s, addr, when))


def _home(addr: bytes, store: ChunkStore) -> str:
    return str(shard_of(addr, store.shard_count)) if len(addr) == ADDRESS_SIZE else "none (bad key)"


# Fixes: each runs in the repair's write session.


def _drop_chunk(s: int, addr: bytes) -> Fix:
    def fix(session: WriteSession) -> None:
        txn = session.write(s)
        keys = [bytes(k[ADDRESS_SIZE:]) for k, _ in iter_prefix(txn, session.shards[s].stamps, addr)]
        for key in keys:
            session.drop_entry(s, addr, key)
        shard = session.shards[s]
        when = txn.get(addr, db=shard.cache) if shard.cache is not None else None
        if when is not None:  # its pin rows stay: the pin reports the chunk missing
            txn.delete(bytes(when) + addr, db=shard.lru)
            txn.delete(addr, db=shard.cache)
        session.drop_chunk(s, addr)

    return fix


def _drop_pin_rows(s: int, pin_id: bytes, addr: bytes) -> Fix:
    def fix(session: WriteSession) -> None:
        shard = session.shards[s]
        txn = session.write(s)
        txn.delete(addr + pin_id, db=shard.pinrefs)
        txn.delete(pin_id + addr, db=shard.pinsets)
        session.drop_if_orphan(s, addr)

    return fix


def _drop_cache_rows(s: int, addr: bytes, when: bytes) -> Fix:
    def fix(session: WriteSession) -> None:
        shard = session.shards[s]
        txn = session.write(s)
        if txn.get(addr, db=shard.cache) == when:
            txn.delete(addr, db=shard.cache)
        txn.delete(when + addr, db=shard.lru)
        session.drop_if_orphan(s, addr)

    return fix


def _drop_entry(s: int, addr: bytes, slot: bytes) -> Fix:
    def fix(session: WriteSession) -> None:
        session.drop_entry(s, addr, slot)
        session.drop_if_orphan(s, addr)

    return fix


def _drop_dangling(s: int, addr: bytes, slot: bytes) -> Fix:
    def fix(session: WriteSession) -> None:
        # A wrong-shard chunk moved home earlier in the same repair ends the dangling.
        if session.write(s).get(addr, db=session.shards[s].chunks) is None:
            session.drop_entry(s, addr, slot)

    return fix


def _move_home(s: int, addr: bytes) -> Fix:
    """Move a chunk filed in the wrong shard to its own, with the index rows filed beside it."""

    def fix(session: WriteSession) -> None:
        if len(addr) == ADDRESS_SIZE:
            home = shard_of(addr, len(session.shards))
            src, dst = session.shards[s], session.shards[home]
            stxn, htxn = session.write(s), session.write(home)
            data = txn_load(stxn, src, addr)
            if data is not None and htxn.get(addr, db=dst.chunks) is None and classify(addr, data) != ChunkType.UNKNOWN:
                htxn.put(addr, data[:HEAD_SIZE], db=dst.chunks)
                if len(data) > HEAD_SIZE:
                    htxn.put(addr, data[HEAD_SIZE:], db=dst.tails)
                session.byte_delta[home] = session.byte_delta.get(home, 0) + len(data)
                for key, value in list(iter_prefix(stxn, src.stamps, addr)):
                    slot = bytes(key[ADDRESS_SIZE:])
                    session.put_entry(home, bytes(key), bytes(value), replace=False)
                    if not session.holders(slot):
                        htxn.put(slot, slot_value(addr, bytes(value[1:9])), db=dst.slots)
        _drop_chunk(s, addr)(session)

    return fix


def _drop_slot(s: int, key: bytes) -> Fix:
    def fix(session: WriteSession) -> None:
        session.write(s).delete(key, db=session.shards[s].slots)

    return fix


def _drop_tail(s: int, addr: bytes) -> Fix:
    def fix(session: WriteSession) -> None:
        session.write(s).delete(addr, db=session.shards[s].tails)

    return fix


def _set_type(s: int, key: bytes, value: bytes, kind: ChunkType) -> Fix:
    def fix(session: WriteSession) -> None:
        session.write(s).put(key, bytes((kind,)) + value[1:], db=session.shards[s].stamps)

    return fix


def _restore_slot(s: int, addr: bytes, slot: bytes, ts: bytes) -> Fix:
    def fix(session: WriteSession) -> None:
        if session.holders(slot):
            _drop_entry(s, addr, slot)(session)  # someone else holds it: this claim is the stray one
        else:
            session.write(s).put(slot, slot_value(addr, ts), db=session.shards[s].slots)

    return fix


def _resolve(key: bytes) -> Fix:
    return lambda session: session.resolve(key)


def _repair(store: ChunkStore, report: VerifyReport) -> None:
    session = store.session()
    try:
        # Moves first (they can end other problems), slot contests last (after bad claims are gone).
        order = {"wrong-shard": 0, "duplicate-slot": 2}
        for problem in sorted(report.problems, key=lambda p: order.get(p.kind, 1)):
            if problem.fix is not None:
                problem.fix(session)
                report.repaired += 1
        session.commit()
        _recount_bytes(store, session)
        _recount_bins(store, session)
        session.commit()
    except BaseException:
        session.abort()
        raise
    report.repaired += sum(p.kind in ("bytes-counter", "bin-counter") for p in report.problems)


def _recount_bytes(store: ChunkStore, session: WriteSession) -> None:
    """Set each shard's byte counter to what its chunks hold."""
    for s in range(store.shard_count):
        shard = store.shard(s)
        txn = session.write(s)
        total = 0
        for addr, head in txn.cursor(db=shard.chunks).iternext():
            total += len(head)
            if len(head) == HEAD_SIZE:
                tail = txn.get(addr, db=shard.tails)
                total += 0 if tail is None else len(tail)
        txn.put(INFO_BYTES, u64(total), db=shard.info_db)
        session.byte_delta.pop(s, None)


def _recount_bins(store: ChunkStore, session: WriteSession) -> None:
    """Set each shard's per-bin counters to what its entries hold.

    They count against the node's overlay as the meta info names it, else
    against the one a shard's counters name; a store that names none keeps
    none (the first open that names an overlay counts them).
    """
    named = store.read_info(INFO_OVERLAY)
    overlay = named if named is not None and len(named) == ADDRESS_SIZE else None
    for s in range(store.shard_count):
        shard = store.shard(s)
        txn = session.write(s)
        target = overlay or read_counters(txn, shard)[0]
        if target is not None:
            write_counters(txn, shard, target, count_bins(txn, shard, target))
        session.bin_delta.pop(s, None)
