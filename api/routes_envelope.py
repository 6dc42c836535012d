"""``POST /envelope/{address}``: a stamp from one of the node's batches for a chunk the client will upload itself.

The reference node's ``pkg/api/envelope.go``: the node signs a stamp for
``address`` with the batch named in ``Swarm-Postage-Batch-Id`` and answers
201 ``{issuer, index, timestamp, signature}`` (the issuer in EIP-55 form, the
rest hex), storing nothing but the position it used. A client (bee-js'
``createEnvelope``) joins these with the batch id into the 113-byte stamp it
sends along with the chunk, for instance to another node. A chunk the batch
has stamped before keeps its bucket position, as for uploads.

Refusals, worded as the reference's: no batch header or a bad address 400; a
batch the node does not hold, or holds but did not buy, 404 (the reference
has no issuer for it); an immutable batch whose bucket is full 402.
"""

from __future__ import annotations

from aiohttp import web

from chunkstore.content import NotNodeBatch
from chunkstore.store.errors import StoreWriteFailed, UnknownBatch
from chunkstore.swarm.constants import ADDRESS_SIZE
from chunkstore.swarm.errors import BucketFull
from chunkstore.swarm.signer import checksum_address
from chunkstore.swarm.stamp import Stamp

from .errors import ApiError, json_response
from .middleware import write_refused
from .params import decode_hex
from .state import state_of
from .uploads import required_batch_id


async def post_envelope(request: web.Request) -> web.Response:
    st = state_of(request)
    batch_id = required_batch_id(request)
    address = decode_hex("path", "address", request.match_info["address"], size=ADDRESS_SIZE)

    def stamp() -> Stamp:
        return st.stamper.stamp(batch_id, [address])[0]

    try:
        signed = await st.run(stamp)
    except (UnknownBatch, NotNodeBatch):
        raise ApiError(404, "batch with id not found") from None
    except BucketFull:
        raise ApiError(402, "batch is overissued") from None
    except StoreWriteFailed as exc:  # the position could not be made durable (disk full)
        raise write_refused(request, exc) from None
    return json_response(
        {
            "issuer": checksum_address(st.stamper.owner),
            "index": signed.index.hex(),
            "timestamp": signed.timestamp.hex(),
            "signature": signed.signature.hex(),
        },
        status=201,
    )


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_post(p + "/envelope/{address}", post_envelope)
