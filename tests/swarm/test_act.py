"""ACT primitives (``chunkstore.swarm.act``) against Bee's fixed vectors and values derived step by step from
its Go code (``pkg/accesscontrol``: session.go, access.go, grantee.go, history.go; ``pkg/manifest/simple``).

The ECDH here is redone on the curve in plain Python (affine double-and-add), independent of coincurve,
so a secret computed the wrong way (a padded x, the y coordinate, a hashed point) cannot pass."""

from __future__ import annotations

import json
import random
from pathlib import Path

import coincurve
import pytest

from chunkstore.swarm import act
from chunkstore.swarm.keccak import keccak256

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "testdata" / "act" / "bee_accesscontrol_vectors.json").read_text()
)

_P = 2**256 - 2**32 - 977
_G = (
    0x79BE667EF9DCBBAC55A06295CE870B07029BFCDB2DCE28D959F2815B16F81798,
    0x483ADA7726A3C4655DA4FBFC0E1108A8FD17B448A68554199C47D08FFB10D4B8,
)


def _add(a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:
    if a is None:
        return b
    if b is None:
        return a
    if a[0] == b[0] and (a[1] + b[1]) % _P == 0:
        return None
    if a == b:
        m = 3 * a[0] * a[0] * pow(2 * a[1], -1, _P) % _P
    else:
        m = (b[1] - a[1]) * pow(b[0] - a[0], -1, _P) % _P
    x = (m * m - a[0] - b[0]) % _P
    return x, (m * (a[0] - x) - a[1]) % _P


def _mul(k: int, point: tuple[int, int]) -> tuple[int, int]:
    out = None
    while k:
        if k & 1:
            out = _add(out, point)
        point = _add(point, point)  # type: ignore[assignment]
        k >>= 1
    assert out is not None
    return out


def _point(key: coincurve.PublicKey) -> tuple[int, int]:
    raw = key.format(compressed=False)
    return int.from_bytes(raw[1:33], "big"), int.from_bytes(raw[33:], "big")


def _go_secret(private: bytes, public: coincurve.PublicKey) -> bytes:
    """``publicKey.ScalarMult(X, Y, d.Bytes())`` then ``x.Bytes()``: big-endian, no leading zeros."""
    x = _mul(int.from_bytes(private, "big"), _point(public))[0]
    return x.to_bytes((x.bit_length() + 7) // 8, "big")


def _keys() -> list[bytes]:
    return [bytes.fromhex(k) for k in VECTORS["private_keys"]]


def _pub(private: bytes) -> coincurve.PublicKey:
    return coincurve.PrivateKey(private).public_key


def test_lookup_keys_are_bees():
    """TestAddNewGranteeToContent: session key 1, lookup key of each grantee (keccak(secret | 0x00))."""
    keys = _keys()
    session = keys[VECTORS["session_key_index"]]
    for index, expected in VECTORS["lookup_keys"].items():
        lookup, _ = act.access_keys(session, _pub(keys[int(index)]))
        assert lookup.hex() == expected


def test_session_keys_follow_the_go_code_step_by_step():
    keys = _keys()
    for a in keys:
        for b in keys:
            secret = _go_secret(a, _pub(b))
            assert act.shared_secret(a, _pub(b)) == secret
            assert act.session_keys(a, _pub(b), []) == [secret]  # no nonces: the bare secret
            lookup, decryption = act.access_keys(a, _pub(b))
            assert lookup == keccak256(secret + b"\x00")
            assert decryption == keccak256(secret + b"\x01")
            # both sides of the pair derive the same keys (a grantee opens with its key and the publisher's)
            assert act.access_keys(b, _pub(a)) == (lookup, decryption)


def test_a_secret_with_a_leading_zero_byte_is_hashed_short():
    """``big.Int.Bytes()`` drops leading zeros: about one pair in 256 hashes a 31-byte secret."""
    rng = random.Random(7)
    base = _keys()[0]
    for _ in range(5000):
        other = rng.randbytes(32)
        full = _pub(other).multiply(base).format(compressed=False)[1:33]
        if full[0] == 0:
            break
    else:
        pytest.fail("no pair with a leading zero byte found")
    secret = act.shared_secret(base, _pub(other))
    assert secret == full.lstrip(b"\x00") and len(secret) < 32
    assert secret == _go_secret(base, _pub(other))
    assert act.access_keys(base, _pub(other))[0] == keccak256(full.lstrip(b"\x00") + b"\x00")
    assert act.access_keys(base, _pub(other))[0] != keccak256(full + b"\x00")


def test_reference_encryption_is_the_counter_key_stream_without_padding():
    """``encryption.New(key, 0, 0, keccak).Encrypt``: segment i XORed with keccak(keccak(key | uint32_le(i)))."""
    key = keccak256(b"access key")
    for ref in (bytes.fromhex(VECTORS["test_reference"]), bytes(range(64)), b"short"):
        stream = b"".join(keccak256(keccak256(key + i.to_bytes(4, "little"))) for i in range(2))
        expected = bytes(a ^ b for a, b in zip(ref, stream, strict=False))
        assert act.transcrypt_reference(key, ref) == expected
        assert act.transcrypt_reference(key, expected) == ref
        assert len(expected) == len(ref)


def test_public_keys_are_read_as_btcec_reads_them():
    pub = _pub(_keys()[0])
    for raw in (pub.format(compressed=True), pub.format(compressed=False)):
        assert act.uncompressed(act.parse_act_public_key(raw)) == pub.format(compressed=False)
    for bad in (b"", b"\x02" + b"\x00" * 32, pub.format()[:-1], b"\x05" + pub.format(compressed=False)[1:]):
        with pytest.raises(act.InvalidActPublicKey):
            act.parse_act_public_key(bad)


def test_kvs_is_bees_simple_manifest_json():
    """``json.Marshal`` of ``{Entries map[string]*entry}``: keys sorted, metadata (an empty map) left out."""
    entries = {bytes([0xBB]) * 32: bytes([1]) * 32, bytes([0xAA]) * 32: bytes([2]) * 32}
    a, b, one, two = "aa" * 32, "bb" * 32, "01" * 32, "02" * 32
    expected = f'{{"entries":{{"{a}":{{"reference":"{two}"}},"{b}":{{"reference":"{one}"}}}}}}'.encode()
    assert act.encode_kvs(entries) == expected
    assert act.decode_kvs(expected) == entries
    # what Go would also read: metadata present, whitespace, upper-case hex
    other = b'{ "entries": {"' + b"AA" * 32 + b'": {"reference": "' + b"02" * 32 + b'", "metadata": {"k": "v"}}}}'
    assert act.decode_kvs(other) == {bytes([0xAA]) * 32: bytes([2]) * 32}
    for bad in (b"[]", b"{", b'{"entries":{"zz":{"reference":"00"}}}', b'{"entries":{"00":{}}}'):
        with pytest.raises(act.InvalidKvs):
            act.decode_kvs(bad)


def test_history_paths_are_reversed_unix_times():
    """``strconv.FormatInt(math.MaxInt64-unixTime, 10)``: the newest entry sorts first."""
    assert act.history_path(1) == b"9223372036854775806"
    assert act.history_path(1_700_000_000) == str(9223372036854775807 - 1_700_000_000).encode()
    assert act.history_path(2_000_000_000) < act.history_path(1_000_000_000)
    assert act.history_path_time(b"9223372036854775806") == act.MAX_INT64 - 1
    for bad in (b"", b"x", b"1_0", b" 1", b"9" * 20):
        with pytest.raises(act.ActError):
            act.history_path_time(bad)


def test_grantee_list_codec_is_uncompressed_keys_back_to_back():
    """``serialize``: ``elliptic.Marshal`` (65 bytes, 0x04 | X | Y) of each key, concatenated."""
    pubs = [_pub(k) for k in _keys()]
    data = act.encode_grantees(pubs)
    assert data == b"".join(p.format(compressed=False) for p in pubs) and len(data) == 3 * 65
    assert [act.uncompressed(k) for k in act.decode_grantees(data)] == [p.format(compressed=False) for p in pubs]
    assert act.decode_grantees(b"") == []
    # one key that does not parse: no keys at all (deserialize returns an empty list)
    assert act.decode_grantees(data[:65] + b"\x04" + b"\x00" * 64) == []


def test_grantee_add_and_remove_keep_bees_order():
    a, b, c, d = (_pub(bytes([i]) * 32) for i in range(1, 5))

    def raw(keys):
        return [act.uncompressed(k) for k in keys]

    # Add: existing keys and repeats within the add list are skipped, order kept
    assert raw(act.add_grantees([a, b], [c, a, c, d])) == raw([a, b, c, d])
    # Remove: the removed key's place is taken by the last one (Go's swap-and-shrink)
    assert raw(act.remove_grantees([a, b, c, d], [b])) == raw([a, d, c])
    assert raw(act.remove_grantees([a, b, c, d], [a, d])) == raw([c, b])
    assert raw(act.remove_grantees([a, b, c, d], [d])) == raw([a, b, c])
    assert raw(act.remove_grantees([a, b], [c])) == raw([a, b])
