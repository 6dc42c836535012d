"""Property test: what keeps a chunk, against a model, through any sequence of uploads, pins and evictions.

The model is the rule itself: a chunk is stored exactly while a stamp entry,
a pin (built or being built) or a cache entry keeps it; the cache holds the
uploads outside the radius that no pin keeps, and its eviction drops the
least recently used (puts and reads both count as use). After every step the
store must agree with the model, and at the end ``verify`` must find it clean.
"""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from chunkstore.reserve import OutOfRadius, ReserveOptions, ReserveStore
from chunkstore.store.store import Holds
from chunkstore.store.verify import verify_store
from tests.store.helpers import Stamper, make_batch
from tests.store.pinhelpers import cached, far_address_data, pin_rows

OVERLAY = bytes.fromhex("e1" + "0f" * 31)
RADIUS = 2
CAPACITY = 2
NEAR = [far_address_data(OVERLAY, RADIUS, near=True) for _ in range(4)]
FAR = [far_address_data(OVERLAY, RADIUS, near=False) for _ in range(5)]
CHUNKS = NEAR + FAR
index = st.integers(0, len(CHUNKS) - 1)


class Holds_(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="holds-")
        self.store = ReserveStore(self.dir + "/s", overlay=OVERLAY, reserve=ReserveOptions(cache_capacity=CAPACITY))
        self.store.reserve.set_radius(RADIUS)
        self.generation = 1
        self._new_batch()
        self.stamped: set[bytes] = set()
        self.pins: dict[bytes, set[bytes]] = {}  # reference -> chunks
        self.pin_id: bytes | None = None
        self.building: set[bytes] = set()
        self.cache: dict[bytes, int] = {}  # address -> last use
        self.clock = 0

    def _new_batch(self) -> None:
        self.batch = make_batch(self.generation, depth=20, bucket_depth=8)
        self.store.batches.add(self.batch)
        self.stamper = Stamper(self.batch)

    def _use(self, address: bytes) -> None:
        self.clock += 1
        if address in self.cache:
            self.cache[address] = self.clock

    def kept(self) -> set[bytes]:
        return self.stamped | set().union(*self.pins.values()) | self.building | set(self.cache)

    def _put(self, i: int, holds: Holds | None) -> None:
        address, data = CHUNKS[i]
        near = i < len(NEAR)
        try:
            self.store.put(data, self.stamper.stamp(address), holds=holds)
        except OutOfRadius:
            assert holds is None and not near
            return
        pinning = holds is not None and holds.pin is not None
        if near:
            self.stamped.add(address)
        elif not pinning:
            self.cache.setdefault(address, 0)
        if pinning:
            self.building.add(address)
        self._use(address)

    @initialize()
    def fill_the_cache(self) -> None:
        """Start over capacity: every run then has an order for reads and evictions to get right."""
        for i in range(len(NEAR), len(NEAR) + CAPACITY + 2):
            self._put(i, Holds(cache=True))

    @rule(i=index)
    def put_plain(self, i: int) -> None:
        self._put(i, None)

    @rule(i=index)
    def upload(self, i: int) -> None:
        self._put(i, Holds(cache=True))

    @precondition(lambda self: self.pin_id is not None)
    @rule(i=index)
    def upload_pinned(self, i: int) -> None:
        self._put(i, Holds(cache=True, pin=self.pin_id))

    @precondition(lambda self: self.pin_id is None)
    @rule()
    def begin(self) -> None:
        self.pin_id, self.building = self.store.pins.begin(), set()

    @precondition(lambda self: self.pin_id is not None)
    @rule(i=index)
    def commit(self, i: int) -> None:
        reference = CHUNKS[i][0]
        assert self.pin_id is not None
        created = self.store.pins.commit(self.pin_id, reference, len(self.building))
        assert created == (reference not in self.pins)
        if created:
            self.pins[reference] = self.building
        self.pin_id, self.building = None, set()

    @precondition(lambda self: self.pin_id is not None)
    @rule()
    def abort(self) -> None:
        assert self.pin_id is not None
        self.store.pins.abort(self.pin_id)
        self.pin_id, self.building = None, set()

    @precondition(lambda self: bool(self.pins))
    @rule(data=st.data())
    def unpin(self, data: st.DataObject) -> None:
        reference = data.draw(st.sampled_from(sorted(self.pins)))
        assert self.store.pins.remove(reference) == len(self.pins.pop(reference))

    @rule()
    def expire(self) -> None:
        self.store.batches.remove(self.batch.id)
        self.stamped.clear()
        self.generation += 1
        self._new_batch()

    @rule(i=index)
    def read(self, i: int) -> None:
        address = CHUNKS[i][0]
        if address in self.kept():
            assert self.store.get(address) == CHUNKS[i][1]
            self._use(address)

    @precondition(lambda self: len(self.cache) > CAPACITY)
    @rule()
    def read_the_oldest_cached(self) -> None:
        """The read that matters most to the order: it saves the next entry to go."""
        address = min(self.cache, key=self.cache.__getitem__)
        self.store.get(address)
        self._use(address)

    @rule()
    def evict(self) -> None:
        excess = max(0, len(self.cache) - CAPACITY)
        assert self.store.reserve.maintain()["cache"] == excess
        for address in sorted(self.cache, key=self.cache.__getitem__)[:excess]:
            del self.cache[address]

    @rule(i=index)
    def delete(self, i: int) -> None:
        address = CHUNKS[i][0]
        self.store.delete(address)
        self.stamped.discard(address)
        self.cache.pop(address, None)

    @invariant()
    def agrees_with_the_model(self) -> None:
        assert {a for a, _ in CHUNKS if self.store.has(a)} == self.kept()
        assert cached(self.store) == set(self.cache)
        assert {a for a, _ in pin_rows(self.store)} == set().union(*self.pins.values()) | self.building

    def teardown(self) -> None:
        try:
            report = verify_store(self.store.path)
            assert report.ok, [str(p) for p in report.problems]
        finally:
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)


Holds_.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
test_store_keeps_exactly_what_the_model_keeps = Holds_.TestCase


def test_a_pinned_upload_of_a_cached_chunk_is_a_use() -> None:
    """The sequence hypothesis found: a cached chunk uploaded again under a pin must move up the cache
    (a put is a use), or eviction drops it, not the least recently used one."""
    m = Holds_()
    try:
        m.fill_the_cache()
        m.begin()
        m.upload_pinned(len(NEAR))  # the first chunk the cache took, the least recently used until now
        m.agrees_with_the_model()
        m.evict()
        m.agrees_with_the_model()
    finally:
        m.teardown()
