"""Pins: collections of chunks kept whatever the reserve does, by root reference.

A pin is a collection of chunk addresses (every chunk of a file or manifest
tree; chunkstore/swarm/traversal.py walks it) held under its root reference.
Each chunk of a collection has two rows in its own shard, ``pinrefs``
(address | pin id) and ``pinsets`` (pin id | address), written and deleted
together; a chunk with a ``pinrefs`` row is never deleted by the reserve's
evictions, expiry or batch removals (writes.py, ``drop_if_orphan``), only its
stamp entries are. Records in the meta env:

- ``pins``: reference -> pin id | chunks | created (the pins that exist);
- ``pinning``: pin id -> state | started | reference, for a collection in
  flux: being built (``BUILDING``) or being taken apart (``REMOVING``).

A collection is built in bounded steps, one write session each (at most
``PIN_STEP`` chunks), so pinning a large tree neither holds the writer lock
for long nor makes one huge transaction. It becomes a pin in one meta
commit that deletes its ``pinning`` record and writes its ``pins`` record.
Unpinning is the reverse: one meta commit moves the record from ``pins`` to
``pinning`` as ``REMOVING``, then the rows go in bounded steps, then the
record. So a crash leaves either the pin, whole, or a ``pinning`` record;
the next writable open (chunkstore/store/recovery.py) takes every such
collection apart: an interrupted pinning leaves nothing, an interrupted
unpinning finishes. A build step checks, under the writer lock, that its
collection is still ``BUILDING``, so a collection another process's open
rolled back cannot grow again (``PinAborted``).
"""

from __future__ import annotations

import builtins
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

import lmdb

from chunkstore.swarm.constants import ADDRESS_SIZE, ChunkType

from .admission import classify
from .envs import Database
from .errors import ChunkNotFound, PinAborted, StoreReadOnly, UnknownPin
from .files import MetaEnv
from .layout import INFO_PIN_SEQ, PIN_ID_SIZE, read_u64, shard_of, u64
from .shard import Shard, iter_prefix, txn_load
from .writes import WriteSession

BUILDING = 1
REMOVING = 2
PIN_STEP = 2000  # chunks per build or purge transaction
REFERENCE_SIZES = (32, 64)  # a plain reference, or an encrypted one (address | key)

_PIN_RECORD = struct.Struct(">8sQQ")  # pin id, chunks, created ns
_FLUX_HEAD = struct.Struct(">BQ")  # state, started ns
PIN_ROW_BYTES = 256  # generous: a chunk's two 40-byte keys with their leaf overhead, and half-full pages


@dataclass(frozen=True)
class Pin:
    reference: bytes
    pin_id: bytes
    chunks: int  # distinct chunks in the collection
    created_ns: int


@dataclass(frozen=True)
class PinCheck:
    """``GET /pins/check``'s numbers for one pin: chunks in it, of which absent, of which not valid."""

    reference: bytes
    total: int
    missing: int
    invalid: int


def check_reference(reference: bytes) -> bytes:
    reference = bytes(reference)
    if len(reference) not in REFERENCE_SIZES:
        raise UnknownPin(reference)
    return reference


class PinStore:
    """The pins of one chunk store (``store.pins``).

    ``writing`` is the store's writer lock (held by every change),
    ``session`` makes a write session on its shards.
    """

    def __init__(
        self,
        meta: MetaEnv,
        shards: list[Shard],
        *,
        readonly: bool,
        writing: Callable[[], AbstractContextManager[None]],
        session: Callable[[], WriteSession],
        room: Callable[[dict[int, int]], None] | None = None,
    ) -> None:
        self._meta = meta
        self._shards = shards
        self._readonly = readonly
        self._writing = writing
        self._session = session
        self._room = room

    # Reads.

    def get(self, reference: bytes) -> Pin | None:
        db = self._meta.pins
        if db is None or len(reference) not in REFERENCE_SIZES:
            return None
        with self._meta.env.begin() as txn:
            raw = txn.get(bytes(reference), db=db)
        return None if raw is None else _decode_pin(bytes(reference), bytes(raw))

    def has(self, reference: bytes) -> bool:
        return self.get(reference) is not None

    def list(self) -> builtins.list[bytes]:
        """The root references of every pin, in byte order."""
        return [p.reference for p in self.pins()]

    def pins(self) -> builtins.list[Pin]:
        db = self._meta.pins
        if db is None:
            return []
        with self._meta.env.begin() as txn:
            return [_decode_pin(bytes(k), bytes(v)) for k, v in txn.cursor(db=db).iternext()]

    def in_flux(self) -> dict[bytes, tuple[int, bytes]]:
        """Collections being built or taken apart: pin id -> (state, reference or b"")."""
        db = self._meta.pinning
        if db is None:
            return {}
        with self._meta.env.begin() as txn:
            return {bytes(k): (v[0], bytes(v[_FLUX_HEAD.size :])) for k, v in txn.cursor(db=db).iternext()}

    def chunk_count(self) -> int:
        """Pinned chunk rows over all shards (a chunk in two pins counts twice, as the reference counts)."""
        total = 0
        for shard in self._shards:
            if shard.pinrefs is None:
                continue
            with shard.env.begin() as txn:
                total += txn.stat(shard.pinrefs)["entries"]
        return total

    def addresses(self, reference: bytes) -> Iterator[bytes]:
        """The chunk addresses of a pin, shard by shard (``UnknownPin`` if there is none)."""
        pin = self.get(reference)
        if pin is None:
            raise UnknownPin(reference)
        for shard in self._shards:
            with shard.env.begin() as txn:
                rows = [bytes(k[PIN_ID_SIZE:]) for k, _ in iter_prefix(txn, shard.pinsets, pin.pin_id)]
            yield from rows

    def check(self, reference: bytes) -> PinCheck:
        """Count a pin's chunks, those missing and those whose data is no valid chunk at its address."""
        pin = self.get(reference)
        if pin is None:
            raise UnknownPin(reference)
        total = missing = invalid = 0
        for shard in self._shards:
            with shard.env.begin(buffers=True) as txn:
                for key, _ in iter_prefix(txn, shard.pinsets, pin.pin_id):
                    address = bytes(key[PIN_ID_SIZE:])
                    total += 1
                    data = txn_load(txn, shard, address)
                    if data is None:
                        missing += 1
                    elif classify(address, data) == ChunkType.UNKNOWN:
                        invalid += 1
        return PinCheck(pin.reference, total, missing, invalid)

    # Building a collection.

    def begin(self) -> bytes:
        """Start a collection; returns its pin id. Durable: a crash from here on is rolled back."""
        self._check_writable()
        meta = self._meta
        with self._writing(), meta.env.begin(write=True) as txn:
            raw = txn.get(INFO_PIN_SEQ, db=meta.info)
            pin_id = u64((read_u64(raw) if raw else 0) + 1)
            txn.put(INFO_PIN_SEQ, pin_id, db=meta.info)
            txn.put(pin_id, _FLUX_HEAD.pack(BUILDING, time.time_ns()), db=self._flux_db())
        return pin_id

    def add(self, pin_id: bytes, addresses: Iterable[bytes]) -> int:
        """Add chunks to collection ``pin_id`` in one write session; returns how many were new to it.

        Every chunk must be stored (``ChunkNotFound`` otherwise, with nothing of this call written);
        ``PinAborted`` if the collection is no longer being built.
        """
        self._check_writable()
        wanted = [bytes(a) for a in addresses]
        for address in wanted:
            if len(address) != ADDRESS_SIZE:
                raise ChunkNotFound(address)
        count = len(self._shards)
        added = 0
        with self._writing():
            self.expect_building(pin_id)
            if self._room is not None:
                # Pin rows grow the shards as puts do: held to the same headroom, so that a store filled
                # by pinning can still remove a batch or unpin (deletions copy pages too).
                needs: dict[int, int] = {}
                for address in wanted:
                    s = shard_of(address, count)
                    needs[s] = needs.get(s, 0) + PIN_ROW_BYTES
                self._room(needs)
            session = self._session()
            try:
                for address in wanted:
                    s = shard_of(address, count)
                    shard = self._shards[s]
                    if session.write(s).get(address, db=shard.chunks) is None:
                        raise ChunkNotFound(address)
                    added += session.pin_chunk(s, pin_id, address)
                session.commit()
            except BaseException:
                session.abort()
                raise
        return added

    def commit(self, pin_id: bytes, reference: bytes, chunks: int) -> bool:
        """Make collection ``pin_id`` the pin of ``reference``; False (and the collection taken apart)
        if ``reference`` was pinned meanwhile, whose pin then stands."""
        self._check_writable()
        reference = check_reference(reference)
        meta = self._meta
        with self._writing():
            self.expect_building(pin_id)
            with meta.env.begin(write=True) as txn:
                duplicate = txn.get(reference, db=self._pins_db()) is not None
                if duplicate:
                    txn.put(pin_id, _FLUX_HEAD.pack(REMOVING, time.time_ns()) + reference, db=self._flux_db())
                else:
                    txn.delete(pin_id, db=self._flux_db())
                    txn.put(reference, _PIN_RECORD.pack(pin_id, chunks, time.time_ns()), db=self._pins_db())
        if duplicate:
            self._take_apart(pin_id)
        return not duplicate

    def abort(self, pin_id: bytes) -> None:
        """Give up a collection being built: it is taken apart, nothing of it stays."""
        self._check_writable()
        with self._writing(), self._meta.env.begin(write=True) as txn:
            raw = txn.get(pin_id, db=self._flux_db())
            if raw is None:
                return
            txn.put(pin_id, _FLUX_HEAD.pack(REMOVING, time.time_ns()) + bytes(raw[_FLUX_HEAD.size :]),
                    db=self._flux_db())
        self._take_apart(pin_id)

    def remove(self, reference: bytes) -> int:
        """Unpin ``reference``; returns its chunk count. Chunks nothing else keeps are deleted.

        An unpinning a failed write stopped (a full disk) is finished by asking again: its record left
        ``pins`` already, so the rows are found by the ``REMOVING`` record naming the reference (0 is
        returned then). ``UnknownPin`` only when neither is there.
        """
        self._check_writable()
        reference = check_reference(reference)
        with self._writing(), self._meta.env.begin(write=True) as txn:
            raw = txn.get(reference, db=self._pins_db())
            if raw is None:
                pin_id = self._removing(txn, reference)
                if pin_id is None:
                    raise UnknownPin(reference)
                chunks = 0
            else:
                pin = _decode_pin(reference, bytes(raw))
                pin_id, chunks = pin.pin_id, pin.chunks
                txn.delete(reference, db=self._pins_db())
                txn.put(pin_id, _FLUX_HEAD.pack(REMOVING, time.time_ns()) + reference, db=self._flux_db())
        self._take_apart(pin_id)
        return chunks

    def finish_pending(self) -> int:
        """Take apart every collection in flux (an interrupted pinning or unpinning); returns how many.

        Run by the writable open, under the writer lock. A collection still being built by another
        process is marked first, so that process's next step fails with ``PinAborted``.
        """
        flux = self.in_flux()
        for pin_id, (state, reference) in flux.items():
            if state != REMOVING:
                with self._writing(), self._meta.env.begin(write=True) as txn:
                    txn.put(pin_id, _FLUX_HEAD.pack(REMOVING, time.time_ns()) + reference, db=self._flux_db())
            self._take_apart(pin_id)
        return len(flux)

    # Internals.

    def _removing(self, txn: lmdb.Transaction, reference: bytes) -> bytes | None:
        """The pin id of an unfinished unpinning of ``reference``, or None (the records in flux are few)."""
        for pin_id, raw in txn.cursor(db=self._flux_db()):
            if raw[0] == REMOVING and bytes(raw[_FLUX_HEAD.size :]) == reference:
                return bytes(pin_id)
        return None

    def _take_apart(self, pin_id: bytes) -> None:
        """Remove the collection's rows in bounded steps, then its record (last: a crash leaves it)."""
        for s, shard in enumerate(self._shards):
            while True:
                with self._writing():
                    session = self._session()
                    try:
                        txn = session.write(s)
                        rows = []
                        for key, _ in iter_prefix(txn, shard.pinsets, pin_id):
                            rows.append(bytes(key[PIN_ID_SIZE:]))
                            if len(rows) >= PIN_STEP:
                                break
                        for address in rows:
                            session.unpin_chunk(s, pin_id, address)
                        session.commit()
                    except BaseException:
                        session.abort()
                        raise
                if len(rows) < PIN_STEP:
                    break
        with self._writing(), self._meta.env.begin(write=True) as txn:
            txn.delete(pin_id, db=self._flux_db())

    def expect_building(self, pin_id: bytes) -> None:
        """``PinAborted`` unless collection ``pin_id`` is being built; writers call it under the lock."""
        with self._meta.env.begin() as txn:
            raw = txn.get(pin_id, db=self._flux_db())
        if raw is None or raw[0] != BUILDING:
            raise PinAborted(f"pin collection {pin_id.hex()} is no longer being built")

    def _pins_db(self) -> Database:
        return _writable(self._meta.pins)

    def _flux_db(self) -> Database:
        return _writable(self._meta.pinning)

    def _check_writable(self) -> None:
        if self._readonly:
            raise StoreReadOnly("the pin store was opened read-only")


def _writable(db: Database | None) -> Database:
    assert db is not None, "a writable open creates the version-2 databases"
    return db


def _decode_pin(reference: bytes, raw: bytes) -> Pin:
    pin_id, chunks, created = _PIN_RECORD.unpack(raw[: _PIN_RECORD.size])
    return Pin(reference, pin_id, chunks, created)


def decode_pin_record(reference: bytes, raw: bytes) -> Pin | None:
    """A ``pins`` record, or None when it is malformed (verify reports it)."""
    if len(raw) != _PIN_RECORD.size or len(reference) not in REFERENCE_SIZES:
        return None
    return _decode_pin(reference, raw)

