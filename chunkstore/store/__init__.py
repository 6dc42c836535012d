"""The LMDB storage engine."""
