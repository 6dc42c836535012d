"""Keccak-f[1600] over LLVM vector lanes, and a BMT kernel that hashes several chunks at once.

The fast path behind :mod:`chunkstore.hashing` for whole batches of chunks;
:mod:`chunkstore.keccak_numba` keeps the per-chunk kernel (and the scalar
permutation), :mod:`chunkstore.bmt` the pysha3 reference both are tested
against.

Why it looks the way it does:

* numba has no vector types, and a permutation written as loops over
  instances (``keccak_numba.keccak_f1600_x8``) keeps its state in memory:
  LLVM vectorises each round's inner loop but loads and stores all 25 lanes
  every round. :func:`permute` is therefore an intrinsic that emits the
  permutation as LLVM IR over ``<LANES x i64>`` values: the 25 state vectors
  live in registers for all 24 rounds, rotations become ``vprolq`` on
  AVX-512 (shift/shift/or on AVX2) and chi becomes ``vpternlogq`` where the
  target has it. Measured here (bench/bench_keccak.py): about half the time
  per instance of the loop version on an AVX-512 host, and still ahead on
  an AVX2-only target.
* :func:`bmt_rows` gives each vector lane its own chunk: ``LANES`` chunks
  go through the tree together, node by node, so every permutation is fully
  occupied at every level (the per-chunk kernel runs narrow levels, the span
  step and the SOC step at one instance per permutation). The price is that
  zero-padded subtrees of short chunks are hashed like any others; chunks in
  a reserve are nearly all full, and the per-chunk kernel stays for callers
  with mostly short chunks.
* The tree of a group is kept interleaved (``tree[w, lane]``), so an upper
  level's eight message words are eight contiguous vector loads.
* :func:`bmt_pieces` fills its lanes from each chunk's head and tail
  wherever they lie in memory (as the store keeps them: the sampler hashes
  them straight out of the data file's mapped pages); :func:`bmt_rows` is
  the same kernel over the rows of a buffer, each row one piece.

Everything here is original Keccak-256 (pad byte 0x01); one-block prefix
tails only (the facade routes longer anchors to the per-chunk kernel).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..rawmem import peek_u8, peek_u64
from .numba_kernels import _RC, _jit

__all__ = ["LANES", "permute", "permutation_loop_lanes", "keccak_lanes", "bmt_rows", "bmt_pieces", "fits_one_block"]

# Instances per vector permutation. 8 measured fastest on AVX-512 and as fast as 4 on
# AVX2-only targets (bench/bench_keccak.py --lanes compares them on the host).
LANES = 8
STATE_LANES = 25
PAYLOAD_WORDS = 512  # 4096 bytes of payload as little-endian uint64 words
NODE_MSG_WORDS = 8  # left | right
# rho offsets r[x][y] of lane (x, y)
_ROT = ((0, 36, 3, 41, 18), (1, 44, 10, 45, 2), (62, 6, 43, 15, 61), (28, 55, 25, 21, 56), (27, 20, 39, 8, 14))
_ROUNDS = 24


def _rc_table(module: ir.Module) -> ir.GlobalVariable:
    i64 = ir.IntType(64)
    name = "chunkstore_keccak_rc"
    table = module.globals.get(name)
    if table is None:
        table_ty = ir.ArrayType(i64, _ROUNDS)
        table = ir.GlobalVariable(module, table_ty, name)
        table.initializer = ir.Constant(table_ty, [ir.Constant(i64, int(c)) for c in _RC])
        table.global_constant = True
        table.linkage = "internal"
    return table


def _splat(width: int, c: int) -> ir.Constant:
    i64 = ir.IntType(64)
    return ir.Constant(ir.VectorType(i64, width), [ir.Constant(i64, c)] * width)


def _permutation_ir(builder: ir.IRBuilder, initial: list[ir.Value], width: int) -> list[ir.Value]:
    """Emit Keccak-f[1600] over ``width`` instances; ``initial[x + 5y]`` is lane (x, y) as a vector.

    Returns the 25 lanes after the permutation. The round body is emitted
    once inside an IR loop with the state as phi nodes, so it stays in
    registers for all 24 rounds; the round constant is loaded from a
    module-level table and broadcast.
    """
    i32, i64 = ir.IntType(32), ir.IntType(64)
    vty = ir.VectorType(i64, width)
    table = _rc_table(builder.module)
    ones = _splat(width, (1 << 64) - 1)

    def rotl(v: ir.Value, n: int) -> ir.Value:
        if n == 0:
            return v
        # LLVM folds this pattern into a rotate instruction where the target has one.
        return builder.or_(builder.shl(v, _splat(width, n)), builder.lshr(v, _splat(width, 64 - n)))

    entry = builder.block
    loop = builder.append_basic_block("keccak_round")
    done = builder.append_basic_block("keccak_done")
    builder.branch(loop)
    builder.position_at_end(loop)
    rnd = builder.phi(i32)
    rnd.add_incoming(ir.Constant(i32, 0), entry)
    phis = []
    for j in range(STATE_LANES):
        phi = builder.phi(vty)
        phi.add_incoming(initial[j], entry)
        phis.append(phi)
    a = [[phis[x + 5 * y] for y in range(5)] for x in range(5)]  # a[x][y]
    xor = builder.xor
    c = [xor(xor(xor(xor(a[x][0], a[x][1]), a[x][2]), a[x][3]), a[x][4]) for x in range(5)]
    d = [xor(c[(x - 1) % 5], rotl(c[(x + 1) % 5], 1)) for x in range(5)]
    b: list[list[ir.Value]] = [[ones] * 5 for _ in range(5)]
    for x in range(5):
        for y in range(5):
            b[y][(2 * x + 3 * y) % 5] = rotl(xor(a[x][y], d[x]), _ROT[x][y])
    nxt = [[xor(b[x][y], builder.and_(xor(b[(x + 1) % 5][y], ones), b[(x + 2) % 5][y])) for y in range(5)] for x in range(5)]
    rc = builder.load(builder.gep(table, [ir.Constant(i32, 0), rnd]))
    rcv = builder.insert_element(ir.Constant(vty, ir.Undefined), rc, ir.Constant(i32, 0))
    rcv = builder.shuffle_vector(rcv, ir.Constant(vty, ir.Undefined), ir.Constant(ir.VectorType(i32, width), [0] * width))
    nxt[0][0] = xor(nxt[0][0], rcv)
    following = builder.add(rnd, ir.Constant(i32, 1))
    rnd.add_incoming(following, loop)
    final = [nxt[j % 5][j // 5] for j in range(STATE_LANES)]
    for j in range(STATE_LANES):
        phis[j].add_incoming(final[j], loop)
    builder.cbranch(builder.icmp_unsigned("<", following, ir.Constant(i32, _ROUNDS)), loop, done)
    builder.position_at_end(done)
    return final


def _is_u64_array(ty: Any, ndim: int) -> bool:
    return isinstance(ty, types.Array) and ty.dtype == types.uint64 and ty.layout == "C" and ty.ndim == ndim


def _make_permute(width: int) -> Any:
    @intrinsic
    def _permute(typingctx: Any, state: Any) -> tuple[Any, Any] | None:  # noqa: ARG001 - numba's intrinsic signature
        if not _is_u64_array(state, 1):
            return None
        sig = types.void(state)

        def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> Any:
            arr = context.make_array(signature.args[0])(context, builder, args[0])
            vty = ir.VectorType(ir.IntType(64), width)
            base = builder.bitcast(arr.data, vty.as_pointer())
            ptrs = [builder.gep(base, [ir.Constant(ir.IntType(32), j)]) for j in range(STATE_LANES)]
            final = _permutation_ir(builder, [builder.load(p, align=8) for p in ptrs], width)
            for j in range(STATE_LANES):
                builder.store(final[j], ptrs[j], align=8)
            return context.get_dummy_value()

        return sig, codegen

    return _permute


MAX_Q = 8  # message start lane of a one-block prefix tail (tail <= 71 bytes)


def _make_absorb(width: int, nwords: int) -> Any:
    """Intrinsic ``absorb(init, msg, row, q, sh, dst, drow)``: hash one block per instance.

    State lane j starts as ``init[j]`` (the prefix tail and padding,
    pre-XORed); message word k of instance i is ``msg[row + k, i]`` and lands
    at byte ``8q + sh/8`` of the block. The first four lanes of the result
    (the digest) go to ``dst[drow + k, :]``. ``q`` and ``sh`` only take a
    few values, so each (q, sh == 0) gets its own straight-line fill, picked
    by a switch: no per-lane selects, no state round trip through memory.
    """

    @intrinsic
    def _absorb(typingctx: Any, init: Any, msg: Any, row: Any, q: Any, sh: Any, dst: Any,
                drow: Any) -> tuple[Any, Any] | None:  # noqa: ARG001
        if not (_is_u64_array(init, 1) and _is_u64_array(msg, 2) and _is_u64_array(dst, 2)):
            return None
        sig = types.void(init, msg, types.int64, types.int64, types.int64, dst, types.int64)

        def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> Any:
            i32, i64 = ir.IntType(32), ir.IntType(64)
            vty = ir.VectorType(i64, width)
            init_a = context.make_array(signature.args[0])(context, builder, args[0])
            msg_a = context.make_array(signature.args[1])(context, builder, args[1])
            dst_a = context.make_array(signature.args[5])(context, builder, args[5])
            row_v, q_v, sh_v, drow_v = args[2], args[3], args[4], args[6]
            msg_base = builder.bitcast(msg_a.data, vty.as_pointer())
            dst_base = builder.bitcast(dst_a.data, vty.as_pointer())
            undef_idx = ir.Constant(ir.VectorType(i32, width), [0] * width)

            def broadcast(j: int) -> ir.Value:
                scalar = builder.load(builder.gep(init_a.data, [ir.Constant(i32, j)]))
                v = builder.insert_element(ir.Constant(vty, ir.Undefined), scalar, ir.Constant(i32, 0))
                return builder.shuffle_vector(v, ir.Constant(vty, ir.Undefined), undef_idx)

            def word(k: int) -> ir.Value:
                return builder.load(builder.gep(msg_base, [builder.add(row_v, ir.Constant(i64, k))]), align=8)

            perm_block = builder.append_basic_block("absorb_permute")
            shifted_block = builder.append_basic_block("absorb_shifted")
            plain_block = builder.append_basic_block("absorb_plain")
            builder.cbranch(builder.icmp_signed("==", sh_v, ir.Constant(i64, 0)), plain_block, shifted_block)
            incoming: list[tuple[ir.Block, list[ir.Value]]] = []
            for shifted, block in ((False, plain_block), (True, shifted_block)):
                builder.position_at_end(block)
                if shifted:
                    left = builder.insert_element(ir.Constant(vty, ir.Undefined), sh_v, ir.Constant(i32, 0))
                    left = builder.shuffle_vector(left, ir.Constant(vty, ir.Undefined), undef_idx)
                    right = builder.sub(_splat(width, 64), left)
                cases = [builder.append_basic_block(f"absorb_q{qq}_{int(shifted)}") for qq in range(MAX_Q + 1)]
                switch = builder.switch(q_v, cases[0])  # q is checked by the caller; 0 stands in for the impossible
                for qq, case in enumerate(cases):
                    switch.add_case(ir.Constant(i64, qq), case)
                    builder.position_at_end(case)
                    words = [word(k) for k in range(nwords)]
                    lanes = []
                    for j in range(STATE_LANES):
                        v = broadcast(j)
                        k = j - qq
                        if not shifted:
                            if 0 <= k < nwords:
                                v = builder.xor(v, words[k])
                        else:
                            if 0 <= k < nwords:
                                v = builder.xor(v, builder.shl(words[k], left))
                            if 1 <= k <= nwords:
                                v = builder.xor(v, builder.lshr(words[k - 1], right))
                        lanes.append(v)
                    incoming.append((builder.block, lanes))
                    builder.branch(perm_block)
            builder.position_at_end(perm_block)
            state = []
            for j in range(STATE_LANES):
                phi = builder.phi(vty)
                for blk, lanes in incoming:
                    phi.add_incoming(lanes[j], blk)
                state.append(phi)
            final = _permutation_ir(builder, state, width)
            for k in range(4):
                ptr = builder.gep(dst_base, [builder.add(drow_v, ir.Constant(i64, k))])
                builder.store(final[k], ptr, align=8)
            return context.get_dummy_value()

        return sig, codegen

    return _absorb


permute = _make_permute(LANES)
"""Keccak-f[1600] on ``LANES`` instances in place: ``state`` is C-contiguous uint64[25 * LANES],
lane j of instance i at ``state[LANES * j + i]`` (callable from jitted code only)."""
absorb_node = _make_absorb(LANES, 8)  # a tree node: prefix | left | right
absorb_span = _make_absorb(LANES, 5)  # the span step: prefix | span | root


@_jit
def keccak_lanes(state: np.ndarray) -> None:
    """:func:`permute` callable from Python (tests); ``state`` as there, exactly 25 * LANES long."""
    if state.shape[0] != STATE_LANES * LANES:
        raise ValueError("state must hold 25 * LANES words")
    permute(state)


@_jit
def permutation_loop_lanes(state: np.ndarray, count: int) -> None:
    """Apply :func:`permute` ``count`` times; a benchmark probe."""
    for _ in range(count):
        permute(state)


def fits_one_block(tail_len: int) -> bool:
    """Whether a prefix tail of ``tail_len`` bytes keeps node and span inputs in one block each."""
    return tail_len + 64 + 1 <= 136


@_jit(inline="always")
def _hash_group(
    g: int,
    n: int,
    leaves: np.ndarray,
    tree: np.ndarray,
    msg: np.ndarray,
    digest: np.ndarray,
    soc_digest: np.ndarray,
    is_soc: np.ndarray,
    soc_addresses: np.ndarray,
    node_init: np.ndarray,
    span_init: np.ndarray,
    q: int,
    sh: int,
    plain_init: np.ndarray,
    out: np.ndarray,
) -> None:
    """Rows ``g .. g + LANES`` from their gathered leaves (and spans in ``msg[0]``) to ``out``."""
    w = LANES
    for j in range(PAYLOAD_WORDS // 8):  # level 1 from the leaves
        absorb_node(node_init, leaves, 8 * j, q, sh, tree, 4 * j)
    count = PAYLOAD_WORDS // 16
    while count >= 1:  # levels 2..7 in place: pair j (rows 8j..8j+7) becomes node j (rows 4j..4j+3)
        for j in range(count):
            absorb_node(node_init, tree, 8 * j, q, sh, tree, 4 * j)
        count >>= 1
    msg[1:5] = tree[0:4]
    absorb_span(span_init, msg, 0, q, sh, digest, 0)
    any_soc = False
    for i in range(w):
        if g + i < n and is_soc[g + i]:
            any_soc = True
    if any_soc:
        # keccak(soc address | transformed address of the wrapped chunk), plain
        soc_msg = np.zeros((NODE_MSG_WORDS, w), np.uint64)
        for i in range(w):
            row = min(g + i, n - 1)
            if is_soc[row]:
                for k in range(4):
                    word = np.uint64(0)
                    for b in range(8):
                        word |= np.uint64(soc_addresses[row, 8 * k + b]) << np.uint64(8 * b)
                    soc_msg[k, i] = word
        soc_msg[4:8] = digest
        absorb_node(plain_init, soc_msg, 0, 0, 0, soc_digest, 0)
        for i in range(w):
            if g + i < n and is_soc[g + i]:
                for k in range(4):
                    digest[k, i] = soc_digest[k, i]
    for i in range(w):
        row = g + i
        if row >= n:
            break
        for k in range(4):
            word = digest[k, i]
            for b in range(8):
                out[row, 8 * k + b] = np.uint8((word >> np.uint64(8 * b)) & np.uint64(0xFF))


@_jit
def bmt_pieces(
    head_at: np.ndarray,
    head_len: np.ndarray,
    tail_at: np.ndarray,
    tail_len: np.ndarray,
    is_soc: np.ndarray,
    soc_addresses: np.ndarray,
    node_init: np.ndarray,
    span_init: np.ndarray,
    r: int,
    plain_init: np.ndarray,
    out: np.ndarray,
) -> None:
    """Prefixed BMT hash (and SOC transform) of chunks held in two pieces each, ``LANES`` per pass;
    inputs already validated.

    Row i's ``span | payload`` is the ``head_len[i]`` bytes at address
    ``head_at[i]`` followed by the ``tail_len[i]`` bytes at ``tail_at[i]``
    (the head holds at least the span); SOC rows give ``keccak(soc_addresses[i]
    | bmt)``. The bytes are read where they lie (a mapped file's pages, or a
    row of a buffer: :func:`bmt_rows`) straight into the lanes; nothing past
    them is read. For prefixes whose tail ``r`` fits one block
    (:func:`fits_one_block`); ``node_init``/``span_init`` are the one-block
    templates of ``keccak_numba.PrefixContext``.
    """
    w = LANES
    n = head_len.shape[0]
    q = r >> 3
    sh = (r & 7) * 8
    leaves = np.empty((PAYLOAD_WORDS, w), np.uint64)  # payload words, interleaved by lane
    tree = np.empty((PAYLOAD_WORDS // 2, w), np.uint64)  # level-1 nodes and up, interleaved
    msg = np.zeros((NODE_MSG_WORDS, w), np.uint64)
    digest = np.empty((4, w), np.uint64)
    soc_digest = np.empty((4, w), np.uint64)
    for g in range(0, n, w):
        for i in range(w):
            row = min(g + i, n - 1)
            head = head_at[row]
            tail = tail_at[row]
            msg[0, i] = peek_u64(head)
            in_head = head_len[row] - 8  # payload bytes in the head
            whole = in_head >> 3
            for k in range(whole):
                leaves[k, i] = peek_u64(head + 8 + 8 * k)
            # The rest: the head's last few bytes, then the tail, word by word from wherever
            # the head left off (a SOC's head ends mid-word).
            left = in_head & 7
            rest = left + tail_len[row]
            k = whole
            if left == 0:
                for t in range(rest >> 3):
                    leaves[k, i] = peek_u64(tail + 8 * t)
                    k += 1
                done = rest & ~7
            else:
                done = 0
            if done < rest:
                last = np.uint64(0)
                for b in range(done, rest):
                    byte = peek_u8(head + 8 + 8 * whole + b) if b < left else peek_u8(tail + b - left)
                    last |= np.uint64(byte) << np.uint64(8 * (b & 7))
                    if b & 7 == 7:
                        leaves[k, i] = last
                        k += 1
                        last = np.uint64(0)
                if rest & 7:
                    leaves[k, i] = last
                    k += 1
            for z in range(k, PAYLOAD_WORDS):
                leaves[z, i] = 0
        _hash_group(g, n, leaves, tree, msg, digest, soc_digest, is_soc, soc_addresses, node_init, span_init, q, sh,
                    plain_init, out)  # fmt: skip


@_jit
def bmt_rows(
    buf: np.ndarray,
    lengths: np.ndarray,
    offsets: np.ndarray,
    is_soc: np.ndarray,
    soc_addresses: np.ndarray,
    node_init: np.ndarray,
    span_init: np.ndarray,
    r: int,
    plain_init: np.ndarray,
    out: np.ndarray,
) -> None:
    """Prefixed BMT hash (and SOC transform) of each row, ``LANES`` rows per pass; inputs already validated.

    Same contract as ``keccak_numba.bmt_batch`` (row i: ``span | payload`` from
    ``offsets[i]`` to ``lengths[i]``, nothing past it read; SOC rows give
    ``keccak(soc_addresses[i] | bmt)``), for prefixes whose tail ``r`` fits
    one block (:func:`fits_one_block`); ``node_init``/``span_init`` are the
    one-block templates of ``keccak_numba.PrefixContext``. ``buf`` must be
    C-contiguous: each row is handed to :func:`bmt_pieces` as one piece.
    """
    n = lengths.shape[0]
    head_at = np.empty(n, np.int64)
    head_len = np.empty(n, np.int64)
    no_tail = np.zeros(n, np.int64)
    base = buf.ctypes.data
    stride = buf.strides[0]
    for i in range(n):
        head_at[i] = base + i * stride + offsets[i]
        head_len[i] = lengths[i] - offsets[i]
    bmt_pieces(head_at, head_len, head_at, no_tail, is_soc, soc_addresses, node_init, span_init, r, plain_init, out)
