"""Dispersed replicas of a root chunk (Bee: pkg/replicas).

With a redundancy level, Bee also stores the root chunk as 2, 4, 8 or 16
single-owner chunks under a fixed, publicly known key, so a downloader who
knows only the root address can find copies in other neighbourhoods. Replica
``i`` has SOC id ``address`` with its first byte set to ``i``; its address is
``keccak(id | owner)``. Candidates ``i = 0, 1, 2, ...`` are picked so that
the first ``2^k`` picked ones fall into ``2^k`` different neighbourhoods of
depth ``k`` (their first k address bits differ), for k up to the level.

The wrapped chunk is the root chunk padded with zeros to 4104 bytes (Bee
replicates the padded copy from its erasure-coding buffer); padding does not
change a CAC's address. Signatures are deterministic (RFC 6979), so the
replica SOCs are byte-identical to Bee's.
"""

from __future__ import annotations

from functools import lru_cache

from ..constants import REPLICAS_OWNER
from ..keccak import HASH_SIZE, keccak256
from ..redundancy.level import Level, replica_count
from ..signer import Signer
from ..soc import make_soc

__all__ = ["REPLICAS_KEY", "replica_chunks", "replica_ids"]

# Bee's replica key: the 32-byte big-endian number 0x01 << 248. Public on purpose.
REPLICAS_KEY = bytes([1]) + bytes(31)

# Queue slot where the picks of each depth start: depth 1 fills 0-1, depth 2 fills 2-3,
# depth 3 fills 4-7, depth 4 fills 8-15 (Bee's replicaCounts used as offsets).
_SLOT_START = (0, 2, 4, 8, 16)
# Offset of each depth's neighbourhood flags in one table (depths 1..4: 2+4+8+16 flags).
_FLAG_BASE = (0, 2, 6, 14)


@lru_cache(maxsize=1)
def _signer() -> Signer:
    signer = Signer(REPLICAS_KEY)
    assert signer.address == REPLICAS_OWNER, "replica key does not match Bee's replica owner"
    return signer


def _candidate(address: bytes, i: int) -> tuple[bytes, bytes]:
    soc_id = bytes([i]) + bytes(address[1:HASH_SIZE])
    return soc_id, keccak256(soc_id, REPLICAS_OWNER)


def replica_ids(address: bytes, level: Level | int) -> list[bytes]:
    """SOC ids of the replicas of ``address`` at ``level``, in Bee's order (empty for NONE)."""
    level = Level.of(level)
    count = replica_count(level)
    if count == 0:
        return []
    seen = [False] * 30
    next_slot = list(_SLOT_START)
    queue: list[bytes | None] = [None] * 16
    emitted: list[bytes] = []

    def place(soc_id: bytes, soc_address: bytes, depth: int) -> bool:
        # True if the candidate opened a new neighbourhood at some depth <= ``depth``,
        # in which case it took the queue slot of the shallowest such depth.
        if depth == 0:
            return False
        flag = _FLAG_BASE[depth - 1] + (soc_address[0] >> (8 - depth))
        if seen[flag]:
            return False
        seen[flag] = True
        if not place(soc_id, soc_address, depth - 1):
            queue[next_slot[depth - 1]] = soc_id
            next_slot[depth - 1] += 1
        return True

    done = 0
    for i in range(255):
        if done >= count:
            break
        soc_id, soc_address = _candidate(address, i)
        if not place(soc_id, soc_address, int(level)):
            continue
        # Hand out the queue in slot order, up to the first gap.
        while done < len(queue) and (ready := queue[done]) is not None:
            emitted.append(ready)
            done += 1
    return emitted


def replica_chunks(address: bytes, root_data: bytes, level: Level | int) -> list[tuple[bytes, bytes]]:
    """``(SOC address, SOC data)`` of each replica of the root chunk ``root_data`` at ``address``."""
    wrapped = bytes(root_data)
    if len(wrapped) < 4104:
        wrapped += bytes(4104 - len(wrapped))
    out = []
    for soc_id in replica_ids(address, level):
        soc = make_soc(_signer(), soc_id, wrapped)
        if soc.wrapped_address != bytes(address[:HASH_SIZE]):
            raise ValueError("root data does not hash to the root address")
        out.append((soc.address, soc.data))
    return out
