"""``GET /stewardship/{reference}``: is the content at a reference retrievable (``pkg/api/stewardship.go``)?

The reference node walks the content's tree (``pkg/traversal``: bytes trees
with their parities, manifests and every file in them, encrypted references,
a single SOC) and fetches every chunk from the network; the answer is
``{"isRetrievable": true}`` when all of them came back. This node has no
peers, so "retrievable" means retrievable from here: every chunk of the same
walk (``chunkstore.swarm.traversal``) is held in this store. A chunk the
joiner could rebuild from parities still counts as missing, as a failed
fetch does on the reference node.

Answers: 200 ``{"isRetrievable": bool}``; 400 for a reference that is not 32
or 64 bytes of hex or a bad ``Swarm-Redundancy-Level`` (which replicas of a
lost root the walk tries, as on downloads); 422 when the root is here but
leads to no valid tree (the reference node answers 500 "is retrievable
check failed").

``PUT /stewardship/{reference}`` (re-upload to the network) needs peers:
501, with the reason.
"""

from __future__ import annotations

from aiohttp import web

from chunkstore.reserve import ReserveStore
from chunkstore.store.errors import ChunkNotFound
from chunkstore.swarm.file import ChunkMissing, FileError
from chunkstore.swarm.mantaray import ManifestError
from chunkstore.swarm.redundancy.level import DEFAULT_DOWNLOAD_LEVEL, Level
from chunkstore.swarm.traversal import tree_addresses

from .errors import ApiError, json_response
from .routes_bytes import parse_reference
from .state import state_of
from .uploads import redundancy_level


def is_retrievable(store: ReserveStore, reference: bytes, level: Level) -> bool:
    """Whether every chunk of the content at ``reference`` is held here (blocking: reads the tree).

    Raises ``FileError``/``ManifestError`` when the chunks that are here form no valid tree.
    """
    try:
        return all(store.has(address) for address in tree_addresses(reference, store.get, level=level))
    except (ChunkMissing, ChunkNotFound):  # an intermediate chunk or manifest node the walk needed
        return False


async def get_stewardship(request: web.Request) -> web.Response:
    st = state_of(request)
    reference = parse_reference(request.match_info["reference"], "reference")
    level = redundancy_level(request, DEFAULT_DOWNLOAD_LEVEL)
    try:
        retrievable = await st.run(is_retrievable, st.store, reference, level)
    except (FileError, ManifestError) as exc:
        raise ApiError(422, f"is retrievable check failed: the reference leads to no valid tree: {exc}") from None
    return json_response({"isRetrievable": retrievable})


async def put_stewardship(request: web.Request) -> web.Response:
    parse_reference(request.match_info["reference"], "reference")
    raise ApiError(501, "re-upload sends the chunks to peers; this node has none")


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_get(p + "/stewardship/{reference}", get_stewardship, allow_head=False)
        app.router.add_put(p + "/stewardship/{reference}", put_stewardship)
