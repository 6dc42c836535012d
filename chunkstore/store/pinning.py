"""Pinning a reference: walk its tree, build the collection in bounded steps, then commit it.

``pin_reference(store, reference)`` is ``POST /pins/{reference}``: every chunk
the reference stands for (chunkstore/swarm/traversal.py: bytes trees with
their parities, manifests and every file in them, encrypted references, a
single SOC) joins one pin collection, ``PIN_STEP`` chunks per write session,
and the collection becomes the pin in one commit at the end. Any failure
(a chunk that is not here, a malformed tree, a full disk) takes the partial
collection apart again; a crash leaves it to the next writable open, which
does the same (chunkstore/store/pins.py). So a pin exists whole or not at
all, whenever the process dies.
"""

from __future__ import annotations

import logging

from chunkstore.swarm.redundancy.level import DEFAULT_DOWNLOAD_LEVEL, Level
from chunkstore.swarm.traversal import tree_addresses

from .errors import StoreWriteFailed
from .pins import PIN_STEP, check_reference
from .store import ChunkStore

log = logging.getLogger(__name__)


def pin_reference(
    store: ChunkStore, reference: bytes, *, level: Level | int = DEFAULT_DOWNLOAD_LEVEL, step: int = PIN_STEP
) -> bool:
    """Pin the content at ``reference``; True if pinned now, False if it was pinned already.

    Raises what the walk or the store raises (``ChunkMissing``/``ChunkNotFound`` for a chunk that
    is not stored, ``MalformedTree``, ``StoreWriteFailed``), with nothing of the pin left behind.
    """
    reference = check_reference(reference)
    if store.pins.has(reference):
        return False
    pins = store.pins
    pin_id = pins.begin()
    try:
        batch: list[bytes] = []
        chunks = 0
        for address in tree_addresses(reference, store.get, level=level):
            batch.append(address)
            if len(batch) >= step:
                chunks += pins.add(pin_id, batch)
                batch = []
        chunks += pins.add(pin_id, batch)
        return pins.commit(pin_id, reference, chunks)
    except BaseException:
        try:
            pins.abort(pin_id)
        except StoreWriteFailed as exc:  # the record stays; the next writable open takes it apart
            log.warning("could not take apart a failed pin collection", extra={"fields": {"error": str(exc)}})
        raise
