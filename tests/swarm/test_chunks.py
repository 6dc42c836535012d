"""CAC, SOC, signer, stamp and proximity: round trips and typed refusals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.swarm.cac import is_valid_cac, make_cac, validate_cac
from chunkstore.swarm.constants import MAX_PO, STAMP_SIZE
from chunkstore.swarm.errors import InvalidChunk, InvalidSignature, InvalidStamp
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.proximity import proximity
from chunkstore.swarm.signer import Signer, recover_address
from chunkstore.swarm.soc import make_soc, parse_soc, soc_address, validate_soc, verify_soc_signature
from chunkstore.swarm.stamp import bucket_of, check_stamp_slot, parse_stamp, sign_stamp, split_index, validate_stamp

keys = st.binary(min_size=32, max_size=32).filter(lambda k: 0 < int.from_bytes(k, "big") < 2**256 - 2**128)
ALICE = Signer(bytes.fromhex("11" * 32))
BOB = Signer(bytes.fromhex("22" * 32))


# -- signer ------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(key=keys, message=st.binary(min_size=32, max_size=32))
def test_sign_recover_round_trip(key, message):
    signer = Signer(key)
    sig = signer.sign(message)
    assert len(sig) == 65 and sig[64] in (27, 28)
    assert recover_address(sig, message) == signer.address
    assert recover_address(sig, bytes([message[0] ^ 1]) + message[1:]) != signer.address


def test_known_private_key_address():
    # private key 1 is the generator point; its Ethereum address is well known
    assert Signer((1).to_bytes(32, "big")).address.hex() == "7e5f4552091a69125d5dfcb7b8c2659029395bdf"


def test_signing_is_deterministic():
    assert ALICE.sign(b"x" * 32) == ALICE.sign(b"x" * 32)


@pytest.mark.parametrize("sig", [b"", bytes(64), bytes(66)])
def test_signature_length_refused(sig):
    with pytest.raises(InvalidSignature, match="must be 65"):
        recover_address(sig, bytes(32))


@pytest.mark.parametrize("v", [0, 1, 26, 35, 255])
def test_bad_recovery_byte_refused(v):
    sig = ALICE.sign(bytes(32))
    with pytest.raises(InvalidSignature, match="v="):
        recover_address(sig[:64] + bytes([v]), bytes(32))


def test_high_recovery_codes_accepted_like_the_reference():
    # compact codes 31/32 (the "compressed" flag) recover the same key
    sig = ALICE.sign(bytes(32))
    assert recover_address(sig[:64] + bytes([sig[64] + 4]), bytes(32)) == ALICE.address


def test_zero_signature_refused():
    with pytest.raises(InvalidSignature):
        recover_address(bytes(64) + b"\x1b", bytes(32))


# -- CAC ---------------------------------------------------------------------

@given(payload=st.binary(max_size=4096))
def test_cac_round_trip(payload):
    address, data = make_cac(payload)
    assert data[:8] == len(payload).to_bytes(8, "little")
    assert is_valid_cac(address, data)
    validate_cac(address, data)


def test_cac_refusals():
    with pytest.raises(InvalidChunk, match="payload is 4097 bytes; at most 4096"):
        make_cac(bytes(4097))
    with pytest.raises(InvalidChunk, match="shorter than the 8-byte span"):
        validate_cac(bytes(32), bytes(7))
    address, data = make_cac(b"hello")
    with pytest.raises(InvalidChunk, match="not to address"):
        validate_cac(address, data + b"!")
    with pytest.raises(InvalidChunk, match="address is 31 bytes"):
        validate_cac(address[:31], data)
    assert not is_valid_cac(address, data[:-1])


# -- SOC ---------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(key=keys, soc_id=st.binary(min_size=32, max_size=32), payload=st.binary(max_size=4096))
def test_soc_round_trip(key, soc_id, payload):
    signer = Signer(key)
    _, wrapped = make_cac(payload)
    soc = make_soc(signer, soc_id, wrapped)
    assert soc.address == keccak256(soc_id, signer.address) == soc_address(soc_id, signer.address)
    parsed = validate_soc(soc.address, soc.data)
    assert parsed.owner == signer.address
    assert parsed.wrapped_data == wrapped
    assert verify_soc_signature(signer.address, soc_id, soc.signature, wrapped).address == soc.address


def test_soc_refusals():
    _, wrapped = make_cac(b"feed update")
    soc = make_soc(ALICE, bytes(32), wrapped)
    with pytest.raises(InvalidChunk, match="at least 105"):
        parse_soc(soc.data[:104])
    with pytest.raises(InvalidChunk, match="at most 4096"):
        parse_soc(soc.data[:97] + (4097).to_bytes(8, "little") + bytes(4097))
    with pytest.raises(InvalidChunk, match="not to address"):
        validate_soc(bytes(32), soc.data)
    with pytest.raises(InvalidSignature, match="not "):
        verify_soc_signature(BOB.address, soc.id, soc.signature, wrapped)
    # a changed payload recovers some other owner, so the address no longer matches
    tampered = soc.data[:-1] + bytes([soc.data[-1] ^ 1])
    with pytest.raises(InvalidChunk):
        validate_soc(soc.address, tampered)


def test_replica_soc_id_must_match_wrapped_address():
    # only the replicas owner key is constrained; checked through its rule, not its key
    from chunkstore.swarm import soc as socmod

    _, wrapped = make_cac(b"replica")
    s = make_soc(ALICE, bytes(32), wrapped)
    original = socmod.REPLICAS_OWNER
    try:
        socmod.REPLICAS_OWNER = ALICE.address
        with pytest.raises(InvalidChunk, match="replica"):
            parse_soc(s.data)
        good_id = b"\x07" + s.wrapped_address[1:]
        ok = make_soc(ALICE, good_id, wrapped)
        assert parse_soc(ok.data).address == ok.address
    finally:
        socmod.REPLICAS_OWNER = original


# -- stamps ------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(
    key=keys,
    address=st.binary(min_size=32, max_size=32),
    batch_id=st.binary(min_size=32, max_size=32),
    bucket_depth=st.integers(0, 16),
    extra_depth=st.integers(0, 16),
    ts=st.integers(0, 2**64 - 1),
    data=st.data(),
)
def test_stamp_round_trip(key, address, batch_id, bucket_depth, extra_depth, ts, data):
    signer = Signer(key)
    depth = bucket_depth + extra_depth
    position = data.draw(st.integers(0, 2**extra_depth - 1))
    stamp = sign_stamp(signer, address, batch_id, bucket_of(address, bucket_depth), position, ts)
    raw = stamp.to_bytes()
    assert len(raw) == STAMP_SIZE
    again = parse_stamp(raw)
    assert again == stamp
    assert again.timestamp_ns == ts and again.position == position
    assert again.recover_owner(address) == signer.address
    validate_stamp(again, address, signer.address, depth, bucket_depth)


def test_stamp_refusals():
    address = bytes.fromhex("ff" * 32)
    batch_id = bytes(32)
    stamp = sign_stamp(ALICE, address, batch_id, bucket_of(address, 16), 3, 1)
    with pytest.raises(InvalidStamp, match="112 bytes; must be 113"):
        parse_stamp(stamp.to_bytes()[:-1])
    with pytest.raises(InvalidStamp, match="not by the batch owner"):
        validate_stamp(stamp, address, BOB.address, 20, 16)
    with pytest.raises(InvalidStamp, match="not by the batch owner"):
        validate_stamp(stamp, bytes(32), ALICE.address, 20, 16)  # other chunk: other signer recovered
    with pytest.raises(InvalidStamp, match="position 3 out of range"):
        validate_stamp(stamp, address, ALICE.address, 17, 16)
    wrong_bucket = sign_stamp(ALICE, address, batch_id, 5, 0, 1)
    with pytest.raises(InvalidStamp, match="bucket 5 does not match"):
        check_stamp_slot(wrong_bucket, address, 20, 16)
    with pytest.raises(InvalidStamp, match="v="):
        validate_stamp(parse_stamp(stamp.to_bytes()[:-1] + b"\x00"), address, ALICE.address, 20, 16)


def test_bucket_helpers():
    assert bucket_of(bytes.fromhex("abcd" + "00" * 30), 16) == 0xABCD
    assert bucket_of(bytes.fromhex("ffffffff" + "00" * 28), 0) == 0
    assert bucket_of(bytes.fromhex("ffffffff" + "00" * 28), 32) == 0xFFFFFFFF
    assert split_index(bytes.fromhex("0000000000080303")) == (0, 0x80303)


# -- proximity ---------------------------------------------------------------

def slow_proximity(a: bytes, b: bytes) -> int:
    bits = min(32, 8 * len(a), 8 * len(b))
    for i in range(bits):
        if (a[i // 8] >> (7 - i % 8)) & 1 != (b[i // 8] >> (7 - i % 8)) & 1:
            return i
    return MAX_PO


@given(a=st.binary(max_size=33), b=st.binary(max_size=33))
def test_proximity_matches_bitwise_definition(a, b):
    assert proximity(a, b) == slow_proximity(a, b) == proximity(b, a)


def test_proximity_edges():
    assert proximity(bytes(32), bytes(32)) == 31  # capped at 31, never 32
    assert proximity(b"\x80", bytes(32)) == 0
    assert proximity(b"\x64", b"\x64\xff\xff") == 31  # a 1-byte anchor matches its whole prefix
    assert proximity(b"\x64", b"\x65") == 7
    assert proximity(b"", bytes(32)) == 31
    assert proximity(bytes(4) + b"\xff", bytes(5)) == 31  # bytes past the 4th are ignored
