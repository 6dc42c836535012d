"""Single-lane Keccak limits: how fast can one keccak call on a one-block input go?

A BMT chunk hash is 128 one-block keccak calls, so the fastest single keccak
bounds what any per-call implementation can reach:
``L = calls/s * cores / 128`` chunks/s. This script measures

* safe-pysha3 ``keccak_256(data).digest()`` on 96-byte inputs (C, but one
  Python call each),
* OpenSSL's SHA3-256 (same permutation, only the padding differs) through
  ``openssl speed -evp sha3-256 -bytes 96 -seconds 1``, if openssl is on PATH,
* the numba permutations alone: scalar, the 8-way loop of the per-chunk
  kernel, and the vector-lane permutation of the lane kernel
  (chunkstore/swarm/bmt/lane_kernels.py) at 4 and 8 lanes (``--lanes``),
  per instance; and numba ``keccak256_batch`` on 96-byte rows,
* the kernel bound: chunks/s if nothing ran but 128 lane permutations per
  chunk on every core, ``cores / (128 * t_perm)``. The sampler cannot beat it.

Run: ``python bench/bench_keccak.py [--seconds S] [--quick] [--lanes 4,8]``; the helpers are in benchlib.py.
"""

from __future__ import annotations

import argparse

from benchlib import (
    CALLS_PER_CHUNK,
    MSG_SIZE,
    cores,
    kernel_bound,
    lane_permutation_rate,
    numba_batch_rate,
    numba_permutation_rate,
    numba_x8_rate,
    single_lane_limit,
    vector_width,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="time per measurement (default 2)")
    ap.add_argument("--quick", action="store_true", help="0.5 s per measurement")
    ap.add_argument("--lanes", default="4,8", help="lane widths of the vector permutation to compare (default 4,8)")
    args = ap.parse_args()
    seconds = 0.5 if args.quick else args.seconds

    from chunkstore.swarm.bmt import backend as hashing

    n = cores()
    print(f"backend={hashing.BACKEND} cores={n} vector={vector_width()} input={MSG_SIZE} bytes")
    name, best, rates = single_lane_limit(seconds)
    for k, v in rates.items():
        print(f"  {k:<28} {'n/a' if v is None else f'{v:>12,.0f} calls/s  {1e6 / v:6.3f} us/call'}")
    perm = numba_permutation_rate(seconds)
    perm8 = numba_x8_rate(seconds)
    batch = numba_batch_rate(seconds)
    if perm is not None and perm8 is not None and batch is not None:
        print(f"  {'numba keccak_f1600':<28} {perm:>12,.0f} perms/s  {1e6 / perm:6.3f} us/perm")
        print(f"  {'numba keccak_f1600_x8':<28} {perm8:>12,.0f} perms/s  {1e6 / perm8:6.3f} us/perm (per instance)")
        print(f"  {'numba keccak256_batch':<28} {batch:>12,.0f} calls/s  {1e6 / batch:6.3f} us/call")
    chosen = None
    if perm is not None:
        from chunkstore.swarm.bmt import lane_kernels

        for width in sorted({int(x) for x in args.lanes.split(",")} | {lane_kernels.LANES}):
            r = lane_permutation_rate(seconds, width)
            if r is None:
                continue
            mark = " (the lane kernel's width)" if width == lane_kernels.LANES else ""
            print(f"  {f'lane permutation x{width}':<28} {r:>12,.0f} perms/s  {1e6 / r:6.3f} us/perm (per instance){mark}")
            if width == lane_kernels.LANES:
                chosen = r
    limit = best * n / CALLS_PER_CHUNK
    print(f"single-lane limit ({name}): L = {best:,.0f} * {n} / {CALLS_PER_CHUNK} = {limit:,.0f} chunks/s")
    if chosen is not None:
        bound = kernel_bound(chosen, n)
        print(f"kernel bound: {n} cores / ({CALLS_PER_CHUNK} x {1e6 / chosen:.3f} us) = {bound:,.0f} chunks/s "
              f"= {bound / limit:.2f} x L")  # fmt: skip


if __name__ == "__main__":
    main()
