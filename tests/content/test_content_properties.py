"""Properties of files through the store: split then join returns the input, every stored chunk verifies,
a missing chunk is an error and never partial data."""

from __future__ import annotations

import io
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkstore.content import open_file, write_file
from chunkstore.swarm.bmt import chunk_hash
from chunkstore.swarm.file import ChunkMissing, FileError
from chunkstore.swarm.soc import parse_soc
from tests.content.helpers import Node, open_node

EDGES = [0, 1, 4095, 4096, 4097, 128 * 4096 - 1, 128 * 4096, 128 * 4096 + 1]


class Collect:
    def __init__(self) -> None:
        self.addresses: list[bytes] = []

    def stored(self, session, addresses, results) -> None:
        self.addresses.extend(addresses)

    def finished(self, session, reference) -> None:
        pass

    def aborted(self, session, error) -> None:
        pass


def upload(node: Node, data: bytes, level: int, encrypt: bool) -> tuple[bytes, list[bytes]]:
    seen = Collect()
    session = node.session(group_size=64, observers=[seen])
    reference = write_file(io.BytesIO(data), session, level=level, encrypt=encrypt, piece=65536)
    session.finish(reference)
    return reference, seen.addresses


def assert_all_verify(node: Node, addresses: list[bytes]) -> None:
    for address in addresses:
        data = node.store.get(address)
        if len(data) <= 4104 and chunk_hash(data) == address:
            continue
        assert parse_soc(data).address == address, address.hex()


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    node = open_node(tmp_path_factory.mktemp("props") / "store", depth=28, immutable=False)
    yield node
    node.store.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.one_of(st.sampled_from(EDGES), st.integers(0, 700_000)), level=st.integers(0, 4),
       encrypt=st.booleans())
def test_split_store_join_returns_the_input(shared, size, level, encrypt):
    data = os.urandom(size)
    reference, addresses = upload(shared, data, level, encrypt)
    assert len(reference) == (64 if encrypt else 32)
    assert open_file(shared.store, reference).read_all() == data
    assert_all_verify(shared, addresses)


def test_several_mib_at_the_default_level(shared):
    data = os.urandom(5 * (1 << 20) + 12345)
    reference, addresses = upload(shared, data, 1, False)
    joiner = open_file(shared.store, reference)
    assert joiner.size == len(data) and joiner.read_all() == data
    assert b"".join(joiner.read(3_000_000, 3_000_100)) == data[3_000_000:3_000_100]
    assert_all_verify(shared, addresses)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.integers(4097, 600_000), seed=st.integers(0, 2**32 - 1), encrypt=st.booleans())
def test_a_missing_chunk_is_an_error_not_partial_data(shared, size, seed, encrypt):
    data = os.urandom(size)
    reference, addresses = upload(shared, data, 0, encrypt)
    victim = random.Random(seed).choice([a for a in addresses if a != reference[:32]])
    assert shared.store.delete(victim)
    got = bytearray()
    with pytest.raises(ChunkMissing) as err:
        for piece in open_file(shared.store, reference).read():
            got += piece
    assert err.value.address == victim
    assert bytes(got) == data[: len(got)] and len(got) < len(data)  # what came before the hole, nothing made up
    assert isinstance(err.value, FileError)
