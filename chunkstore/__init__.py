"""Swarm chunk storage, in layers; each package says what it holds and what it may import.

  chunkstore.swarm     protocol primitives and every protocol constant; imports nothing else of the project
  chunkstore.store     the LMDB engine (chunks, stamps, slots, batches, recovery, verify); imports swarm
  chunkstore.reserve   the reserve policy (radius, capacity, eviction, expiry, chain state); imports store, swarm
  chunkstore.transfer  reserve import and export (Bee tar, snapshot); imports reserve, store, swarm
  sampler              the reserve sample, its hash and inclusion proofs; imports reserve, store, swarm
  chunkstore.testing   a pytest plugin and test aids for users; imports sampler and the layers below
  api                  the HTTP daemon and the ``chunkstore`` command; may import everything

Nothing imports from a layer above it; ``lint-imports`` (contracts in
pyproject.toml) checks that in ``make test``.
"""

__version__ = "0.1.0"
