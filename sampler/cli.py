"""``chunkstore sample``: the reserve sample of a store on disk, as the /rchash answer.

Prints one JSON object on stdout: the reference node's ``/rchash`` fields
(``hash``, ``proofs``, ``durationSeconds``) followed by ``stats`` (the run's
SampleStats), ``storageRadius`` (entries below it were not sampled) and
``hashBackend`` (the backend in use, why, and the one the sample hashed
with), or exactly the /rchash object with ``--rchash-only``. Progress
(a tqdm bar: stamp entries walked of the expected count, rate, ETA) goes to
stderr, and only when stderr is a terminal, so scripted runs get clean
output. Exit codes: 0 sample made, 1 no sample (fewer than 16 eligible
chunks, or a store error), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from chunkstore import hashing
from chunkstore.errors import SwarmError
from chunkstore.progress import bar

from .errors import InsufficientSample
from .pipeline import expected_entries, reserve_sample
from .proof import make_inclusion_proofs, sample_hash
from .render import render_rchash


def _hex_bytes(text: str) -> bytes:
    s = text[2:] if text.lower().startswith("0x") else text
    try:
        value = bytes.fromhex(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not hex") from None
    if not value:
        raise argparse.ArgumentTypeError("an anchor needs at least one byte")
    if len(value) > 32:
        raise argparse.ArgumentTypeError(f"anchor is {len(value)} bytes; at most 32")
    return value


def _depth(text: str) -> int:
    try:
        d = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a decimal depth") from None
    if not 0 <= d <= 31:
        raise argparse.ArgumentTypeError(f"depth {d} outside 0..31")
    return d


def _non_negative(text: str) -> int:
    try:
        n = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a decimal integer") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} is negative")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="chunkstore sample", description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True, help="store directory")
    p.add_argument("--depth", required=True, type=_depth, help="neighbourhood depth (committed depth), 0..31")
    p.add_argument("--anchor1", required=True, type=_hex_bytes, help="sample anchor (salt), hex")
    p.add_argument("--anchor2", required=True, type=_hex_bytes, help="proof anchor, hex")
    p.add_argument("--consensus-time", type=_non_negative, default=None,
                   help="Unix ns; stamps after it are left out (default: now)")  # fmt: skip
    p.add_argument("--min-balance", type=_non_negative, default=None, help="leave out batches valued below this")
    p.add_argument("--workers", type=_non_negative, default=None, help="worker processes (default: CPU count)")
    p.add_argument("--rchash-only", action="store_true", help="print exactly the /rchash answer, without stats")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    progress = sys.stderr.isatty()

    def say(msg: str) -> None:
        if progress:
            print(msg, file=sys.stderr, flush=True)

    from chunkstore.store import ChunkStore

    consensus = time.time_ns() if args.consensus_time is None else args.consensus_time
    try:
        store = ChunkStore(args.data_dir, readonly=True)
    except (SwarmError, OSError) as exc:
        print(f"chunkstore sample: cannot open store {args.data_dir}: {exc}", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    try:
        say(f"sampling {args.data_dir}: depth {args.depth}, anchor {args.anchor1.hex()}, consensus time {consensus}")
        expected = expected_entries(store, args.anchor1, args.depth) if progress else None
        with bar("sampling", total=expected, show=progress) as pbar:

            def advance(walked: int) -> None:
                if walked > (pbar.total or 0):
                    pbar.total = walked  # the expected count is an estimate at depth > 0
                pbar.update(walked - pbar.n)

            try:
                result = reserve_sample(store, args.anchor1, args.depth, consensus, args.min_balance,
                                        workers=args.workers, progress=advance if progress else None)  # fmt: skip
            finally:
                if progress and pbar.n:
                    pbar.total = pbar.n  # the walk is over: end the bar at 100%
                    pbar.refresh()
        say(f"sample done in {result.stats.total_duration:.3f} s over {result.stats.total_iterated} stamp entries")
        proofs = make_inclusion_proofs(result.items, args.anchor1, args.anchor2)
        address = sample_hash(result.items)
    except InsufficientSample as exc:
        print(f"chunkstore sample: {exc}", file=sys.stderr)
        return 1
    except SwarmError as exc:
        print(f"chunkstore sample: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    # Like the reference node: the duration covers the sample and the proofs.
    body = render_rchash(address, proofs, time.perf_counter() - t0)
    if not args.rchash_only:
        body["stats"] = result.stats.as_dict()
        body["storageRadius"] = result.storage_radius
        body["hashBackend"] = {**hashing.backend_info().as_dict(), "usedBySample": result.hash_backend}
    json.dump(body, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
