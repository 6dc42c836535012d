"""The reserve sample: the 16-item sample of a neighbourhood, its hash and inclusion proofs.

Holds the sampler (phase 1 in worker processes per shard, phase 2 in the
caller), the sample chunk and the claim's inclusion proofs, their JSON
renderings (/rchash and the reference's internal form), and the integrity
assertions over a produced sample. What it needs of the store is declared in
source.py (a ``ReserveStore`` provides it).

May import chunkstore.reserve, chunkstore.store and chunkstore.swarm; never
chunkstore.transfer, chunkstore.testing or api.
"""

from chunkstore.swarm.constants import SAMPLE_SIZE

from .errors import InsufficientSample, SampleIntegrityError, SamplerWorkerError
from .integrity import check_sample
from .items import SampleItem, SampleResult, SampleStats, transformed_address
from .pipeline import expected_entries, reserve_sample, reserve_sample_async, shutdown_pool, start_pool
from .proof import ChunkInclusionProofs, make_inclusion_proofs, sample_chunk, sample_hash, verify_inclusion_proof
from .render import render_proofs_internal, render_rchash
from .source import BatchRegistry, ReserveView, SampleSource

__all__ = [
    "SAMPLE_SIZE",
    "BatchRegistry",
    "ReserveView",
    "SampleSource",
    "ChunkInclusionProofs",
    "InsufficientSample",
    "SampleIntegrityError",
    "SampleItem",
    "SampleResult",
    "SampleStats",
    "SamplerWorkerError",
    "check_sample",
    "expected_entries",
    "make_inclusion_proofs",
    "render_proofs_internal",
    "render_rchash",
    "reserve_sample",
    "reserve_sample_async",
    "sample_chunk",
    "sample_hash",
    "shutdown_pool",
    "start_pool",
    "transformed_address",
    "verify_inclusion_proof",
]
