"""``POST /bytes``, ``GET``/``HEAD /bytes/{reference}``: raw data as a Bee chunk tree (``pkg/api/bytes.go``).

``POST /bytes`` splits the body with Bee's splitter (4096-byte leaves,
128 references per intermediate chunk, 8-byte little-endian spans; 64 with
``Swarm-Encrypt``), erasure-coded at ``Swarm-Redundancy-Level`` (default
MEDIUM, as Bee), every chunk stamped by the node (``api.uploads``), and
answers 201 ``{"reference"}`` once the whole tree is stored. The body is
streamed: memory stays flat in its size.

``GET`` streams the joined data (``api.serve``: ``Range``, ``ETag``);
a 64-byte reference is decrypted; data chunks lost from an erasure-coded
tree are rebuilt from its parities. ``HEAD`` gives the length: the file
size from the root's span (level byte removed, decrypted; Bee reads the raw
span, which is not the size for those roots). A reference that is not 32
or 64 bytes of hex is a 400; one whose root is nowhere is a 404.
"""

from __future__ import annotations

from aiohttp import web

from chunkstore.content import open_file, write_file
from chunkstore.swarm import encryption
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.file import Joiner
from chunkstore.swarm.keccak import HASH_SIZE

from .errors import ParamError
from .params import decode_hex
from .serve import FileBody, check_retrieval_headers, serve_file, tree_error
from .state import AppState, state_of
from .uploads import act_reference, created, parse_upload, run_upload

OCTET_STREAM = "application/octet-stream"


def parse_reference(value: str, field: str = "address") -> bytes:
    """A reference path parameter: 32 bytes, or 64 (address and decryption key), in hex."""
    raw = decode_hex("path", field, value)
    if len(raw) not in (HASH_SIZE, encryption.REFERENCE_SIZE):
        raise ParamError("path", field, value, f"want {HASH_SIZE} or {encryption.REFERENCE_SIZE} bytes, got {len(raw)}")
    return raw


async def open_joiner(st: AppState, reference: bytes) -> Joiner:
    try:
        return await st.run(open_file, st.store, reference)
    except SwarmError as exc:
        raise tree_error(exc) from None


async def post_bytes(request: web.Request) -> web.Response:
    st = state_of(request)
    up = parse_upload(request)
    reference = await run_upload(
        request, st, up, lambda session, body: write_file(body, session, level=up.level, encrypt=up.encrypt)
    )
    return created(reference, up)


async def get_bytes(request: web.Request) -> web.StreamResponse:
    st = state_of(request)
    reference = await act_reference(request, st, parse_reference(request.match_info["address"]))
    check_retrieval_headers(request)
    joiner = await open_joiner(st, reference)
    headers = {"Access-Control-Expose-Headers": "Content-Disposition, Accept-Ranges, Content-Encoding"}
    return await serve_file(
        request, FileBody(joiner), content_type=OCTET_STREAM, headers=headers, etag=f'"{reference.hex()}"'
    )


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_post(p + "/bytes", post_bytes)
        app.router.add_get(p + "/bytes/{address}", get_bytes)  # HEAD too: serve_file answers it
