"""Protocol primitives of Swarm, as the reference node defines them.

Holds every protocol size and limit (constants.py, once), Keccak-256, the BMT
hash with its inclusion proofs (the bmt package: a pysha3 reference and a
numba backend behind one interface), content-addressed and single-owner
chunks, secp256k1 signing as the reference signs, postage stamps and a
stamp issuer, proximity, and the typed errors of bad input.

Imports no other part of the project: everything else builds on it.
"""
