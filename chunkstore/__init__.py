"""Swarm chunk storage: protocol primitives at the bottom, the LMDB store above them.

Layering (nothing imports from a layer above it):
  chunkstore  - primitives (keccak, bmt, cac, soc, signer, stamp, proximity), then the store
  sampler     - the reserve sample, its hash and inclusion proofs, over the store
  api         - the HTTP daemon and the command line, over both
"""

__version__ = "0.1.0"
