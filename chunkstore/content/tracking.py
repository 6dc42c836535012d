"""Tags and pins of an upload: ``track_upload``, the one hook every upload path goes through.

``track_upload(store, options, cache=...)`` is called once per upload, before
its first chunk is stored, with the upload's ``UploadOptions`` (``Swarm-Tag``,
``Swarm-Pin``, ``Swarm-Deferred-Upload``). It returns an ``UploadTracker``:

- ``tracker.tag``: the tag the upload counts under, named or new (0: none),
  for the answer's ``Swarm-Tag`` header;

- ``tracker.holds``: pass it to the store's put (``put_signed``, ``put``,
  ``put_many``). With ``Swarm-Pin`` every chunk joins the upload's pin
  collection in the same transaction that stores it; and a chunk outside the
  storage radius goes to the cache instead of being refused (``cache=True``),
  or is kept by the pin alone;
- ``tracker.stored(session, addresses, results)`` after each durable group:
  the tag's counters move;
- ``tracker.finished(session, reference)`` once the upload is complete:
  the pin collection becomes the pin of ``reference`` and the tag records it;
- ``tracker.aborted(session, error)`` when it fails: the partial pin
  collection is taken apart (a crash leaves that to the next open).

``UploadSession`` calls all of it itself (its ``tracker``); paths that put
chunks without a session (``POST /chunks``, ``/soc``, the chunk stream with
pre-signed stamps) call the same methods with ``session=None``.

Counters with no peers. The reference node counts ``split`` and ``seen``
when an upload closes and ``stored``/``sent``/``synced`` as its pusher
reports each chunk; with no peer to push to, its pusher stores the chunk in
the node's own reserve and reports it stored, which counts ``stored`` and
``synced`` and leaves ``sent`` at 0. This node has no pusher: a chunk is
final once its group is durable here, so per group ``split`` counts every
chunk, ``seen`` those already stored here (under any stamp: the node's own
stamper re-stamps a chunk its batch holds), ``stored`` and ``synced`` the new
ones, and ``sent`` stays 0. ``seen + synced == split``
once the upload is done, which is what ``swarm-cli upload --sync`` waits for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chunkstore.store.errors import StoreWriteFailed, UnknownTag
from chunkstore.store.shard import iter_prefix
from chunkstore.store.store import ChunkStore, Holds, PutResult
from chunkstore.store.tags import Counts

from .options import UploadOptions


@dataclass
class UploadTracker:
    """What one upload counts and keeps (see the module docstring)."""

    store: ChunkStore
    tag: int  # 0: the upload counts under no tag
    pin_id: bytes | None  # the pin collection being built (Swarm-Pin), or None
    holds: Holds
    done: bool = False

    # The UploadObserver methods (``session`` is ignored: None for single-chunk paths).

    def stored(self, session: object, addresses: Sequence[bytes], results: Sequence[PutResult]) -> None:
        if not self.tag or not results:
            return
        new = sum(1 for r in results if r.fresh)
        self.store.tags.count(self.tag, Counts(split=len(results), seen=len(results) - new, stored=new, synced=new))

    def finished(self, session: object, reference: bytes | None) -> None:
        """The upload is durable; ``reference`` is what the client gets (None: no single root, as for a
        plain chunk upload, whose tag then records no address)."""
        if self.done:
            return
        self.done = True
        if self.pin_id is not None:
            assert reference is not None, "a pinned upload names its root"
            self.store.pins.commit(self.pin_id, reference, self._collection_size())
        if self.tag:
            try:
                self.store.tags.done(self.tag, reference[:32] if reference else None)
            except UnknownTag:
                pass  # deleted while the upload ran: nothing to record, as on the reference node

    def aborted(self, session: object, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        try:
            if self.pin_id is not None:
                self.store.pins.abort(self.pin_id)
            if self.tag:
                self.store.tags.flush()
        except StoreWriteFailed:
            pass  # the upload failed already; a collection left in flux is taken apart at the next open

    def _collection_size(self) -> int:
        """Distinct chunks in the collection (a chunk stored twice in one upload is one row)."""
        assert self.pin_id is not None
        total = 0
        for shard in self.store.shards:
            with shard.env.begin() as txn:
                total += sum(1 for _ in iter_prefix(txn, shard.pinsets, self.pin_id))
        return total


def track_upload(store: ChunkStore, options: UploadOptions, *, cache: bool = True) -> UploadTracker:
    """Start tracking one upload: its tag, its pin collection; blocking (both are store writes).

    The tag is the reference's ``getOrCreateSessionID``, asked only for a deferred or pinned upload:
    a named tag must exist (``UnknownTag``, which the HTTP layer answers 404 "tag not found"), and
    with none named the upload gets a new one. A direct upload (``deferred=False``, no pin) counts
    under no tag, a named one left unread, as the reference's handlers do. ``tracker.tag`` is the tag
    counted under (0: none), what the answer's ``Swarm-Tag`` header names.

    ``cache``: chunks outside the storage radius are cached rather than refused (every content upload;
    a path that must keep the reserve's refusal, such as a single chunk, passes False).
    """
    tag = 0
    if options.deferred or options.pin:  # a direct upload (neither) counts under no tag, even a named one
        tag = options.tag
        if tag:
            store.tags.get(tag)
        else:
            tag = store.tags.create().uid
    pin_id = store.pins.begin() if options.pin else None
    return UploadTracker(store, tag, pin_id, Holds(pin=pin_id, cache=cache))
