"""The chain state that prices postage: block, cumulative payout per chunk, current price.

The reference node reads it from the postage contract (``pkg/postage``'s
``ChainState``: ``Block``, ``TotalAmount``, ``CurrentPrice``). This store
follows no chain, so an operator sets it; it is kept in the meta env and
drives two things, as in the reference:

- **expiry**: a batch whose value is at most the total amount is expired
  (``pkg/postage/batchstore``: ``value <= totalAmount``); its stamps and the
  chunks left without a stamp are removed;
- **TTL**: ``(value - totalAmount) * blockTime / currentPrice`` seconds
  (integer, rounded down; multiplied before dividing, as ``pkg/api/postage.go``
  does), -1 when the price is 0 or no chain state is known.

Until a chain state is set, nothing expires: a store that never heard of a
chain keeps every batch (the reference starts from all zeros, which would
expire every batch of value 0).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from chunkstore.swarm.constants import BLOCK_TIME, INT64_MAX, UINT64_MAX

from .errors import InvalidChainState


@dataclass(frozen=True)
class ChainState:
    block: int
    total_amount: int
    current_price: int
    chain_tip: int | None = None  # the chain's head, when the operator knows it (else ``block``)

    def validate(self) -> None:
        for name in ("block", "total_amount", "current_price"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise InvalidChainState(f"{name} must be an integer >= 0, got {v!r}")
        for name in ("block", "chain_tip"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= UINT64_MAX):
                raise InvalidChainState(f"{name} must be an integer in 0..2^64-1, got {v!r}")

    @property
    def tip(self) -> int:
        return self.block if self.chain_tip is None else max(self.chain_tip, self.block)

    def expired(self, value: int) -> bool:
        """The reference's expiry rule: the batch's value no longer exceeds the total paid out."""
        return value <= self.total_amount

    def to_json(self) -> dict[str, Any]:
        """The reference node's ``GET /chainstate`` shape (big integers as decimal strings)."""
        return {
            "chainTip": self.tip,
            "block": self.block,
            "totalAmount": str(self.total_amount),
            "currentPrice": str(self.current_price),
        }


EMPTY = ChainState(0, 0, 0)  # what the reference reports before it has synced anything


def batch_ttl(value: int, state: ChainState | None, block_time: int = BLOCK_TIME) -> int:
    """Seconds until a batch of ``value`` expires at the current price; -1 when unknown."""
    if state is None or state.current_price == 0:
        return -1
    # Python's // floors like Go's Euclidean big.Int Div for a positive divisor.
    ttl = (value - state.total_amount) * block_time // state.current_price
    return max(-INT64_MAX - 1, min(INT64_MAX, ttl))  # the reference returns an int64


def _int_field(body: dict[str, Any], name: str, *, required: bool) -> int | None:
    """A JSON integer, or a decimal string (how the reference writes big integers)."""
    if name not in body:
        if required:
            raise InvalidChainState(f"missing field {name}")
        return None
    v = body[name]
    if isinstance(v, str):
        if not (v.isascii() and v.isdigit()):
            raise InvalidChainState(f"{name} must be a non-negative decimal integer, got {v!r}")
        return int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InvalidChainState(f"{name} must be a non-negative integer, got {v!r}")
    return v


def parse_chainstate(body: Any) -> ChainState:
    """A chain state from the ``GET /chainstate`` JSON shape (``chainTip`` optional)."""
    if not isinstance(body, dict):
        raise InvalidChainState("a chain state is a JSON object with block, totalAmount and currentPrice")
    state = ChainState(
        block=_int_field(body, "block", required=True) or 0,
        total_amount=_int_field(body, "totalAmount", required=True) or 0,
        current_price=_int_field(body, "currentPrice", required=True) or 0,
        chain_tip=_int_field(body, "chainTip", required=False),
    )
    state.validate()
    return state


def encode_chainstate(state: ChainState) -> bytes:
    body = state.to_json()
    if state.chain_tip is None:
        del body["chainTip"]
    return json.dumps(body, separators=(",", ":")).encode()


def decode_chainstate(raw: bytes | memoryview | None) -> ChainState | None:
    if raw is None:
        return None
    try:
        return parse_chainstate(json.loads(bytes(raw)))
    except (ValueError, InvalidChainState):
        return None  # unreadable: treated as unknown (nothing expires) rather than failing the open
