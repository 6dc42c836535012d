"""Swarm protocol primitives: chunks, files, encryption and erasure coding as the reference Bee node defines them."""
