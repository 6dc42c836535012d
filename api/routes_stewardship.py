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

``PUT /stewardship/{reference}`` re-uploads the content with the batch in
``Swarm-Postage-Batch-Id`` (swarm-cli's ``pinning reupload``): the reference
node walks the same tree from its own store, stamps every chunk again with
that batch (a chunk the batch stamped before keeps its bucket position) and
pushes each to the network. With no peers the closest node is this one, so
each chunk is stored here under its new stamp, which is what the reference
node with no peers does (``pkg/steward``, pushsync's "want self"). It goes
through the upload path (``UploadSession``: the root group last, so a
failed re-upload leaves the old stamps in place and no half-stamped root).
Answers: 200 ``{"code": 200, "message": "OK"}``; 400 for the reference or
a missing or bad batch header; 404 for a batch the node did not buy
(``batch with id not found``) or a chunk of the tree that is not here (the
reference answers 500 "re-upload failed" for both); 422 for no valid
tree; 402 for an immutable batch's full bucket; 507 for a full disk.
"""

from __future__ import annotations

import functools

from aiohttp import web

from chunkstore.content import NotNodeBatch, UploadOptions
from chunkstore.reserve import ReserveStore
from chunkstore.store.errors import ChunkNotFound, UnknownBatch
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.file import ChunkMissing, FileError
from chunkstore.swarm.mantaray import ManifestError
from chunkstore.swarm.redundancy.level import DEFAULT_DOWNLOAD_LEVEL, DEFAULT_UPLOAD_LEVEL, Level
from chunkstore.swarm.traversal import tree_addresses

from .errors import ApiError, json_response, status_response
from .routes_bytes import parse_reference
from .state import AppState, state_of
from .uploads import in_upload_thread, redundancy_level, required_batch_id, upload_error


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


def reupload(st: AppState, reference: bytes, batch_id: bytes, level: Level) -> int:
    """Stamp every chunk of the content at ``reference`` again with ``batch_id`` and store it (blocking).

    Returns the number of chunks stamped. Raises ``ChunkMissing``/``ChunkNotFound`` for a chunk of the
    tree that is not here, ``FileError``/``ManifestError`` for no valid tree, and what an upload raises.
    """
    with st.upload_session(batch_id, UploadOptions(deferred=False)) as session:  # a direct upload: no tag
        for address in tree_addresses(reference, st.store.get, level=level):
            session.put(address, st.store.get(address))
        return session.finish(reference).put


async def put_stewardship(request: web.Request) -> web.Response:
    st = state_of(request)
    reference = parse_reference(request.match_info["reference"], "reference")
    batch_id = required_batch_id(request)
    level = redundancy_level(request, DEFAULT_UPLOAD_LEVEL)
    try:
        await in_upload_thread(st, functools.partial(reupload, st, reference, batch_id, level))
    except (UnknownBatch, NotNodeBatch):
        raise ApiError(404, "batch with id not found") from None
    except (ChunkMissing, ChunkNotFound) as exc:
        raise ApiError(404, f"re-upload failed: the content is not all held here: {exc}") from None
    except (FileError, ManifestError) as exc:
        raise ApiError(422, f"re-upload failed: the reference leads to no valid tree: {exc}") from None
    except SwarmError as exc:
        raise upload_error(request, exc) from None
    return status_response()


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_get(p + "/stewardship/{reference}", get_stewardship, allow_head=False)
        app.router.add_put(p + "/stewardship/{reference}", put_stewardship)
