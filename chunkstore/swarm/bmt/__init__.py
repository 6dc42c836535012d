"""The BMT hash: the reference and the accelerated backend."""
