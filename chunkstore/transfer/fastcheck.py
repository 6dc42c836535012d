"""Validation of many ``(address, data, stamp)`` records at once, with the verdict of ``admit``.

Gives, for each record, exactly what ``admission.admit(data, stamp, lookup,
address)`` decides one record at a time (accepted as CAC, accepted as SOC,
or refused), but hashes in batches: BMT hashes through
:func:`chunkstore.swarm.bmt.backend.bmt_hashes` (numba kernels, or the pysha3
fallback), the keccaks of stamp digests, personal-sign digests and public
keys through :func:`chunkstore.swarm.bmt.backend.keccak256_batch`; only the signature
recoveries (coincurve) remain one call per record. Bucket and position
bounds are numpy column checks.

The verdicts must agree with ``admit``: the error message of a refused
record is ``admit``'s own (``explain``), and ``explain`` fails loudly if
``admit`` would have accepted what the batch path refused.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
from coincurve import PublicKey

from chunkstore.store.admission import admit
from chunkstore.store.batchstore import Batch
from chunkstore.store.errors import UnknownBatch
from chunkstore.swarm.bmt import ROW_STRIDE
from chunkstore.swarm.constants import MAX_CAC_SIZE as MAX_CAC
from chunkstore.swarm.constants import MAX_SOC_SIZE as MAX_SOC
from chunkstore.swarm.constants import REPLICAS_OWNER, ChunkType
from chunkstore.swarm.constants import SOC_HEADER_SIZE as SOC_HEADER
from chunkstore.swarm.constants import SPAN_SIZE as SPAN
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.signer import PERSONAL_PREFIX

from .bytecopy import scatter

OK = 0
UNKNOWN_BATCH = 1
BAD_CHUNK = 2
BAD_STAMP = 3

_PERSONAL = PERSONAL_PREFIX + b"32"  # personal-sign prefix of a 32-byte message
_REPLICAS = np.frombuffer(REPLICAS_OWNER, np.uint8)


class BatchTable:
    """The batches an import validates against: id -> (batch, its stored record)."""

    def __init__(self, batches: dict[bytes, tuple[Batch, bytes]]) -> None:
        self.entries = dict(batches)
        self._derive()

    def _derive(self) -> None:
        """Columns of the batches, indexed by position, for vectorised checks."""
        ids = list(self.entries)
        self.position = {bid: i for i, bid in enumerate(ids)}
        # The ids sorted as fixed 32-byte strings (every id is exactly 32 bytes, so none compares equal to
        # another), for looking up a whole column of stamps at once.
        self._sorted_ids = np.array(sorted(ids), dtype="S32")
        self._sorted_positions = np.array([self.position[b] for b in sorted(ids)], np.int64)
        k = max(1, len(ids))
        self.owners = np.zeros((k, 20), np.uint8)
        self.depths = np.zeros(k, np.int64)
        self.bucket_depths = np.zeros(k, np.int64)
        for i, bid in enumerate(ids):
            b = self.entries[bid][0]
            self.owners[i] = np.frombuffer(b.owner, np.uint8)
            self.depths[i] = b.depth
            self.bucket_depths[i] = b.bucket_depth

    def __getstate__(self) -> dict[str, Any]:
        return {"entries": self.entries}  # workers get the batches, and derive the columns themselves

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.entries = state["entries"]
        self._derive()

    def positions_of(self, batch_ids: np.ndarray) -> np.ndarray:
        """Each row's batch position (uint8 (n, 32) batch ids), -1 for a batch the table does not hold."""
        n = len(batch_ids)
        if not len(self._sorted_ids):
            return np.full(n, -1, np.int64)
        ids = np.ascontiguousarray(batch_ids, np.uint8).view("S32").reshape(n)
        at = np.minimum(np.searchsorted(self._sorted_ids, ids), len(self._sorted_ids) - 1)
        return np.where(self._sorted_ids[at] == ids, self._sorted_positions[at], -1)

    def lookup(self, batch_id: bytes) -> tuple[Batch, bytes]:
        found = self.entries.get(bytes(batch_id))
        if found is None:
            raise UnknownBatch(batch_id)
        return found


class Validator:
    """Checks records in groups of at most ``rows`` against a ``BatchTable``."""

    def __init__(self, table: BatchTable, rows: int = 256) -> None:
        # The numba kernels compile (or load from the cache) here, in the worker.
        from chunkstore.swarm.bmt import backend as hashing

        self.hashing = hashing
        self.table = table
        self.rows = np.zeros((rows, ROW_STRIDE), np.uint8)
        self._hashes = np.zeros((rows, 32), np.uint8)
        self._zero = np.zeros(rows, np.int64)

    def check(
        self, addresses: np.ndarray, stamps: np.ndarray, src: np.ndarray, offsets: np.ndarray, lengths: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(status, kind)`` per record: status OK or the first check that failed; kind CAC or SOC.

        Record i's data is ``src[offsets[i] : offsets[i] + lengths[i]]``.
        """
        n = len(lengths)
        status = np.zeros(n, np.uint8)
        kind = np.zeros(n, np.uint8)
        cap = self.rows.shape[0]
        for lo in range(0, n, cap):
            hi = min(n, lo + cap)
            s, k = self._check(addresses[lo:hi], stamps[lo:hi], src, offsets[lo:hi], lengths[lo:hi])
            status[lo:hi] = s
            kind[lo:hi] = k
        return status, kind

    def _check(
        self, addresses: np.ndarray, stamps: np.ndarray, src: np.ndarray, offsets: np.ndarray, lengths: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        n = len(lengths)
        lengths = np.asarray(lengths, np.int64)
        status = np.zeros(n, np.uint8)
        kind = np.zeros(n, np.uint8)
        bidx = self.table.positions_of(stamps[:, :32])
        status[bidx < 0] = UNKNOWN_BATCH  # admit looks the batch up before anything else
        fits = (lengths >= SPAN) & (lengths <= MAX_SOC)
        rows = self.rows
        pick = np.flatnonzero(fits)
        scatter(src, np.asarray(offsets, np.int64)[pick], lengths[pick], rows.reshape(-1), pick * ROW_STRIDE)
        is_cac = self._cac(addresses, lengths, n)
        is_soc = np.zeros(n, bool)
        soc_candidates = np.flatnonzero(~is_cac & (lengths >= SOC_HEADER + SPAN) & fits & (status == OK))
        if len(soc_candidates):
            is_soc[soc_candidates] = self._soc(addresses, lengths, soc_candidates)
        kind[is_cac] = ChunkType.CAC
        kind[is_soc] = ChunkType.SOC
        status[(status == OK) & ~is_cac & ~is_soc] = BAD_CHUNK
        good = np.flatnonzero(status == OK)
        if len(good):
            stamp_ok = self._stamps(addresses[good], stamps[good], bidx[good])
            status[good[~stamp_ok]] = BAD_STAMP
        return status, kind

    def _cac(self, addresses: np.ndarray, lengths: np.ndarray, n: int) -> np.ndarray:
        ok = (lengths >= SPAN) & (lengths <= MAX_CAC)
        lens = np.where(ok, lengths, SPAN)  # a row that cannot be a CAC is hashed as a bare span, then ignored
        self.hashing.bmt_hashes(self.rows[:n], lens, self._zero[:n], b"", self._hashes)
        verdict: np.ndarray = ok & (self._hashes[:n] == addresses).all(axis=1)
        return verdict

    def _soc(self, addresses: np.ndarray, lengths: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Which of the rows ``idx`` are valid SOCs at their address (soc.parse_soc + the address check)."""
        h = self.hashing
        m = len(idx)
        sub = self.rows[idx]
        wrapped = np.zeros((m, 32), np.uint8)
        h.bmt_hashes(sub, lengths[idx], np.full(m, SOC_HEADER, np.int64), b"", wrapped)
        ids = sub[:, :32]
        owners, recovered = _recover_owners(h, sub[:, 32:SOC_HEADER], np.concatenate([ids, wrapped], axis=1))
        replica_bad = (owners == _REPLICAS).all(axis=1) & (wrapped[:, 1:] != ids[:, 1:]).any(axis=1)
        soc_addr = np.zeros((m, 32), np.uint8)
        h.keccak256_batch(np.concatenate([ids, owners], axis=1), np.full(m, 52, np.int64), soc_addr)
        verdict: np.ndarray = recovered & ~replica_bad & (soc_addr == addresses[idx]).all(axis=1)
        return verdict

    def _stamps(self, addresses: np.ndarray, stamps: np.ndarray, bidx: np.ndarray) -> np.ndarray:
        """validate_stamp for each row: signer is the batch owner, bucket matches, position in range."""
        h = self.hashing
        g = len(bidx)
        digests = np.zeros((g, 32), np.uint8)
        h.keccak256_batch(np.concatenate([addresses, stamps[:, :48]], axis=1), np.full(g, 80, np.int64), digests)
        signers, recovered = _recover_owners(h, stamps[:, 48:], digests, hashed=True)
        ok = recovered & (signers == self.table.owners[bidx]).all(axis=1)
        bd = self.table.bucket_depths[bidx]
        free_bits = self.table.depths[bidx] - bd
        prefix = _be32(addresses[:, :4]).astype(np.uint64)
        want = prefix >> (32 - bd).astype(np.uint64)
        bucket = _be32(stamps[:, 32:36]).astype(np.uint64)
        pos = _be32(stamps[:, 36:40]).astype(np.uint64)
        bound = np.left_shift(np.uint64(1), np.minimum(free_bits, 63).astype(np.uint64))
        in_range = (free_bits >= 32) | (pos < bound)
        verdict: np.ndarray = ok & (bucket == want) & in_range & (free_bits >= 0)
        return verdict

    def explain(self, address: bytes, data: bytes, stamp: bytes) -> str:
        """``admit``'s own refusal of a record the batch path refused."""
        try:
            admit(data, stamp, self.table.lookup, address)
        except SwarmError as exc:
            return str(exc)
        raise RuntimeError(f"internal error: the batch validator refused chunk {address.hex()} that admit accepts")


def warm_up() -> None:
    """Load (or compile) the hashing kernels ``Validator`` calls, in this process.

    The importer calls it before forking its workers, so they start with the
    machine code in place.
    """
    from chunkstore.swarm.bmt import backend as hashing

    rows = np.zeros((1, ROW_STRIDE), np.uint8)
    one = np.full(1, SPAN, np.int64)
    hashing.bmt_hashes(rows, one, np.zeros(1, np.int64), b"", np.zeros((1, 32), np.uint8))
    hashing.keccak256_batch(rows[:, :64], np.full(1, 64, np.int64), np.zeros((1, 32), np.uint8))
    scatter(rows[0], np.zeros(1, np.int64), np.ones(1, np.int64), rows.reshape(-1), np.ones(1, np.int64))


def _recover_public(sigs: bytes, digests: bytes, m: int) -> tuple[bytearray, np.ndarray]:
    """Uncompressed public keys (64 bytes each, without the 04 prefix) recovered from m signatures over m digests.

    coincurve's public API: a PublicKey object per signature.
    """
    pubs = bytearray(64 * m)
    recovered = np.zeros(m, bool)
    for j in range(m):
        sig = sigs[65 * j : 65 * j + 65]
        v = sig[64]
        if not 27 <= v < 35:
            continue
        try:
            key = PublicKey.from_signature_and_message(
                sig[:64] + bytes(((v - 27) & 3,)), digests[32 * j : 32 * j + 32], hasher=None
            )
        except (ValueError, TypeError):
            continue
        pubs[64 * j : 64 * j + 64] = key.format(compressed=False)[1:]
        recovered[j] = True
    return pubs, recovered


Recoverer = Callable[[bytes, bytes, int], tuple[bytearray, np.ndarray]]


def _raw_recoverer() -> Recoverer:
    """The same recovery straight through coincurve's libsecp256k1 binding, with reused C buffers.

    The object wrappers cost about a sixth of a recovery; this is the hot loop
    of an import. Falls back to the public API if the binding is not there.
    """
    try:
        from coincurve._libsecp256k1 import ffi, lib
        from coincurve.context import GLOBAL_CONTEXT
    except ImportError:  # pragma: no cover - another coincurve layout
        return _recover_public
    ctx = GLOBAL_CONTEXT.ctx
    rsig = ffi.new("secp256k1_ecdsa_recoverable_signature *")
    pub = ffi.new("secp256k1_pubkey *")
    out = ffi.new("unsigned char[65]")
    out_len = ffi.new("size_t *")
    out_buf = ffi.buffer(out, 65)
    parse = lib.secp256k1_ecdsa_recoverable_signature_parse_compact
    recover = lib.secp256k1_ecdsa_recover
    serialize = lib.secp256k1_ec_pubkey_serialize
    uncompressed = lib.SECP256K1_EC_UNCOMPRESSED

    def recover_raw(sigs: bytes, digests: bytes, m: int) -> tuple[bytearray, np.ndarray]:
        pubs = bytearray(64 * m)
        recovered = np.zeros(m, bool)
        for j in range(m):
            v = sigs[65 * j + 64]
            if not 27 <= v < 35:
                continue
            if not parse(ctx, rsig, sigs[65 * j : 65 * j + 64], (v - 27) & 3):
                continue
            if not recover(ctx, pub, rsig, digests[32 * j : 32 * j + 32]):
                continue
            out_len[0] = 65
            serialize(ctx, out, out_len, pub, uncompressed)
            pubs[64 * j : 64 * j + 64] = out_buf[1:65]
            recovered[j] = True
        return pubs, recovered

    return recover_raw


_RECOVER: Recoverer = _raw_recoverer()


def _be32(cols: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(cols).view(">u4").reshape(-1)


def _recover_owners(h: ModuleType, sigs: np.ndarray, digests: np.ndarray, *, hashed: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Ethereum addresses of the personal-sign signers of ``digests`` (rows of 32 bytes, or of 64 to hash first).

    Returns ``(owners (m, 20), recovered (m,) bool)``; a signature that does
    not recover (bad v, not on the curve) gives False.
    """
    m = len(sigs)
    if not hashed and digests.shape[1] != 32:
        d = np.zeros((m, 32), np.uint8)
        h.keccak256_batch(np.ascontiguousarray(digests), np.full(m, digests.shape[1], np.int64), d)
        digests = d
    personal = np.zeros((m, 60), np.uint8)
    personal[:, :28] = np.frombuffer(_PERSONAL, np.uint8)
    personal[:, 28:] = digests
    signed = np.zeros((m, 32), np.uint8)
    h.keccak256_batch(personal, np.full(m, 60, np.int64), signed)
    pubs, recovered = _RECOVER(np.ascontiguousarray(sigs).tobytes(), signed.tobytes(), m)
    hashes = np.zeros((m, 32), np.uint8)
    h.keccak256_batch(np.frombuffer(pubs, np.uint8).reshape(m, 64), np.full(m, 64, np.int64), hashes)
    hashes[~recovered] = 0
    return hashes[:, 12:], recovered
