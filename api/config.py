"""Daemon settings: command-line flags, each also readable from a ``CHUNKSTORE_*`` variable.

Precedence: a flag on the command line, then the environment variable, then
the default. The variable of ``--some-flag`` is ``CHUNKSTORE_SOME_FLAG``;
boolean flags (``--demo``) accept 1/0, true/false, yes/no, on/off.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from chunkstore.store.layout import MAX_SHARDS
from chunkstore.store.mapsize import parse_size
from chunkstore.swarm.constants import (
    BLOCK_TIME,
    CACHE_CAPACITY,
    MAX_CAPACITY_DOUBLING,
    MAX_PO,
    MAX_SOC_SIZE,
    RESERVE_CAPACITY,
    RESERVE_MIN_EVICT_COUNT,
)

ENV_PREFIX = "CHUNKSTORE_"
DEFAULT_PORT = 1633
# The largest chunk upload the reference node accepts: a SOC (97-byte header) around a full CAC.
SOC_MAX_BODY = MAX_SOC_SIZE
MIN_MAP_FLAG = 1 << 20  # LMDB needs a few pages per database; below a MiB nothing useful fits


@dataclass(frozen=True)
class Config:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    workers: int | None = None
    overlay: str | None = None
    admin_token: str | None = None
    demo: bool = False
    demo_chunks: int = 3000
    sampling_window: float = 585.0
    max_body: int = SOC_MAX_BODY
    sample_wait: float = 10.0
    min_batch_balance: int | None = None
    threads: int = 8
    max_uploads: int = 256
    shards: int | None = None
    shutdown_timeout: float = 30.0
    log_format: str = "json"
    log_level: str = "info"
    cors_allowed_origins: tuple[str, ...] = ()
    reserve_capacity: int = RESERVE_CAPACITY
    reserve_capacity_doubling: int = 0
    minimum_storage_radius: int = 0
    reserve_min_evict_count: int = RESERVE_MIN_EVICT_COUNT
    cache_capacity: int = CACHE_CAPACITY
    chainstate: Path | None = None
    block_time: int = BLOCK_TIME
    map_size: int | None = None
    node_key_file: Path | None = None
    dev: bool = False
    mime_types: Path | None = None


def env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


_TRUE = {"1", "true", "t", "yes", "y", "on"}
_FALSE = {"0", "false", "f", "no", "n", "off", ""}


def parse_bool(value: str) -> bool:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _integer(value: str) -> int:
    # argparse would word a ValueError with the converter's own name ("invalid _port value").
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a decimal integer") from None


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None


def _positive_int(value: str) -> int:
    n = _integer(value)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return n


def _port(value: str) -> int:
    n = _integer(value)
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"port must be in 0..65535, got {value}")
    return n


def _non_negative_int(value: str) -> int:
    n = _integer(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {value}")
    return n


def _positive_float(value: str) -> float:
    x = _number(value)
    if not x > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value}")
    return x


def _non_negative_float(value: str) -> float:
    x = _number(value)
    if not x >= 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative number, got {value}")
    return x


def _overlay(value: str) -> str:
    v = value.lower().removeprefix("0x")
    if len(v) != 64:
        raise argparse.ArgumentTypeError(f"overlay must be 64 hex characters, got {len(v)}")
    try:
        bytes.fromhex(v)
    except ValueError:
        raise argparse.ArgumentTypeError("overlay is not hex") from None
    return v


def _doubling(value: str) -> int:
    n = _integer(value)
    if not 0 <= n <= MAX_CAPACITY_DOUBLING:
        raise argparse.ArgumentTypeError(f"must be in 0..{MAX_CAPACITY_DOUBLING}, got {value}")
    return n


def _radius(value: str) -> int:
    n = _integer(value)
    if not 0 <= n <= MAX_PO:
        raise argparse.ArgumentTypeError(f"must be in 0..{MAX_PO}, got {value}")
    return n


def _shards(value: str) -> int:
    # The store refuses other counts when it opens; checked here, that is a usage error and not a traceback.
    n = _integer(value)
    if not 1 <= n <= MAX_SHARDS:
        raise argparse.ArgumentTypeError(f"must be in 1..{MAX_SHARDS}, got {value}")
    return n


def _map_size(value: str) -> int:
    try:
        n = parse_size(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if n < MIN_MAP_FLAG:
        raise argparse.ArgumentTypeError(f"map size must be at least {MIN_MAP_FLAG >> 20} MiB, got {value}")
    return n


def _balance(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"min batch balance must be a non-negative decimal integer, got {value!r}")
    return int(value)


# (flag, type, help); a type of bool marks a switch. Defaults are those of ``Config``.
_OPTIONS: list[tuple[str, Callable[[str], Any], str]] = [
    ("--data-dir", str, "directory of the store (created when missing)"),
    ("--host", str, "address to listen on"),
    ("--port", _port, "TCP port (0 picks a free one; the log says which)"),
    ("--workers", _positive_int, "sampler worker processes (default: CPU count)"),
    ("--overlay", _overlay, "node overlay address, 64 hex (default: generated once, kept in the data dir)"),
    ("--admin-token", str, "bearer token that allows batch and chain state changes from non-loopback clients"),
    ("--demo", bool, "on an empty store, register a demo batch and fill random stamped chunks"),
    ("--demo-chunks", _positive_int, "how many chunks --demo writes"),
    ("--sampling-window", _positive_float, "seconds a sample must finish in (verdict of /rchash?verbose=true)"),
    ("--max-body", _positive_int, "largest request body accepted, bytes"),
    ("--sample-wait", _non_negative_float, "seconds a different /rchash request waits for a running sample before 503"),
    ("--min-batch-balance", _balance, "exclude batches whose value is below this from the sample (default: the reference agent's minimum from the chain state)"),
    ("--threads", _positive_int, "threads for blocking store calls"),
    ("--max-uploads", _positive_int, "uploads in progress at once (a thread each while its body arrives); more are a 503"),
    ("--shards", _shards, "store shards for a new store (default: the store's own)"),
    ("--shutdown-timeout", _non_negative_float, "seconds to drain in-flight requests on SIGTERM/SIGINT"),
    ("--log-format", str, "json (JSON lines) or kv (key=value)"),
    ("--log-level", str, "debug, info, warning or error"),
    ("--cors-allowed-origins", str, "comma-separated origins browsers may call from (* for any)"),
    ("--reserve-capacity", _positive_int, "reserve capacity in chunks, before doubling"),
    ("--reserve-capacity-doubling", _doubling, f"double the reserve capacity this many times (0..{MAX_CAPACITY_DOUBLING})"),
    ("--minimum-storage-radius", _radius, "storage radius floor; chunks farther from the overlay are refused"),
    ("--reserve-min-evict-count", _positive_int, "entries evicted at least per batch visited when over capacity"),
    ("--cache-capacity", _non_negative_int, "chunks the cache keeps of uploads outside the storage radius "
     "(least recently used out first; pinned content is kept apart from it)"),
    ("--chainstate", str, "JSON file with the chain state {block, totalAmount, currentPrice} to load at start"),
    ("--block-time", _positive_int, "seconds per block, for batchTTL"),
    ("--node-key-file", str, "file holding the node's secp256k1 key as 64 hex (default: <data dir>/node.key, "
     "created on first start)"),
    ("--dev", bool, "development mode: POST /stamps buys batches at once, /wallet has a dev balance; no chain"),
    ("--mime-types", str, "a mime.types file whose extensions add to Go's built-in table for typing tar entries"),
    ("--map-size", _map_size, "LMDB map size of each store environment, e.g. 512G or 4T (default: the size "
     "of the data dir's file system, within 256 GiB..16 TiB over the shards)"),
]


_DEFAULTS = {f.name: f.default for f in fields(Config) if f.default is not MISSING}


def _default(dest: str) -> object:
    """A flag's default: the ``Config`` field's, as the command line would spell a list of origins."""
    value = _DEFAULTS.get(dest)
    if isinstance(value, tuple):
        return ",".join(value)
    return value


def build_parser(env: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    env = os.environ if env is None else env
    parser = argparse.ArgumentParser(
        prog="chunkstore serve",
        description="Serve a Swarm chunk store over the reference node's HTTP API.",
        epilog="Every flag can also be set by a CHUNKSTORE_<FLAG> environment variable, e.g. CHUNKSTORE_DATA_DIR.",
    )
    for flag, typ, help_text in _OPTIONS:
        dest = flag.lstrip("-").replace("-", "_")
        default = _default(dest)
        var = env_name(flag)
        if typ is bool:
            env_value = env.get(var)
            value = default
            if env_value is not None:
                try:
                    value = parse_bool(env_value)
                except ValueError:
                    parser.error(f"{var}={env_value!r} is not a boolean")
            parser.add_argument(
                flag, dest=dest, action=argparse.BooleanOptionalAction, default=value, help=f"{help_text} [{var}]"
            )
        else:
            # argparse converts string defaults with the option's type, so bad env values fail like bad flags.
            value = env.get(var, default)
            parser.add_argument(flag, dest=dest, type=typ, default=value, help=f"{help_text} [{var}]")
    return parser


def parse_config(argv: Sequence[str], env: Mapping[str, str] | None = None) -> Config:
    """Parse flags (``serve`` as a first word is skipped); exits with status 2 on bad input."""
    args = list(argv)
    if args and args[0] == "serve":
        args = args[1:]
    parser = build_parser(env)
    ns = parser.parse_args(args)
    if not ns.data_dir:
        parser.error(f"--data-dir (or {env_name('--data-dir')}) is required")
    if ns.log_format not in ("json", "kv"):
        parser.error(f"--log-format must be json or kv, got {ns.log_format!r}")
    if ns.log_level.lower() not in ("debug", "info", "warning", "error"):
        parser.error(f"--log-level must be debug, info, warning or error, got {ns.log_level!r}")
    if ns.max_body < SOC_MAX_BODY:
        parser.error(f"--max-body must be at least {SOC_MAX_BODY} (the largest chunk upload)")
    return Config(
        data_dir=Path(ns.data_dir),
        host=ns.host,
        port=ns.port,
        workers=ns.workers,
        overlay=ns.overlay,
        admin_token=ns.admin_token or None,
        demo=bool(ns.demo),
        demo_chunks=ns.demo_chunks,
        sampling_window=ns.sampling_window,
        max_body=ns.max_body,
        sample_wait=ns.sample_wait,
        min_batch_balance=ns.min_batch_balance,
        threads=ns.threads,
        max_uploads=ns.max_uploads,
        shards=ns.shards,
        shutdown_timeout=ns.shutdown_timeout,
        log_format=ns.log_format,
        log_level=ns.log_level.lower(),
        cors_allowed_origins=tuple(o.strip() for o in ns.cors_allowed_origins.split(",") if o.strip()),
        reserve_capacity=ns.reserve_capacity,
        reserve_capacity_doubling=ns.reserve_capacity_doubling,
        minimum_storage_radius=ns.minimum_storage_radius,
        reserve_min_evict_count=ns.reserve_min_evict_count,
        cache_capacity=ns.cache_capacity,
        chainstate=Path(ns.chainstate) if ns.chainstate else None,
        block_time=ns.block_time,
        map_size=ns.map_size,
        node_key_file=Path(ns.node_key_file) if ns.node_key_file else None,
        dev=bool(ns.dev),
        mime_types=Path(ns.mime_types) if ns.mime_types else None,
    )
