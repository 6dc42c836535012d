"""Typed errors of the reserve: a chunk outside the neighbourhood, bad options, a bad chain state."""

from __future__ import annotations

from chunkstore.swarm.errors import SwarmError


class OutOfRadius(SwarmError):
    """A chunk outside this node's neighbourhood: its proximity to the overlay is below the storage radius."""

    def __init__(self, address: bytes, po: int, radius: int, overlay: bytes) -> None:
        self.address = bytes(address)
        self.proximity = po
        self.radius = radius
        super().__init__(
            f"chunk {self.address.hex()} is outside this node's neighbourhood: its proximity {po} to the overlay "
            f"{overlay.hex()} is below the storage radius {radius}"
        )


class InvalidReserveOption(SwarmError, ValueError):
    """A reserve option (capacity, doubling, radius) out of range."""


class InvalidChainState(SwarmError):
    """A chain state with a missing or out-of-range field."""


__all__ = ["InvalidChainState", "InvalidReserveOption", "OutOfRadius"]
