"""``chunkstore serve``: open the store, serve the HTTP API, drain and close on SIGTERM/SIGINT.

Exit codes: 0 after a clean shutdown; 2 for bad flags or a data dir this build
cannot use (unknown store format version, unreadable overlay file); 1 when
the daemon cannot start otherwise (e.g. the port is taken).

Start-up: the data dir is created if missing; the overlay is ``--overlay``
when given, else the one kept in ``<data dir>/overlay`` (generated and written
there on first start); the store is opened with that overlay and the reserve
settings (``--reserve-capacity``, ``--reserve-capacity-doubling``,
``--minimum-storage-radius``); a ``--chainstate`` file (the ``GET
/chainstate`` JSON shape) is loaded into it, and the reserve worker starts
with the server (it resumes any eviction a crash interrupted). With ``--demo`` the server
answers at once but ``/readiness`` says ``notReady`` until the demo fill has
finished.

Shutdown: on the first SIGTERM, SIGINT or SIGHUP the listener closes, in-flight
requests get up to ``--shutdown-timeout`` seconds to finish, a running sample
is cancelled, the thread pool drains and the store is closed. A second signal
during that cuts the wait short (an operator's second Ctrl-C): the requests
still running are cut off, and nothing they had not committed is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from chunkstore import __version__
from chunkstore.reserve import ChainState, InvalidChainState, ReserveOptions, ReserveStore, parse_chainstate
from chunkstore.store.errors import StoreFormatError, StoreWriteFailed
from chunkstore.swarm.bzz import MimeTable
from chunkstore.swarm.signer import Signer
from chunkstore.transfer.holdlock import hold
from chunkstore.transfer.importer import remove_abandoned_staging
from sampler import start_pool

from .app import make_app
from .config import Config
from .demo import fill_demo, write_private
from .logs import setup_logging
from .nodekey import NodeKeyError, load_node_key
from .routes_chunkstream import close_streams
from .routes_daemon import log_hash_backend
from .routes_stamps import DEV_CHAINSTATE
from .state import STATE, AppState

log = logging.getLogger(__name__)

OVERLAY_FILE = "overlay"


def reserve_options(config: Config) -> ReserveOptions:
    """The store's reserve settings from the daemon's ``Config``."""
    return ReserveOptions(
        capacity=config.reserve_capacity,
        doubling=config.reserve_capacity_doubling,
        minimum_radius=config.minimum_storage_radius,
        min_evict_count=config.reserve_min_evict_count,
        cache_capacity=config.cache_capacity,
    )


# SIGHUP too (a closed terminal, a service manager's reload): its default killed the daemon on the spot,
# with no log line and no drain.
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
SERVE_LOCK = "serve.lock"  # in the data dir: locked by the daemon serving it, its pid inside


def _serve_lock(data_dir: Path) -> int:
    """Lock the data dir for this daemon (the descriptor stays open, and so locked, until it exits), or raise
    ``StartupError`` when another daemon holds it. Two daemons on one store each answered for half its
    traffic: their metrics, tags and stamper positions in memory each saw only their own."""
    path = Path(data_dir) / SERVE_LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:  # e.g. no inode left on a full disk
        raise StartupError(f"cannot write to the data dir {data_dir}: {exc.strerror or exc}", 1) from None
    try:
        hold(fd)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise StartupError(f"another chunkstore serve (pid {holder}) is serving {data_dir}; refusing to start a "
                           "second", 2) from None
    with contextlib.suppress(OSError):  # the pid is for the message above only: a full disk may refuse it
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


class StartupError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def resolve_overlay(data_dir: Path, configured: str | None) -> bytes:
    """The configured overlay, else the one kept in the data dir (written there on first start)."""
    if configured:
        return bytes.fromhex(configured)
    path = Path(data_dir) / OVERLAY_FILE
    if path.exists():
        try:
            # errors="replace": bytes that are no text fail as hex below, with the message, not as a traceback
            text = path.read_text(encoding="ascii", errors="replace").strip().lower().removeprefix("0x")
        except OSError as exc:
            raise StartupError(f"cannot read the overlay file {path}: {exc.strerror or exc}", 2) from None
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raw = b""
        if len(raw) != 32:
            raise StartupError(f"{path} does not hold a 64-hex overlay address; fix or delete it", 2)
        return raw
    raw = os.urandom(32)
    write_private(path, raw.hex() + "\n")
    log.info("overlay generated", extra={"fields": {"overlay": raw.hex(), "file": str(path)}})
    return raw


def check_mime_types(path: Path | None) -> None:
    """A ``--mime-types`` file must be readable (it is loaded when the app is built)."""
    if path is None:
        return
    try:
        MimeTable().load_mime_types(path)
    except OSError as exc:
        raise StartupError(f"cannot read the mime types file {path}: {exc.strerror or exc}", 2) from None


def dev_chainstate(store: ReserveStore) -> None:
    """In --dev mode, a chain state the clients can price batches with, unless one is set already."""
    if store.reserve.chainstate is None:
        store.reserve.set_chainstate(DEV_CHAINSTATE)
        log.info("dev chain state set", extra={"fields": DEV_CHAINSTATE.to_json()})


def load_chainstate(path: Path | None) -> ChainState | None:
    """The chain state in a ``--chainstate`` file, or None without one; a bad file is a start-up error."""
    if path is None:
        return None
    try:
        return parse_chainstate(json.loads(Path(path).read_text()))
    except OSError as exc:
        raise StartupError(f"cannot read the chain state file {path}: {exc.strerror or exc}", 2) from None
    except (ValueError, InvalidChainState) as exc:
        raise StartupError(f"{path} is not a chain state ({{block, totalAmount, currentPrice}}): {exc}", 2) from None


async def serve(
    config: Config,
    store: ReserveStore,
    overlay: bytes,
    started: threading.Event | None = None,
    signer: Signer | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT, then drain; the caller closes ``store`` afterwards."""
    app = make_app(store, config, overlay=overlay, ready=not config.demo, signer=signer)
    state = app[STATE]
    # drain() does the patient waiting; what is left afterwards is cut off quickly
    runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None, handle_signals=False)
    await runner.setup()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    hurry = asyncio.Event()  # a second signal: stop waiting for the requests in flight
    demo_stop = threading.Event()
    demo_future: asyncio.Future[Any] | None = None

    def on_signal(signame: str) -> None:
        if stop.is_set():
            if not hurry.is_set():
                log.warning("second signal: cutting off the requests in flight now",
                            extra={"fields": {"signal": signame, "in_flight": state.inflight}})
                hurry.set()
            return
        log.info("shutting down", extra={"fields": {"signal": signame, "drain_timeout_s": config.shutdown_timeout}})
        demo_stop.set()
        stop.set()

    try:
        # handlers first: a signal right after "listening" must already drain, not kill
        for sig in _STOP_SIGNALS:
            loop.add_signal_handler(sig, on_signal, sig.name)
        site = web.TCPSite(runner, config.host, config.port)
        try:
            await site.start()
        except OSError as exc:
            raise StartupError(f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}", 1) from None
        addresses = [a for a in runner.addresses if isinstance(a, tuple)]
        port = addresses[0][1] if addresses else config.port
        log.info(
            "listening",
            extra={"fields": {"url": f"http://{config.host}:{port}", "host": config.host, "port": port,
                              "data_dir": str(config.data_dir), "overlay": overlay.hex(),
                              "ethereum": state.signer.address.hex(), "dev": config.dev, "pid": os.getpid()}},
        )

        if not config.dev:  # a development node is not asked for samples
            threading.Thread(target=_start_sampler_pool, args=(store, config.workers), name="sampler-start",
                             daemon=True).start()
        if config.demo:
            demo_future = loop.run_in_executor(
                state.executor,
                lambda: fill_demo(store, config.data_dir, config.demo_chunks, stop=demo_stop),
            )

            def demo_done(fut: asyncio.Future[Any]) -> None:
                if fut.cancelled():
                    return
                exc = fut.exception()
                if exc is not None:  # the daemon still serves what the store holds
                    log.error("demo fill failed", extra={"fields": {"error": repr(exc)}})
                state.ready = True

            demo_future.add_done_callback(demo_done)
        if started is not None:
            started.set()
        await stop.wait()
        await drain(runner, state, config.shutdown_timeout, hurry)
    finally:
        for sig in _STOP_SIGNALS:
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, ValueError, RuntimeError):
                pass
        demo_stop.set()
        if demo_future is not None:
            try:
                await demo_future
            except Exception:  # noqa: S110 - already logged by demo_done
                pass
        await runner.cleanup()
        log.info("stopped", extra={"fields": {"data_dir": str(config.data_dir)}})


def _start_sampler_pool(store: ReserveStore, workers: int | None) -> None:
    """Start the sampler's pool and fork server in the background, so that the first ``/rchash`` is timed
    as the next."""
    t0 = time.perf_counter()
    try:
        size = start_pool(store, workers)
    except Exception as exc:  # the first sample starts them instead (and reports what fails)
        log.warning("sampler pool did not start ahead of the first sample", extra={"fields": {"error": repr(exc)}})
        return
    log.info("sampler pool started", extra={"fields": {"workers": size, "seconds": round(time.perf_counter() - t0, 2)}})


async def drain(runner: web.AppRunner, state: AppState, timeout: float, hurry: asyncio.Event | None = None) -> None:
    """Stop listening, then let the requests already in handlers finish (bodies still arriving included),
    for at most ``timeout`` seconds, or until ``hurry`` is set.

    aiohttp's own shutdown stops reading from connections at once, so an upload
    whose body is still arriving would be cut off; hence this wait comes first.
    """
    for site in list(runner.sites):
        await site.stop()
    state.draining = True
    await close_streams(state)  # a chunk stream would hold the drain for as long as its client likes
    if state.inflight:
        log.info("draining", extra={"fields": {"in_flight": state.inflight, "timeout_s": timeout}})
    idle = asyncio.ensure_future(state.wait_idle(timeout))
    waits: set[asyncio.Future[Any]] = {idle}
    if hurry is not None:
        waits.add(asyncio.ensure_future(hurry.wait()))
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for waiting in pending:
        waiting.cancel()
    if idle not in done:
        log.warning("drain cut short; cutting off the remaining requests", extra={"fields": {"in_flight": state.inflight}})
    elif not idle.result():
        log.warning("drain timeout; cutting off the remaining requests", extra={"fields": {"in_flight": state.inflight}})


def run(config: Config) -> int:
    """``chunkstore serve`` once its flags are parsed (api/cli.py); returns the process exit code."""
    setup_logging(config.log_format, config.log_level)
    log.info(
        "starting",
        extra={"fields": {"version": __version__, "data_dir": str(config.data_dir), "host": config.host,
                          "port": config.port, "workers": config.workers, "demo": config.demo,
                          "admin_token": "set" if config.admin_token else "unset",
                          "sampling_window_s": config.sampling_window, "max_body": config.max_body}},
    )
    log_hash_backend()
    try:
        config.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.error("cannot create data dir", extra={"fields": {"data_dir": str(config.data_dir), "error": str(exc)}})
        return 2
    try:
        _serve_lock(config.data_dir)  # held until the process exits
        # The overlay first: the store counts its reserve by proximity to it.
        overlay = resolve_overlay(config.data_dir, config.overlay)
        chainstate = load_chainstate(config.chainstate)
        signer = load_node_key(config.data_dir, config.node_key_file)
        check_mime_types(config.mime_types)
    except NodeKeyError as exc:
        log.error(str(exc), extra={"fields": {"data_dir": str(config.data_dir)}})
        return 2
    except StartupError as exc:
        log.error(str(exc), extra={"fields": {"data_dir": str(config.data_dir)}})
        return exc.code
    except OSError as exc:  # e.g. no space for the overlay file on a full disk
        log.error("cannot write to the data dir", extra={"fields": {"data_dir": str(config.data_dir), "error": str(exc)}})
        return 1
    try:
        store = ReserveStore(config.data_dir, config.shards, overlay=overlay, reserve=reserve_options(config),
                             map_size=config.map_size)
    except StoreFormatError as exc:
        log.error(  # the reason in the message itself: a shard count given wrong is no format problem
            f"cannot open the store in the data dir ({exc}); refusing to start",
            extra={"fields": {"data_dir": str(config.data_dir), "error": str(exc)}},
        )
        return 2
    except (OSError, StoreWriteFailed) as exc:  # StoreWriteFailed: no space even for the open-time writes
        log.error("cannot open store", extra={"fields": {"data_dir": str(config.data_dir), "error": str(exc)}})
        return 1
    for path in remove_abandoned_staging(str(config.data_dir)):  # before the space probe: it frees space
        log.warning("removed the staging area a killed import left", extra={"fields": {"path": path}})
    refusal = store.probe_space()
    if refusal is not None:  # /readiness says notReady, with this reason, until there is room again
        log.warning("writes refused at start", extra={"fields": {"reason": refusal.reason, "error": refusal.message}})
    code = 0
    try:
        if chainstate is not None:
            try:
                if store.reserve.chainstate != chainstate:  # held already: no write, so a full disk does not stop the start
                    store.reserve.set_chainstate(chainstate)
            except StoreWriteFailed as exc:
                raise StartupError(f"cannot store the chain state of {config.chainstate}: {exc}", 1) from None
            log.info("chain state loaded", extra={"fields": {"file": str(config.chainstate), **chainstate.to_json()}})
        if config.dev:
            dev_chainstate(store)
        asyncio.run(serve(config, store, overlay, signer=signer))
    except StartupError as exc:
        log.error(str(exc), extra={"fields": {"data_dir": str(config.data_dir)}})
        code = exc.code
    except KeyboardInterrupt:
        pass
    finally:
        # Every request has drained and the thread pool is shut down by now.
        try:
            store.close()
            log.info("store closed", extra={"fields": {"data_dir": str(config.data_dir)}})
        except Exception as exc:
            log.error("store close failed", extra={"fields": {"error": repr(exc)}})
            code = code or 1
    return code

