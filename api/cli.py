"""The ``chunkstore`` command: every subcommand's arguments and entry point, in one place.

It lives in the top layer because ``serve`` needs the HTTP daemon and
``sample`` the sampler; the work itself stays in the layer it belongs to
(``chunkstore.store.verify``, ``chunkstore.transfer``, ``sampler``, ...).
Each command imports what it needs only when it runs, so that, e.g.,
``chunkstore verify`` does not pay for importing aiohttp.

Exit codes: 0 done; 1 the command ran and found a problem (corruption, a
refused import, no sample); 2 bad usage or a data dir that is no usable
store. ``serve`` has its own (see ``api.server``).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable

from chunkstore.store.layout import MAX_SHARDS
from chunkstore.swarm.constants import MAX_ANCHOR_SIZE, MAX_PO
from chunkstore.swarm.digits import decimal_below

Command = Callable[[list[str]], int]


def _own(argv: list[str], name: str) -> list[str]:
    """A command's arguments, also when called with its own name first (``verify_main(["verify", ...])``)."""
    return argv[1:] if argv[:1] == [name] else list(argv)


# ---------------------------------------------------------------- serve


def serve_main(argv: list[str]) -> int:
    """``chunkstore serve``: the daemon's flags are its ``Config`` (api/config.py, each also an env variable)."""
    from .config import parse_config

    try:
        config = parse_config(argv)  # skips a leading "serve" itself
    except SystemExit as exc:  # argparse: 2 on bad flags, 0 for --help
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    from .logs import setup_logging

    # Before the daemon's stack is imported: what its imports log (the numba cache being unavailable on a
    # read-only install) is then a log line of the chosen format, not a bare message on stderr.
    setup_logging(config.log_format, config.log_level)
    from chunkstore.swarm.bmt import loading

    # Listen at once: the kernels load (on a fresh install: compile, 14-25 s) while the reference serves.
    loading.load_in_background()
    from .server import run  # the daemon's stack (aiohttp, the store, the kernels): not for --help or a bad flag

    return run(config)


# ---------------------------------------------------------------- sample


def _anchor(text: str) -> bytes:
    s = text[2:] if text.lower().startswith("0x") else text
    try:
        value = bytes.fromhex(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not hex") from None
    if not value:
        raise argparse.ArgumentTypeError("an anchor needs at least one byte")
    if len(value) > MAX_ANCHOR_SIZE:
        raise argparse.ArgumentTypeError(f"anchor is {len(value)} bytes; at most {MAX_ANCHOR_SIZE}")
    return value


def int_in(lo: int, hi: int, what: str = "a decimal integer") -> Callable[[str], int]:
    """An argparse type: ASCII decimal digits (a ``-`` first for a negative ``lo``) within ``lo..hi``.

    ``int()`` would also take ``1_0``, blanks and other scripts' digits, and
    raise on 5,000 digits; a value out of range is refused by name rather than
    failing later with a traceback (a CLI sweep met several).
    """

    def parse(text: str) -> int:
        negative = text.startswith("-")
        digits = text[1:] if negative else text
        if not (digits.isascii() and digits.isdigit()):
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not {what}")
        magnitude = decimal_below(digits, max(abs(lo), abs(hi)).bit_length() + 1)
        value = None if magnitude is None else -magnitude if negative else magnitude
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text[:40]} is outside {lo}..{hi}")
        return value

    return parse


_depth = int_in(0, MAX_PO, "a decimal depth")
_non_negative = int_in(0, (1 << 256) - 1)  # times in ns, balances in PLUR: any size they take


SAMPLE_HELP = """\
The reserve sample of a store on disk, as the /rchash answer.

Prints one JSON object on stdout: the reference node's ``/rchash`` fields
(``hash``, ``proofs``, ``durationSeconds``) followed by ``stats`` (the run's
SampleStats), ``storageRadius`` (entries below it were not sampled) and
``hashBackend`` (the backend in use, why, and the one the sample hashed
with), or exactly the /rchash object with ``--rchash-only``. Progress
(a tqdm bar: stamp entries walked of the expected count, rate, ETA) goes to
stderr, and only when stderr is a terminal, so scripted runs get clean
output. Exit codes: 0 sample made, 1 no sample (fewer than 16 eligible
chunks, or a store error), 2 bad usage."""


def sample_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="chunkstore sample", description=SAMPLE_HELP.split("\n\n")[0])
    p.add_argument("--data-dir", required=True, help="store directory")
    p.add_argument("--depth", required=True, type=_depth, help=f"neighbourhood depth (committed depth), 0..{MAX_PO}")
    p.add_argument("--anchor1", required=True, type=_anchor, help="sample anchor (salt), hex")
    p.add_argument("--anchor2", required=True, type=_anchor, help="proof anchor, hex")
    p.add_argument("--consensus-time", type=_non_negative, default=None,
                   help="Unix ns; stamps after it are left out (default: now)")  # fmt: skip
    p.add_argument("--min-balance", type=_non_negative, default=None, help="leave out batches valued below this (default: from the chain state, as /rchash)")
    p.add_argument("--workers", type=_non_negative, default=None, help="worker processes (default: CPU count)")
    p.add_argument("--rchash-only", action="store_true", help="print exactly the /rchash answer, without stats")
    return p


def sample_main(argv: list[str]) -> int:
    args = sample_parser().parse_args(_own(argv, "sample"))
    from chunkstore.swarm.bmt import loading

    # Before anything imports the backend: its kernels load in a thread, so that the sampler's scan kernels
    # can compile aside meanwhile (sampler.start_pool), where a fresh install compiled one after the other.
    loading.load_in_background()
    from api.sampling import sample_min_balance
    from chunkstore.reserve import ReserveStore
    from chunkstore.swarm.bmt import backend as hashing
    from chunkstore.swarm.errors import SwarmError
    from chunkstore.transfer.progress import bar
    from sampler import (
        InsufficientSample,
        expected_entries,
        make_inclusion_proofs,
        reserve_sample,
        sample_hash,
        start_pool,
    )
    from sampler.render import render_rchash

    progress = sys.stderr.isatty()

    def say(msg: str) -> None:
        if progress:
            print(msg, file=sys.stderr, flush=True)

    consensus = time.time_ns() if args.consensus_time is None else args.consensus_time
    try:
        store = ReserveStore(args.data_dir, readonly=True)
    except (SwarmError, OSError) as exc:
        print(f"chunkstore sample: cannot open store {args.data_dir}: {exc}", file=sys.stderr)
        return 2  # no usable store, as verify and export answer
    start_pool(store, args.workers)  # the kernels, and the fork server the sample's workers fork from
    min_balance = sample_min_balance(store, args.min_balance)  # as the daemon's /rchash samples
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
                result = reserve_sample(store, args.anchor1, args.depth, consensus, min_balance,
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


# ---------------------------------------------------------------- verify


def verify_main(argv: list[str]) -> int:
    """``chunkstore verify --data-dir DIR [--repair]``: exit 0 when clean, 1 on any corruption, 2 no store."""
    parser = argparse.ArgumentParser(prog="chunkstore verify", description="Check (and optionally repair) a chunk store.")
    parser.add_argument("--data-dir", required=True, help="the store directory")
    parser.add_argument("--repair", action="store_true", help="remove dangling and invalid entries found")
    opts = parser.parse_args(_own(argv, "verify"))
    from chunkstore.reserve import reserve_policy
    from chunkstore.store.store import ChunkStore
    from chunkstore.store.verify import verify_store
    from chunkstore.swarm.errors import SwarmError
    from chunkstore.transfer.progress import bar

    try:
        with ChunkStore(opts.data_dir, readonly=True) as store:
            total = store.chunk_count()
        with bar("verifying", total) as pbar:  # drawn only when stderr is a terminal
            # A repair opens the store as the node does, reserve and all, so that the open
            # settles the bin counters against the node's overlay first.
            report = verify_store(opts.data_dir, repair=opts.repair, progress=pbar.update, policy=reserve_policy())
    except SwarmError as exc:
        print(f"chunkstore verify: {exc}", file=sys.stderr)
        return 2
    for problem in report.problems:
        print(problem)
    print(report.summary())
    return 0 if report.ok else 1


# ---------------------------------------------------------------- import / export


def import_main(argv: list[str]) -> int:
    """``chunkstore import``: exit 0 on success, 1 if the input was refused (store unchanged) or the disk filled up,
    2 on usage errors."""
    from chunkstore.transfer.budget import MiB
    from chunkstore.transfer.importer import DEFAULT_BUDGET, STAGING

    parser = argparse.ArgumentParser(
        prog="chunkstore import",
        description="Load a reserve: the reference node's 'bee db export reserve' tar, or a snapshot "
        "written by 'chunkstore export --format snapshot' (told apart by its first bytes).",
    )
    parser.add_argument("source", metavar="FILE|-", help="the file to import, or - for standard input")
    parser.add_argument("--data-dir", required=True, help="the store directory (created if missing)")
    parser.add_argument("--batches", metavar="FILE.json", help="register these batches (POST /batches shape) in the same run")
    parser.add_argument("--workers", type=int_in(0, 1024), default=None,
                        help="validation processes (default: one per core; 0: in this process)")
    parser.add_argument("--memory-budget", type=int_in(1, 1 << 24), default=DEFAULT_BUDGET // MiB, metavar="MiB",
                        help=f"bound on this process's memory (default {DEFAULT_BUDGET // MiB})")
    parser.add_argument("--skip-conflicts", action="store_true",
                        help="leave out (and list) records whose slot is held under an equal or newer stamp, "
                        "instead of refusing the whole import")
    parser.add_argument("--shards", type=int_in(1, MAX_SHARDS), default=None, help="shard count of a new store")
    parser.add_argument("--staging-dir", default=None, help=f"where to stage runs (default DIR/{STAGING})")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bars (default: when stderr is a terminal)")
    opts = parser.parse_args(_own(argv, "import"))
    from chunkstore.store.errors import StoreWriteFailed
    from chunkstore.swarm.errors import SwarmError
    from chunkstore.transfer.batchfile import load_batches
    from chunkstore.transfer.errors import TransferError
    from chunkstore.transfer.importer import import_reserve

    try:
        file_batches = load_batches(opts.batches) if opts.batches else []
        report = import_reserve(
            opts.data_dir,
            opts.source,
            batches=file_batches,
            workers=opts.workers,
            memory_budget=opts.memory_budget * MiB,
            skip_conflicts=opts.skip_conflicts,
            shards=opts.shards,
            staging_dir=opts.staging_dir,
            show_progress=opts.progress,
        )
    except TransferError as exc:
        print(f"chunkstore import: {exc}", file=sys.stderr)
        return 1
    except StoreWriteFailed as exc:  # the disk filled up while publishing
        print(f"chunkstore import: {exc}", file=sys.stderr)
        for note in getattr(exc, "__notes__", ()):
            print(f"chunkstore import: {note}", file=sys.stderr)
        return 1
    except (SwarmError, OSError, ValueError) as exc:
        print(f"chunkstore import: {exc}", file=sys.stderr)
        return 2
    for warning in report.warnings:
        print(f"chunkstore import: warning: {warning}", file=sys.stderr)
    for refusal in report.load.refusals:
        print(f"refused: {refusal}", file=sys.stderr)
    print(report.summary())
    return 0


def export_main(argv: list[str]) -> int:
    """``chunkstore export``: exit 0 on success, 2 on errors."""
    from chunkstore.transfer.exporter import DEFAULT_FRAME, DEFAULT_LEVEL

    parser = argparse.ArgumentParser(
        prog="chunkstore export",
        description="Write the reserve as the reference node's 'bee db export reserve' tar, or as a snapshot.",
    )
    parser.add_argument("destination", metavar="FILE|-", help="the file to write, or - for standard output")
    parser.add_argument("--data-dir", required=True, help="the store directory")
    parser.add_argument("--format", choices=("tar", "snapshot"), default="tar")
    parser.add_argument("--batches", metavar="OUT.json", help="also write the store's batches (for import --batches)")
    parser.add_argument("--frame-size", type=int_in(1, (1 << 22) - 1), default=DEFAULT_FRAME // 1024, metavar="KiB",
                        help=f"snapshot: decoded bytes per frame (default {DEFAULT_FRAME // 1024})")
    parser.add_argument("--level", type=int_in(1, 22), default=DEFAULT_LEVEL, help="snapshot: zstd level (1..22)")
    parser.add_argument("--threads", type=int_in(1, 256), default=None, help="snapshot: compression threads")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar (default: when stderr is a terminal)")
    opts = parser.parse_args(_own(argv, "export"))
    from chunkstore.swarm.errors import SwarmError
    from chunkstore.transfer.exporter import export_reserve

    try:
        report = export_reserve(
            opts.data_dir,
            opts.destination,
            fmt=opts.format,
            batches_out=opts.batches,
            frame_size=opts.frame_size * 1024,
            level=opts.level,
            threads=opts.threads,
            show_progress=opts.progress,
        )
    except (SwarmError, OSError) as exc:
        print(f"chunkstore export: {exc}", file=sys.stderr)
        return 2
    print(report.summary(), file=sys.stderr if opts.destination == "-" else sys.stdout)
    return 0


# ---------------------------------------------------------------- selfcheck


def selfcheck_main(argv: list[str]) -> int:
    """``chunkstore selfcheck``: rebuild the reference's regression sample and compare the fast BMT path."""
    from chunkstore.testing import recipe

    argparse.ArgumentParser(prog="chunkstore selfcheck", description=recipe.__doc__).parse_args(argv)
    from chunkstore.swarm import bmt
    from chunkstore.swarm.bmt import reference

    start = time.perf_counter()
    got = recipe.regression_sample_address().hex()
    want = recipe.EXPECTED_SAMPLE_ADDRESS.hex()
    ok = got == want
    print(f"regression sample address {got}: {'ok' if ok else 'MISMATCH, expected ' + want}")
    fast_ok = all(
        bmt.chunk_hash(data, prefix) == reference.chunk_hash(data, prefix)
        for data in (bytes(8), b"\x05" + bytes(7) + b"hello", bytes(range(256)) * 16 + bytes(8))
        for prefix in (b"", recipe.ANCHOR1)
    )
    print(f"hashing backend {bmt.BACKEND}: {'agrees with the reference BMT' if fast_ok else 'DISAGREES with the reference BMT'}")
    ok = ok and fast_ok
    print(f"took {1000 * (time.perf_counter() - start):.1f} ms")
    return 0 if ok else 1


# ---------------------------------------------------------------- dispatch

COMMANDS: dict[str, tuple[Command, str]] = {
    "serve": (serve_main, "run the HTTP daemon"),
    "sample": (sample_main, "compute the reserve sample, hash and proofs (the /rchash answer)"),
    "verify": (verify_main, "check every stored chunk, stamp and index entry"),
    "import": (import_main, "load a reserve: the reference node's export tar, or a snapshot"),
    "export": (export_main, "write the reserve as the reference node's tar, or as a snapshot"),
    "selfcheck": (selfcheck_main, "check the hashing and signing primitives against the reference vector"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="chunkstore",
        description="Swarm chunk store daemon with reserve sampling.",
        epilog="Run 'chunkstore COMMAND --help' for a command's options.",
    )
    parser.add_argument("command", choices=sorted(COMMANDS), help="; ".join(f"{k}: {v[1]}" for k, v in COMMANDS.items()))
    parser.add_argument("-V", "--version", action="store_true", help="print the version and exit")
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0 if argv else 2
    if argv[0] in ("-V", "--version", "version"):  # ``version`` as the reference node's ``bee version``
        from .version import describe

        print(describe())
        return 0
    args, _ = parser.parse_known_args(argv[:1])
    command, _help = COMMANDS[args.command]
    if args.command != "serve":  # the daemon drains on SIGTERM its own way
        signal.signal(signal.SIGTERM, _terminated)
    try:
        return int(command(list(argv[1:])) or 0)
    except Terminated:
        print(f"chunkstore {args.command}: terminated (SIGTERM)", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        # Each command cleans up on the way out (staging, partial files); the operator asked for it.
        print(f"chunkstore {args.command}: interrupted", file=sys.stderr)
        return 130


class Terminated(KeyboardInterrupt):
    """SIGTERM to a command: unwound like Ctrl-C, so that an import's staging and an export's partial file
    are removed on the way out (by default SIGTERM ended the process where it stood, leaving both)."""


def _terminated(signum: int, frame: object) -> None:  # noqa: ARG001
    raise Terminated


if __name__ == "__main__":
    sys.exit(main())
