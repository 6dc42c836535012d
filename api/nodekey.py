"""The node's secp256k1 key: its Ethereum address owns the node's batches and signs their stamps.

Kept in ``<data dir>/node.key`` (the private key as 64 hex characters and a
newline, mode 0600), created on the first start; or read from the file
``--node-key-file`` names, which must exist (a typo must not quietly give the
node a new identity). The overlay is separate and stays as it is (given, or
generated once and kept in the data dir).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from chunkstore.swarm.signer import Signer

from .demo import write_private

log = logging.getLogger(__name__)

NODE_KEY_FILE = "node.key"


class NodeKeyError(Exception):
    """The key file cannot be read or does not hold a key (the daemon refuses to start)."""


def read_key(path: Path) -> Signer:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip().lower().removeprefix("0x")
    except OSError as exc:
        raise NodeKeyError(f"cannot read the node key file {path}: {exc.strerror or exc}") from None
    try:
        return Signer(bytes.fromhex(text))
    except ValueError as exc:
        raise NodeKeyError(f"{path} does not hold a secp256k1 private key as 64 hex characters ({exc})") from None


def load_node_key(data_dir: Path, key_file: Path | None = None) -> Signer:
    """The node key: from ``key_file`` if given (it must exist), else the data dir's, created if missing."""
    if key_file is not None:
        path = Path(key_file)
        if not path.exists():
            raise NodeKeyError(f"node key file {path} does not exist (create it or drop --node-key-file)")
        signer = read_key(path)
    else:
        path = Path(data_dir) / NODE_KEY_FILE
        if path.exists():
            signer = read_key(path)
        else:
            signer = Signer.generate()
            write_private(path, signer.secret.hex() + "\n")
            log.info("node key generated", extra={"fields": {"file": str(path), "ethereum": signer.address.hex()}})
            return signer
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077:
        log.warning(
            "the node key file is readable by others; chmod 600 it",
            extra={"fields": {"file": str(path), "mode": oct(mode)}},
        )
    return signer
