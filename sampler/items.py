"""Sample data model and the one-chunk transformed-address rule.

A transformed address is the anchor-prefixed BMT hash of a CAC; for a SOC it
is ``keccak(SOC address | prefixed BMT hash of the wrapped CAC)``. The
one-chunk function here (on the plain reference BMT) is what phase 2 and the
integrity check use to re-derive an address from loaded bytes, independently
of the batch kernel that phase 1 ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chunkstore.swarm.bmt.reference import chunk_hash
from chunkstore.swarm.constants import MAX_CAC_SIZE, SOC_HEADER_SIZE, SPAN_SIZE, ChunkType
from chunkstore.swarm.errors import InvalidChunk
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.soc import validate_soc
from chunkstore.swarm.stamp import Stamp


def transformed_address(address: bytes, data: bytes | bytearray | memoryview, chunk_type: int, anchor: bytes) -> bytes:
    """Transformed address of one chunk for ``anchor`` (``data`` is the stored chunk data)."""
    if chunk_type == ChunkType.CAC:
        return chunk_hash(data, anchor)
    if chunk_type == ChunkType.SOC:
        inner = chunk_hash(memoryview(data)[SOC_HEADER_SIZE:], anchor)
        return keccak256(bytes(address), inner)
    raise ValueError(f"chunk type {chunk_type} is neither CAC (1) nor SOC (2)")


def check_chunk(address: bytes, data: bytes | bytearray | memoryview, chunk_type: int) -> None:
    """Raise a ``SwarmError`` unless ``data`` is the chunk of ``chunk_type`` at ``address``.

    Hashes with the pysha3 reference only, never the accelerated backend: this
    is what the backend's answers are checked against.
    """
    if chunk_type == ChunkType.CAC:
        if not SPAN_SIZE <= len(data) <= MAX_CAC_SIZE:
            raise InvalidChunk(f"CAC data is {len(data)} bytes; must be {SPAN_SIZE}..{MAX_CAC_SIZE}")
        if chunk_hash(data) != bytes(address):
            raise InvalidChunk(f"CAC data does not hash to chunk address {bytes(address).hex()}")
    elif chunk_type == ChunkType.SOC:
        validate_soc(address, data, cac_hash=chunk_hash)
    else:
        raise InvalidChunk(f"chunk type {chunk_type} is neither CAC (1) nor SOC (2)")


def wrapped_cac(data: bytes, chunk_type: int) -> bytes:
    """The CAC data (``span | payload``) a sample item's proofs are made over."""
    return bytes(data[SOC_HEADER_SIZE:]) if chunk_type == ChunkType.SOC else bytes(data)


@dataclass(frozen=True)
class SampleItem:
    transformed_address: bytes
    chunk_address: bytes
    chunk_data: bytes
    stamp: Stamp
    chunk_type: ChunkType


@dataclass
class SampleStats:
    """Counters and timings of one sampling run (names follow the reference node's)."""

    total_iterated: int = 0
    below_balance_ignored: int = 0
    rogue_chunks: int = 0
    new_ignored: int = 0
    distinct_chunks: int = 0  # chunks (addresses) phase 1 walked: the reserve within the sample's depth
    direct_read_fallbacks: int = 0  # shards phase 1 read through py-lmdb because the data file surprised it
    direct_io_rows: int = 0  # chunks phase 1 read around the page cache (cold runs of pages, O_DIRECT)
    mapped_rows: int = 0  # chunks phase 1 hashed where they lie in the page cache (runs of pages, mapped)
    file_order_rows: int = 0  # chunks phase 1 hashed in file order (cold shards whose chunks lie scattered)
    file_order_regions: int = 0  # regions of the files those were read in (one a shard, unless it is large)
    stamp_validations: int = 0
    invalid_stamps: int = 0
    chunk_loads: int = 0
    chunk_load_failed: int = 0
    duplicates_ignored: int = 0
    reruns: int = 0
    hash_mismatches: int = 0  # accelerated hash != reference for a candidate: the sample was redone
    taddr_duration: float = 0.0
    chunk_load_duration: float = 0.0
    iteration_duration: float = 0.0
    stamp_validation_duration: float = 0.0
    phase1_duration: float = 0.0
    phase2_duration: float = 0.0
    total_duration: float = 0.0
    workers: int = 0
    chunks_per_second: float = 0.0
    worker_peak_rss_kb: int = 0  # largest peak RSS (VmHWM) of a phase-1 process; counts mapped store pages
    worker_anon_rss_kb: int = 0  # largest anonymous (private) RSS of a phase-1 process at the end of its scan

    def add_counts(self, other: dict[str, float]) -> None:
        """Add a worker's counters and summed durations into this run's totals."""
        for key, value in other.items():
            setattr(self, key, getattr(self, key) + value)

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


@dataclass
class SampleResult:
    items: list[SampleItem]
    stats: SampleStats = field(default_factory=SampleStats)
    anchor: bytes = b""
    depth: int = 0
    storage_radius: int = 0  # entries below it (proximity to the overlay) were not sampled
    hash_backend: str = ""  # the hashing path phase 1 used for the answer: "numba" or "pysha3"
