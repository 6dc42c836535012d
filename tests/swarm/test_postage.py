"""The stamp issuer: fresh slots per bucket, the bound of a bucket, positions split between issuers."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.swarm.errors import BucketFull, InvalidStamp
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.signer import Signer, checksum_address
from chunkstore.swarm.stamp import bucket_of, split_index, validate_stamp

SIGNER = Signer(keccak256(b"postage test owner"))
BATCH = keccak256(b"postage test batch")


def issuer(depth: int = 6, bucket_depth: int = 2, **kw: object) -> StampIssuer:
    ticks = itertools.count(1)
    return StampIssuer(SIGNER, BATCH, depth, bucket_depth, clock=lambda: next(ticks), **kw)  # type: ignore[arg-type]


def address(n: int) -> bytes:
    return keccak256(b"chunk %d" % n)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=40, unique=True))
def test_every_stamp_is_valid_and_no_slot_is_handed_out_twice(ns: list[int]) -> None:
    iss = issuer(depth=8, bucket_depth=2)
    seen = set()
    for n in ns:
        addr = address(n)
        stamp = iss.stamp(addr)
        validate_stamp(stamp, addr, SIGNER.address, 8, 2)  # owner, bucket, position bound
        bucket, position = split_index(stamp.index)
        assert bucket == bucket_of(addr, 2)
        assert (bucket, position) not in seen
        seen.add((bucket, position))
    per_bucket = {}
    for bucket, _ in seen:
        per_bucket[bucket] = per_bucket.get(bucket, 0) + 1
    # positions run 0, 1, 2, ... in each bucket: the counter, not a random pick
    assert seen == {(b, p) for b, k in per_bucket.items() for p in range(k)}


def test_timestamps_come_from_the_clock_and_grow() -> None:
    iss = issuer()
    stamps = [iss.stamp(address(n)) for n in range(5)]
    assert [s.timestamp_ns for s in stamps] == [1, 2, 3, 4, 5]
    assert iss.stamp(address(9), timestamp_ns=77).timestamp_ns == 77


def _same_bucket(n: int, bucket_depth: int) -> list[bytes]:
    first = bucket_of(address(0), bucket_depth)
    return [a for a in (address(i) for i in range(5000)) if bucket_of(a, bucket_depth) == first][:n]


def test_immutable_batch_refuses_a_full_bucket() -> None:
    iss = issuer(depth=4, bucket_depth=2)  # 4 positions per bucket
    addrs = _same_bucket(5, 2)
    for a in addrs[:4]:
        iss.stamp(a)
    assert iss.issued(bucket_of(addrs[0], 2)) == 4
    with pytest.raises(BucketFull, match="overissued"):
        iss.stamp(addrs[4])


def test_mutable_batch_starts_its_bucket_over() -> None:
    iss = issuer(depth=4, bucket_depth=2, immutable=False)
    addrs = _same_bucket(5, 2)
    positions = [split_index(iss.stamp(a).index)[1] for a in addrs]
    assert positions == [0, 1, 2, 3, 0]


def test_positions_split_a_bucket_between_issuers() -> None:
    a, b = issuer(depth=6, bucket_depth=2, positions=range(0, 8)), issuer(depth=6, bucket_depth=2, positions=range(8, 16))
    addrs = _same_bucket(6, 2)
    got_a = [split_index(a.stamp(x).index)[1] for x in addrs[:3]]
    got_b = [split_index(b.stamp(x).index)[1] for x in addrs[3:]]
    assert got_a == [0, 1, 2] and got_b == [8, 9, 10]


def test_pinned_slots_do_not_count() -> None:
    iss = issuer()
    addr = address(1)
    assert split_index(iss.stamp(addr, position=3).index)[1] == 3
    assert split_index(iss.stamp(addr).index)[1] == 0


@pytest.mark.parametrize(
    ("depth", "bucket_depth", "positions"),
    [(4, 5, None), (300, 16, None), (6, 2, range(0, 17)), (6, 2, range(3, 3)), (6, 2, range(0, 8, 2))],
)
def test_impossible_batches_and_ranges_are_refused(depth: int, bucket_depth: int, positions: range | None) -> None:
    with pytest.raises(InvalidStamp):
        StampIssuer(SIGNER, BATCH, depth, bucket_depth, positions=positions)


def test_batch_id_must_be_32_bytes() -> None:
    with pytest.raises(InvalidStamp, match="batch id"):
        StampIssuer(SIGNER, b"short", 6, 2)


# EIP-55's own examples (all lower-case letters, all upper, mixed), and Go's common.Address.Hex of the zero address.
@pytest.mark.parametrize("text", [
    "0x52908400098527886E0F7030069857D2E4169EE7", "0xde709f2102306220921060314715629080e2fb77",
    "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
    "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB", "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
    "0x0000000000000000000000000000000000000000",
])  # fmt: skip
def test_checksum_address_matches_eip55(text: str) -> None:
    assert checksum_address(bytes.fromhex(text[2:])) == text


@given(st.binary(min_size=20, max_size=20))
def test_checksum_address_keeps_the_address_and_cases_letters_by_its_hash(address: bytes) -> None:
    text = checksum_address(address)
    assert text.startswith("0x") and bytes.fromhex(text[2:]) == address
    nibbles = keccak256(address.hex().encode()).hex()
    for c, n in zip(text[2:], nibbles, strict=False):
        assert c.isdigit() or c.isupper() == (int(n, 16) >= 8)


def test_checksum_address_refuses_a_wrong_length() -> None:
    with pytest.raises(ValueError, match="20 bytes"):
        checksum_address(bytes(19))
