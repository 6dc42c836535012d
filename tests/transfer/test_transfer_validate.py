"""The batch validator gives admit's verdict on every kind of record, valid or not, and admit's message."""

from __future__ import annotations

import os

import numpy as np
import pytest

from chunkstore.store.admission import admit
from chunkstore.store.batchstore import encode_batch
from chunkstore.swarm.constants import ChunkType
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.soc import make_soc
from chunkstore.swarm.stamp import Stamp, bucket_of, sign_stamp
from chunkstore.transfer import fastcheck
from chunkstore.transfer.fastcheck import OK, BatchTable, Validator
from tests.store.helpers import OTHER_KEY, Stamper, make_batch, random_cac, random_soc, signer

B1 = make_batch(1, depth=20, bucket_depth=16)
B2 = make_batch(2, depth=17, bucket_depth=16)  # 2 positions per bucket
B0 = make_batch(3, depth=4, bucket_depth=0)  # one bucket of 16 positions
UNKNOWN = make_batch(4)


def _corpus() -> list[tuple[str, bytes, bytes, bytes]]:
    """(label, address, data, stamp) of valid and invalid records."""
    s1, s2, s0 = Stamper(B1), Stamper(B2), Stamper(B0)
    out = []
    for size in (0, 1, 31, 32, 33, 100, 4095, 4096):
        a, d = random_cac(size)
        out.append((f"cac {size}", a, d, s1.stamp(a).to_bytes()))
    for size in (0, 10, 4096):
        a, d = random_soc(size)
        out.append((f"soc {size}", a, d, s1.stamp(a).to_bytes()))
    a, d = random_cac(50)
    out.append(("bucket depth 0", a, d, s0.stamp(a).to_bytes()))
    out.append(("unknown batch", a, d, Stamper(UNKNOWN).stamp(a).to_bytes()))
    out.append(("wrong signer", a, d, Stamper(B1, key=OTHER_KEY).stamp(a).to_bytes()))
    out.append(("wrong bucket", a, d, s1.stamp(a, bucket=(bucket_of(a, 16) + 1) % 65536).to_bytes()))
    out.append(("position too big", a, d, s2.stamp(a, position=2).to_bytes()))
    out.append(("last position", a, d, s2.stamp(a, position=1).to_bytes()))
    st = s1.stamp(a)
    out.append(("v out of range", a, d, Stamp(st.batch_id, st.index, st.timestamp, st.signature[:64] + b"\x05").to_bytes()))
    out.append(("garbage signature", a, d, Stamp(st.batch_id, st.index, st.timestamp, b"\xff" * 64 + b"\x1b").to_bytes()))
    out.append(("high v", a, d, Stamp(st.batch_id, st.index, st.timestamp, st.signature[:64] + bytes([st.signature[64] + 4])).to_bytes()))
    out.append(("stamp for other chunk", a, d, s1.stamp(random_cac(5)[0]).to_bytes()))
    b, e = random_cac(60)
    out.append(("data of another chunk", a, e, s1.stamp(a).to_bytes()))
    out.append(("too long", a, d + bytes(5000), s1.stamp(a).to_bytes()))
    out.append(("too short", a, b"1234567", s1.stamp(a).to_bytes()))
    sa, sd = random_soc(20)
    out.append(("soc with flipped payload", sa, sd[:-1] + bytes([sd[-1] ^ 1]), s1.stamp(sa).to_bytes()))
    out.append(("soc at a wrong address", a, sd, s1.stamp(a).to_bytes()))
    _, wrapped = random_cac(40)
    rep = make_soc(signer(OTHER_KEY), os.urandom(32), wrapped)
    out.append(("soc of another owner", rep.address, rep.data, s1.stamp(rep.address).to_bytes()))
    return out


def _table(*batches) -> BatchTable:
    return BatchTable({b.id: (b, encode_batch(b)) for b in batches})


def _check(validator: Validator, records) -> tuple[np.ndarray, np.ndarray]:
    addresses = np.frombuffer(b"".join(r[1] for r in records), np.uint8).reshape(-1, 32)
    stamps = np.frombuffer(b"".join(r[3] for r in records), np.uint8).reshape(-1, 113)
    data = b"".join(r[2] for r in records)
    lengths = np.array([len(r[2]) for r in records], np.int64)
    offsets = np.r_[0, np.cumsum(lengths)[:-1]].astype(np.int64)
    return validator.check(addresses, stamps, np.frombuffer(data, np.uint8), offsets, lengths)


def test_verdicts_match_admit():
    table = _table(B1, B2, B0)
    records = _corpus()
    status, kinds = _check(Validator(table, rows=7), records)  # several groups, one partly filled
    for (label, address, data, stamp), st, kind in zip(records, status, kinds, strict=True):
        try:
            admitted = admit(data, stamp, table.lookup, address)
        except SwarmError:
            assert st != OK, f"{label}: accepted, admit refuses"
            continue
        assert st == OK, f"{label}: refused, admit accepts"
        assert kind == admitted.chunk_type, label
    assert sum(st == OK for st in status) >= 14


def test_explain_gives_admits_message_and_catches_disagreement():
    table = _table(B1)
    v = Validator(table)
    a, d = random_cac(10)
    stamp = Stamper(B1, key=OTHER_KEY).stamp(a).to_bytes()
    assert "not by the batch owner" in v.explain(a, d, stamp)
    with pytest.raises(RuntimeError, match="internal error"):
        v.explain(a, d, Stamper(B1).stamp(a).to_bytes())


def test_raw_recovery_matches_coincurve():
    sig_signer = signer()
    digests, sigs = [], []
    for i in range(20):
        digest = os.urandom(32)
        sig = sig_signer.sign(digest)
        if i % 4 == 1:
            sig = sig[:64] + bytes([55 - sig[64]])  # the other parity: recovers another key
        if i % 4 == 2:
            sig = b"\xff" * 32 + sig[32:]  # r out of range
        if i % 4 == 3:
            sig = sig[:64] + b"\x00"  # v below 27
        digests.append(digest)
        sigs.append(sig)
    raw = fastcheck._RECOVER(b"".join(sigs), b"".join(digests), 20)
    public = fastcheck._recover_public(b"".join(sigs), b"".join(digests), 20)
    assert raw[0] == public[0] and (raw[1] == public[1]).all()
    assert raw[1].sum() == 10


def test_soc_type_is_reported():
    table = _table(B1)
    s1 = Stamper(B1)
    sa, sd = random_soc(30)
    records = [("soc", sa, sd, s1.stamp(sa).to_bytes())]
    status, kinds = _check(Validator(table), records)
    assert status.tolist() == [OK] and kinds.tolist() == [ChunkType.SOC]


def test_bucket_depth_32_and_large_depths():
    big = make_batch(5, depth=40, bucket_depth=32)
    table = _table(big)
    a, d = random_cac(10)
    stamp = sign_stamp(signer(), a, big.id, bucket_of(a, 32), 255, 1).to_bytes()
    status, _ = _check(Validator(table), [("b32", a, d, stamp)])
    assert status.tolist() == [OK]
