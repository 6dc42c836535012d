"""Reserve sampler: the 16-item sample of a neighbourhood, its hash and inclusion proofs.

Layering: imports chunkstore (primitives and the store), never api.
"""

from chunkstore.swarm.constants import SAMPLE_SIZE

from .errors import InsufficientSample, SampleIntegrityError, SamplerWorkerError
from .integrity import check_sample
from .items import SampleItem, SampleResult, SampleStats, transformed_address
from .pipeline import reserve_sample, reserve_sample_async, shutdown_pool
from .proof import ChunkInclusionProofs, make_inclusion_proofs, sample_chunk, sample_hash, verify_inclusion_proof
from .render import render_proofs_internal, render_rchash

__all__ = [
    "SAMPLE_SIZE",
    "ChunkInclusionProofs",
    "InsufficientSample",
    "SampleIntegrityError",
    "SampleItem",
    "SampleResult",
    "SampleStats",
    "SamplerWorkerError",
    "check_sample",
    "make_inclusion_proofs",
    "render_proofs_internal",
    "render_rchash",
    "reserve_sample",
    "reserve_sample_async",
    "sample_chunk",
    "sample_hash",
    "shutdown_pool",
    "transformed_address",
    "verify_inclusion_proof",
]
