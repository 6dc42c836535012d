"""The joiner: round trips, ranges touching only their chunks, typed errors, erasure recovery."""

from __future__ import annotations

import base64
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkstore.swarm.bmt import chunk_hash
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.file import (
    ChunkCorrupt,
    ChunkMissing,
    InvalidRange,
    InvalidReference,
    Joiner,
    MalformedTree,
    join_bytes,
    split_bytes,
)
from chunkstore.swarm.redundancy.level import Level, parities
from tests.swarm.filehelpers import FILE_VECTORS, TESTDATA, MemoryStore, seeded, sequential, tree_groups

EDGE_SIZES = [0, 1, 31, 4095, 4096, 4097, 8192, 128 * 4096 - 1, 128 * 4096, 128 * 4096 + 1, 129 * 4096, 130 * 4096 + 7]


def upload(data: bytes, **options) -> tuple[bytes, MemoryStore]:
    store = MemoryStore()
    if options.get("encrypt"):
        options.setdefault("random_bytes", seeded(len(data)))
    return split_bytes(data, store.put, **options), store


@pytest.mark.parametrize("size", EDGE_SIZES)
@pytest.mark.parametrize(
    "options",
    [{}, {"encrypt": True}, {"level": Level.MEDIUM}, {"level": Level.PARANOID, "encrypt": True}],
    ids=["plain", "encrypted", "medium", "paranoid-encrypted"],
)
def test_split_then_join_returns_the_input(size, options):
    data = os.urandom(size)
    ref, store = upload(data, **options)
    joiner = Joiner(ref, store.get)
    assert joiner.size == size
    assert joiner.read_all() == data
    assert joiner.level == options.get("level", Level.NONE) or size <= 4096


@pytest.mark.slow
@pytest.mark.parametrize(
    "options", [{}, {"encrypt": True}, {"level": Level.MEDIUM}], ids=["plain", "encrypted", "medium"]
)
def test_several_mib_round_trip(options):
    data = os.urandom(5 * 1024 * 1024 + 123)
    ref, store = upload(data, **options)
    assert join_bytes(ref, store.get) == data


def test_bee_vectors_join_back():
    vector = FILE_VECTORS["file_vectors"][18]  # 130 chunks: two levels
    data = sequential(vector["length"])
    store = MemoryStore()
    ref = split_bytes(data, store.put)
    assert ref.hex() == vector["reference"]
    assert join_bytes(ref, store.get) == data


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_range_reads_exactly_those_bytes(data):
    size = data.draw(st.sampled_from([5000, 129 * 4096 + 17]))
    options = data.draw(st.sampled_from([{}, {"level": Level.STRONG}, {"encrypt": True}]))
    content = sequential(size)
    ref, store = _cached_upload(size, tuple(sorted(options.items())))
    start = data.draw(st.integers(0, size))
    end = data.draw(st.integers(start, size))
    assert b"".join(Joiner(ref, store.get).read(start, end)) == content[start:end]


_uploads: dict = {}


def _cached_upload(size: int, options: tuple) -> tuple[bytes, MemoryStore]:
    key = (size, options)
    if key not in _uploads:
        _uploads[key] = upload(sequential(size), **dict(options))
    return _uploads[key]


def test_a_small_range_fetches_only_its_path():
    ref, store = upload(sequential(130 * 4096))
    joiner = Joiner(ref, store.get)
    store.gets.clear()
    assert (
        b"".join(joiner.read(129 * 4096 + 5, 129 * 4096 + 6)) == sequential(130 * 4096)[129 * 4096 + 5 : 129 * 4096 + 6]
    )
    # root was read by the constructor; then one intermediate chunk and one leaf
    assert len(store.gets) == 2


def test_range_outside_the_file_is_invalid():
    ref, store = upload(b"abc")
    joiner = Joiner(ref, store.get)
    for start, end in ((0, 4), (2, 1), (-1, 2)):
        with pytest.raises(InvalidRange):
            joiner.read(start, end)
    assert b"".join(joiner.read(3, 3)) == b""


def test_reference_of_wrong_length():
    with pytest.raises(InvalidReference):
        Joiner(bytes(33), {}.get)


def test_missing_root_and_missing_leaf_are_typed():
    with pytest.raises(ChunkMissing):
        Joiner(bytes(32), MemoryStore().get)
    ref, store = upload(sequential(3 * 4096))
    leaf = store.order[1]
    del store.chunks[leaf]
    joiner = Joiner(ref, store.get)
    with pytest.raises(ChunkMissing) as err:
        joiner.read_all()
    assert err.value.address == leaf
    assert b"".join(joiner.read(0, 4096)) == sequential(4096)  # the other leaves still read


def test_corrupt_chunk_is_typed_and_returns_no_partial_data():
    ref, store = upload(sequential(3 * 4096))
    leaf = store.order[1]
    store.chunks[leaf] = store.chunks[leaf][:-1] + b"\x00"
    pieces = []
    with pytest.raises(ChunkCorrupt):
        for piece in Joiner(ref, store.get).read(4096, 3 * 4096):
            pieces.append(piece)
    assert pieces == []  # the corrupt leaf is the first of the range


def test_a_getter_returning_none_means_missing():
    ref, store = upload(sequential(2 * 4096))
    with pytest.raises(ChunkMissing):
        Joiner(ref, lambda a: None if a != ref else store.chunks[a]).read_all()


def test_bee_single_chunk_under_a_mock_address():
    # Bee TestJoinerSingleChunk stores "foo" at address 00..2a; a verifying joiner refuses it.
    address = (0x2A).to_bytes(32, "big")
    data = (3).to_bytes(8, "little") + b"foo"
    with pytest.raises(ChunkCorrupt):
        Joiner(address, {address: data}.get)
    assert Joiner(address, {address: data}.get, verify=False).read_all() == b"foo"


def test_bee_malformed_subtree_where_a_leaf_belongs():
    # Bee TestJoinerMalformed: the root says 8192 bytes over two leaves, but the first
    # reference is an 8086-byte subtree.
    store = MemoryStore()
    subtree = split_bytes(bytes(8085) + b"\x01", store.put)
    other, other_data = make_cac(os.urandom(4096))
    store.put(other, other_data)
    root, root_data = make_cac(subtree + other, span=8192)
    store.put(root, root_data)
    with pytest.raises(MalformedTree):
        Joiner(root, store.get).read_all()


def test_bee_bounds_tree_is_malformed_not_a_crash():
    store = MemoryStore()
    for path in sorted((TESTDATA / "bee_joiner_bounds").glob("*.b64")):
        store.put(bytes.fromhex(path.stem), base64.b64decode(path.read_text()))
    joiner = Joiner(bytes.fromhex("7c512937c1aac8d772cff0d071cbdcda15748c9d422904007342a30dd58ef05d"), store.get)
    assert joiner.size == 524288
    for start in (0, 262144):
        with pytest.raises(MalformedTree):
            b"".join(joiner.read(start, joiner.size))


# ---------------------------------------------------------------- erasure coding


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_losing_up_to_the_parity_count_of_any_group_still_joins(data):
    level = data.draw(st.sampled_from([Level.MEDIUM, Level.STRONG, Level.INSANE, Level.PARANOID]))
    encrypt = data.draw(st.booleans())
    size = data.draw(st.sampled_from([2 * 4096 + 3, 125 * 4096]))
    content = sequential(size)
    ref, store = _cached_upload(size, tuple(sorted({"level": level, "encrypt": encrypt}.items())))
    chunks = dict(store.chunks)
    groups = tree_groups(chunks, ref)
    group_data, group_parity = data.draw(st.sampled_from(groups))
    members = group_data + group_parity
    assert len(group_parity) == parities(level, len(group_data), encrypt)
    lost = data.draw(st.sets(st.sampled_from(members), max_size=len(group_parity)))
    damaged = {a: d for a, d in chunks.items() if a not in lost}
    rebuilt: dict[bytes, bytes] = {}
    joiner = Joiner(ref, damaged.__getitem__, recovered=rebuilt.__setitem__)
    assert joiner.read_all() == content
    for address, chunk in rebuilt.items():
        assert chunk == chunks[address]
        assert chunk_hash(chunk) == address


@pytest.mark.parametrize("encrypt", [False, True])
def test_one_loss_too_many_is_chunk_missing(encrypt):
    ref, store = upload(sequential(125 * 4096), level=Level.MEDIUM, encrypt=encrypt)
    groups = tree_groups(store.chunks, ref)
    data_refs, parity = groups[1]  # a full group of leaves under the first child of the root
    for address in data_refs[: len(parity) + 1]:
        del store.chunks[address]
    with pytest.raises(ChunkMissing):
        Joiner(ref, store.get).read_all()


def test_corrupt_data_chunk_is_rebuilt_from_parities():
    ref, store = upload(sequential(10 * 4096), level=Level.MEDIUM)
    victim = store.order[3]
    store.chunks[victim] = b"\x00" * len(store.chunks[victim])
    assert Joiner(ref, store.get).read_all() == sequential(10 * 4096)


def test_missing_root_is_found_among_its_replicas():
    content = sequential(3 * 4096)
    for level in (Level.MEDIUM, Level.PARANOID):
        ref, store = upload(content, level=level)
        del store.chunks[ref]
        assert join_bytes(ref, store.get) == content
    plain_ref, plain_store = upload(content)
    del plain_store.chunks[plain_ref]
    with pytest.raises(ChunkMissing):
        Joiner(plain_ref, plain_store.get)
