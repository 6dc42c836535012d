"""Reading memory by address from numba-jitted code, at any alignment.

numba reads arrays through views and indexes; a view made per read (a page
of a 2-D array of pages, say) costs a reference count update each time,
several times what the read itself costs in a loop that runs once a chunk.
These intrinsics load straight from an address instead. Nothing is checked:
the caller vouches that the bytes are readable (inside an array or a mapped
file it holds), as numba's own unchecked indexing needs.

Used by the lane BMT kernel (chunks hashed where they lie) and the
sampler's direct LMDB reader (B-tree pages walked once a row).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["peek_u8", "peek_u16", "peek_u64", "peek_be64"]


def _make_peek(bits: int, big_endian: bool = False) -> Any:
    """Intrinsic ``peek(addr)``: the unsigned ``bits``-bit integer at byte address ``addr``.

    Little-endian, as x86 loads it, or with its bytes swapped (``big_endian``:
    then integer order is the bytes' order).
    """

    @intrinsic
    def _peek(typingctx: Any, addr: Any) -> tuple[Any, Any] | None:  # noqa: ARG001 - numba's intrinsic signature
        if not isinstance(addr, types.Integer):
            return None
        sig = types.Integer.from_bitwidth(bits, signed=False)(addr)

        def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> Any:
            ity = ir.IntType(bits)
            value = builder.load(builder.inttoptr(args[0], ity.as_pointer()), align=1)
            return builder.bswap(value) if big_endian and bits > 8 else value

        return sig, codegen

    return _peek


peek_u8 = _make_peek(8)
"""The byte at an address."""
peek_u16 = _make_peek(16)
"""The little-endian uint16 at an address."""
peek_u64 = _make_peek(64)
"""The little-endian uint64 at an address."""
peek_be64 = _make_peek(64, big_endian=True)
"""The 8 bytes at an address as a big-endian uint64: numeric order is the bytes' order."""
