"""libc calls for numba kernels, as intrinsics that name the symbol.

numba can call a ctypes function pointer, but a function that does cannot be
cached (the pointer differs in every process), so each process would compile
it again. An intrinsic that declares the libc symbol and calls it compiles to
a plain relocated call, which numba's on-disk cache keeps. Every argument and
the result are int64 on the numba side, pointers as addresses.

Used by the sampler's direct reader (``pread``, ``posix_fadvise``,
``preadv2``) and the import's byte-range copies (``memcpy``).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["RWF_NOWAIT", "POSIX_FADV_WILLNEED", "sys_fadvise", "sys_memcpy", "sys_pread", "sys_preadv2"]


def _external(name: str, ret: ir.Type, args: list[ir.Type]) -> Any:
    """An intrinsic calling libc's ``name`` (numba intrinsics take no ``*args``: one per arity)."""
    i64 = ir.IntType(64)
    if len(args) == 3:

        @intrinsic
        def call(typingctx: Any, a: Any, b: Any, c: Any) -> tuple[Any, Any]:  # noqa: ARG001
            return _signature(3), codegen

    elif len(args) == 4:

        @intrinsic
        def call(typingctx: Any, a: Any, b: Any, c: Any, d: Any) -> tuple[Any, Any]:  # noqa: ARG001
            return _signature(4), codegen

    else:

        @intrinsic
        def call(typingctx: Any, a: Any, b: Any, c: Any, d: Any, e: Any) -> tuple[Any, Any]:  # noqa: ARG001
            return _signature(5), codegen

    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, values: list[ir.Value]) -> ir.Value:
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, args), name)
        conv = []
        for value, ty in zip(values, args, strict=True):
            if isinstance(ty, ir.PointerType):
                conv.append(builder.inttoptr(value, ty))
            elif ty.width < 64:
                conv.append(builder.trunc(value, ty))
            else:
                conv.append(value)
        result = builder.call(fn, conv)
        if isinstance(ret, ir.PointerType):
            return builder.ptrtoint(result, i64)
        return builder.sext(result, i64) if ret.width < 64 else result

    return call


def _signature(arity: int) -> Any:
    return types.int64(*([types.int64] * arity))


_I32, _I64, _PTR = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
sys_pread = _external("pread", _I64, [_I32, _PTR, _I64, _I64])
sys_fadvise = _external("posix_fadvise", _I32, [_I32, _I64, _I64, _I32])
sys_preadv2 = _external("preadv2", _I64, [_I32, _PTR, _I32, _I64, _I32])
sys_memcpy = _external("memcpy", _PTR, [_PTR, _PTR, _I64])
RWF_NOWAIT = 0x00000008  # preadv2: fail with EAGAIN instead of waiting for the disk
POSIX_FADV_WILLNEED = 3
