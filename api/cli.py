"""The ``chunkstore`` command: one entry point dispatching to each layer's tools.

It lives in the top layer because ``serve`` needs the HTTP daemon and ``sample``
the sampler; each subcommand's implementation stays in the layer it belongs to.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> (module, help). Modules are imported lazily so that, e.g.,
# ``chunkstore verify`` does not pay for importing aiohttp.
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("api.server", "run the HTTP daemon"),
    "sample": ("sampler.cli", "compute the reserve sample, hash and proofs (the /rchash answer)"),
    "verify": ("chunkstore.store.verify", "check every stored chunk, stamp and index entry"),
    "import": ("chunkstore.transfer.importer", "load a reserve: the reference node's export tar, or a snapshot"),
    "export": ("chunkstore.transfer.exporter", "write the reserve as the reference node's tar, or as a snapshot"),
    "selfcheck": ("chunkstore.testing.recipe", "check the hashing and signing primitives against the reference vector"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="chunkstore",
        description="Swarm chunk store daemon with reserve sampling.",
        epilog="Run 'chunkstore COMMAND --help' for a command's options.",
    )
    parser.add_argument("command", choices=sorted(COMMANDS), help="; ".join(f"{k}: {v[1]}" for k, v in COMMANDS.items()))
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0 if argv else 2
    args, rest = parser.parse_known_args(argv[:1])
    module = importlib.import_module(COMMANDS[args.command][0])
    return int(module.main(list(argv[1:])) or 0)


if __name__ == "__main__":
    sys.exit(main())
