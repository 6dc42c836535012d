"""Dispersed replicas of a root chunk: ids, dispersion, the SOCs themselves."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.file.replicas import REPLICAS_KEY, replica_chunks, replica_ids
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.redundancy.level import Level, replica_count
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import REPLICAS_OWNER, parse_soc


def test_replica_key_is_bees_replica_owner():
    assert Signer(REPLICAS_KEY).address == REPLICAS_OWNER


@settings(max_examples=50, deadline=None)
@given(address=st.binary(min_size=32, max_size=32))
def test_ids_are_dispersed_and_nested(address):
    previous: list[bytes] = []
    for level in Level:
        ids = replica_ids(address, level)
        assert len(ids) == replica_count(level)
        assert all(i[1:] == address[1:] for i in ids)
        # Bee's dispersed(): the first `level` bits of the replica addresses are all different.
        prefixes = {keccak256(i, REPLICAS_OWNER)[0] >> (8 - level) for i in ids} if ids else set()
        assert len(prefixes) == len(ids)
        assert ids[: len(previous)] == previous  # a higher level only adds replicas
        previous = ids


def test_replica_socs_wrap_the_padded_root():
    address, data = make_cac(b"root chunk payload")
    replicas = replica_chunks(address, data, Level.STRONG)
    assert len(replicas) == 4
    for soc_address, soc_data in replicas:
        soc = parse_soc(soc_data)
        assert soc.address == soc_address and soc.owner == REPLICAS_OWNER
        assert soc.wrapped_address == address
        assert soc.wrapped_data == data + bytes(4104 - len(data))
    assert replica_chunks(address, data, Level.NONE) == []
