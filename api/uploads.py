"""What every content upload shares: Bee's upload headers, the worker that runs it, and its errors.

Headers (``pkg/api/bytes.go``, ``bzz.go``; booleans as Go's ``ParseBool``):

- ``Swarm-Postage-Batch-Id`` (required): a batch the node owns; the node
  stamps every chunk (``NodeStamper``). Someone else's batch is a 400 (the
  node cannot sign for it), an unknown one 404 "batch with id not found";
- ``Swarm-Encrypt``: Bee's chunk encryption, 64-byte references;
- ``Swarm-Redundancy-Level`` 0..4, default MEDIUM (1) as Bee's uploads;
- ``Swarm-Tag``, ``Swarm-Pin``, ``Swarm-Deferred-Upload`` (default true):
  the upload counts under the named tag (404 "tag not found" for an unknown
  one), or, as on the reference node, under a new tag when none is named
  unless ``Swarm-Deferred-Upload: false`` and no pin; the answer's
  ``Swarm-Tag`` header names it. With ``Swarm-Pin: true`` the upload's chunks
  are pinned under the reference answered. The session does both
  (``chunkstore.content.track_upload``); a node without a network stores the
  chunks either way;
- ``Swarm-Act``: the reference answered is protected by the node's ACT
  (``chunkstore.content.act``): encrypted with the access key of a new
  history, or of the one ``Swarm-Act-History-Address`` names, whose address
  the answer's ``Swarm-Act-History-Address`` header gives (``pkg/api/bytes.go``,
  ``accesscontrol.go: actEncryptionHandler``). Downloads naming
  ``Swarm-Act-Publisher`` and ``Swarm-Act-History-Address`` have their
  reference decrypted first (``actDecryptionHandler``, ``act_reference``).

The body is read piece by piece (``BodyReader``) by a worker thread that
splits, stamps and stores it through one ``UploadSession``; the reference is
answered only after the whole tree is durable (see
``chunkstore.content.session`` for what a failed upload leaves).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from aiohttp import web

from chunkstore.content import UploadOptions, UploadSession
from chunkstore.content.act import ActController, ActNotFound, ActStorage, InvalidTimestamp
from chunkstore.content.errors import ContentError, NotNodeBatch
from chunkstore.reserve import OutOfRadius
from chunkstore.store.errors import StoreWriteFailed, UnknownBatch, UnknownTag
from chunkstore.swarm.act import InvalidActPublicKey
from chunkstore.swarm.constants import BATCH_ID_SIZE
from chunkstore.swarm.errors import BucketFull, SwarmError
from chunkstore.swarm.pss import PssError, parse_public_key
from chunkstore.swarm.redundancy.level import DEFAULT_DOWNLOAD_LEVEL, DEFAULT_UPLOAD_LEVEL, Level

from .bodyreader import BodyReader
from .errors import ApiError, ParamError, json_response, nearest, status_for
from .middleware import write_refused
from .params import decode_hex, parse_go_bool, parse_int, parse_uint
from .state import AppState

T = TypeVar("T")

log = logging.getLogger(__name__)

BATCH_HEADER = "Swarm-Postage-Batch-Id"
STAMP_HEADER = "Swarm-Postage-Stamp"
TAG_HEADER = "Swarm-Tag"
PIN_HEADER = "Swarm-Pin"
DEFERRED_HEADER = "Swarm-Deferred-Upload"
ENCRYPT_HEADER = "Swarm-Encrypt"
LEVEL_HEADER = "Swarm-Redundancy-Level"
ACT_HEADER = "Swarm-Act"
ACT_PUBLISHER_HEADER = "Swarm-Act-Publisher"
ACT_HISTORY_HEADER = "Swarm-Act-History-Address"
ACT_TIMESTAMP_HEADER = "Swarm-Act-Timestamp"
CACHE_HEADER = "Swarm-Cache"


@dataclass
class CountedTag:
    """The tag an upload is counted under, once ``run_upload`` has it (a new one when none was named)."""

    uid: int = 0


@dataclass
class ActAnswer:
    """The history an ACT upload's reference was protected in, once ``run_upload`` has it."""

    history: bytes = b""


@dataclass(frozen=True)
class UploadRequest:
    batch_id: bytes
    encrypt: bool
    level: Level
    options: UploadOptions
    tag: CountedTag = field(default_factory=CountedTag)
    act: bool = False
    act_history: bytes | None = None  # Swarm-Act-History-Address: protect with this history's newest ACT
    act_answer: ActAnswer = field(default_factory=ActAnswer)


def bool_header(request: web.Request, name: str) -> bool | None:
    value = request.headers.get(name)
    if value is None or value == "":
        return None
    return parse_go_bool("header", name, value)


def redundancy_level(request: web.Request, default: Level) -> Level:
    raw = request.headers.get(LEVEL_HEADER)
    if raw is None or raw == "":
        return default
    value = parse_uint("header", LEVEL_HEADER, raw, bits=8)
    if value > Level.PARANOID:
        raise ParamError("header", LEVEL_HEADER, raw, f"want a redundancy level in 0..{int(Level.PARANOID)}")
    return Level(value)


def required_batch_id(request: web.Request, hint: str = "") -> bytes:
    """The ``Swarm-Postage-Batch-Id`` a node-stamped call must carry, or the reference's 400 for its absence."""
    raw_batch = request.headers.get(BATCH_HEADER, "")
    if not raw_batch:
        raise ApiError(400, "invalid header params",
                       [{"field": BATCH_HEADER.lower(), "error": f"want required: a batch id of the node{hint}"}])
    return decode_hex("header", BATCH_HEADER.lower(), raw_batch, size=BATCH_ID_SIZE)


def check_act_headers(request: web.Request, *, download: bool) -> None:
    """The ACT headers the reference reads on every upload and download (``mapStructure``, whether or not
    it does access control for the request): a value it cannot read is its 400. The history address is
    hex (``swarm.Address``); a download's timestamp an int64 and its publisher a secp256k1 public key
    (``actDecryptionHandler``, ``pss.ParseRecipient``), and its ``Swarm-Cache`` and
    ``Swarm-Redundancy-Level`` as that handler reads them (``/chunks`` has no other reader of them)."""
    history = request.headers.get(ACT_HISTORY_HEADER, "")
    if history:
        decode_hex("header", ACT_HISTORY_HEADER, history)
    if not download:
        return
    # actDecryptionHandler also reads these two (for the decrypted reference's fetch): a bool, a level 0..4
    bool_header(request, CACHE_HEADER)
    redundancy_level(request, DEFAULT_UPLOAD_LEVEL)
    timestamp = request.headers.get(ACT_TIMESTAMP_HEADER, "")
    if timestamp:
        parse_int("header", ACT_TIMESTAMP_HEADER, timestamp)
    publisher = request.headers.get(ACT_PUBLISHER_HEADER, "")
    if publisher:
        try:
            parse_public_key(decode_hex("header", ACT_PUBLISHER_HEADER, publisher))
        except PssError as exc:
            raise ParamError("header", ACT_PUBLISHER_HEADER, publisher, str(exc)) from None


def act_controller(st: AppState) -> ActController:
    """The ACT controller with the node's key as its session key (the publisher, as on the reference)."""
    return ActController(st.signer.secret)


def _history_header(request: web.Request) -> bytes | None:
    raw = request.headers.get(ACT_HISTORY_HEADER, "")
    return decode_hex("header", ACT_HISTORY_HEADER, raw) if raw else None


@contextmanager
def _act_failures(action: str, reference: bytes) -> Iterator[None]:
    """The reference's answers to a failed ACT ``action`` (upload or download): 404 for no ACT or history
    entry, 400 for a bad timestamp or public key, 500 "act <action> failed" for anything else."""
    try:
        yield
    except ActNotFound:
        raise ApiError(404, "act or history entry not found") from None
    except InvalidTimestamp:
        raise ApiError(400, "invalid timestamp") from None
    except InvalidActPublicKey:
        raise ApiError(400, "invalid public key") from None
    except SwarmError as exc:
        log.debug("act %s of %s failed: %s", action, reference.hex(), exc)
        raise ApiError(500, f"act {action} failed") from None


async def act_reference(request: web.Request, st: AppState, reference: bytes) -> bytes:
    """The reference a download serves: ``reference`` decrypted when the request names an ACT publisher and
    history address (``actDecryptionHandler`` on ``GET``/``HEAD`` of ``/bytes``, ``/chunks`` and ``/bzz``),
    as it is otherwise (either header alone: served undecrypted, as there).

    The history's ACT at ``Swarm-Act-Timestamp`` (default now) must hold an entry for the node's key and
    the publisher's: else 404 "act or history entry not found", as the reference answers a wrong
    publisher or a grantee that was never added."""
    check_act_headers(request, download=True)
    publisher_hex = request.headers.get(ACT_PUBLISHER_HEADER, "")
    history = _history_header(request)
    if not publisher_hex or history is None:
        return reference
    publisher = parse_public_key(bytes.fromhex(publisher_hex))
    raw_time = request.headers.get(ACT_TIMESTAMP_HEADER, "")
    timestamp = parse_int("header", ACT_TIMESTAMP_HEADER, raw_time) if raw_time else int(time.time())
    controller = act_controller(st)
    storage = ActStorage(get=st.store.get, level=redundancy_level(request, DEFAULT_DOWNLOAD_LEVEL))
    with _act_failures("download", reference):
        return await st.run(controller.download, storage, reference, publisher, history, timestamp)


def act_upload_header(request: web.Request) -> tuple[bool, bytes | None]:
    """``Swarm-Act`` read as the reference reads it (Go's ``ParseBool``: 400 otherwise) and the history
    address an ACT upload names (hex; also read, and refused when it is not hex, without ``Swarm-Act``)."""
    check_act_headers(request, download=False)
    return bool(bool_header(request, ACT_HEADER)), _history_header(request)


def act_protect(st: AppState, session: UploadSession, reference: bytes, history: bytes | None) -> tuple[bytes, bytes]:
    """``(encrypted reference, history reference)`` of an ACT upload, its ACT and history written through
    ``session`` (blocking). The reference's errors: 404 for a history with no entry, 500 otherwise."""
    storage = ActStorage(get=st.store.get, put=session.put)
    with _act_failures("upload", reference):
        return act_controller(st).upload(storage, reference, history)


def parse_upload(request: web.Request, *, encrypt_header: bool = True) -> UploadRequest:
    """The upload headers of a ``/bytes``, ``/bzz`` (or feed) upload, or a 4xx naming the bad one.

    ``encrypt_header=False``: ``Swarm-Encrypt`` is not read at all (a feed manifest, as the reference's
    ``feedPostHandler`` has no such header), so no value of it is refused."""
    hint = (f"; '{STAMP_HEADER}' (a pre-signed stamp) covers one chunk only: use POST /chunks for that"
            if request.headers.get(STAMP_HEADER) else "")
    batch_id = required_batch_id(request, hint)
    tag_raw = request.headers.get(TAG_HEADER, "")
    tag = parse_uint("header", TAG_HEADER, tag_raw) if tag_raw else 0
    act, act_history = act_upload_header(request)
    deferred = bool_header(request, DEFERRED_HEADER)
    return UploadRequest(
        act=act,
        act_history=act_history,
        batch_id=batch_id,
        encrypt=encrypt_header and bool(bool_header(request, ENCRYPT_HEADER)),
        level=redundancy_level(request, DEFAULT_UPLOAD_LEVEL),
        options=UploadOptions(tag=tag, pin=bool(bool_header(request, PIN_HEADER)),
                              deferred=True if deferred is None else deferred),
    )


# The reference node's wording for each upload refusal (nearest class in the error's MRO), then the reason.
_UPLOAD_ERROR_PREFIX: dict[type[BaseException], str] = {
    UnknownBatch: "batch with id not found",
    NotNodeBatch: "batch not usable by this node",
    BucketFull: "batch is overissued",
    OutOfRadius: "chunk is outside the storage radius",
    UnknownTag: "tag not found",
}


def upload_error(request: web.Request, exc: SwarmError) -> ApiError:
    """A refused upload as a JSON error: the reference's words where it has some, the library's reason after."""
    if isinstance(exc, StoreWriteFailed):
        return write_refused(request, exc)
    prefix = nearest(_UPLOAD_ERROR_PREFIX, exc)
    status = 422 if isinstance(exc, OutOfRadius) else status_for(exc)
    if isinstance(exc, ContentError):
        status = 400
    message = str(exc) or type(exc).__name__
    return ApiError(status, f"{prefix}: {message}" if prefix else message)


Work = Callable[[UploadSession, BodyReader], bytes]


async def run_upload(request: web.Request, st: AppState, up: UploadRequest, work: Work) -> bytes:
    """Run ``work(session, body)`` in the thread pool, finish the session with the reference it returns."""
    body = BodyReader(request.content, asyncio.get_running_loop())

    def job() -> bytes:
        with st.upload_session(up.batch_id, up.options) as session:
            up.tag.uid = session.tracker.tag
            reference = work(session, body)
            answered = reference
            if up.act:
                answered, up.act_answer.history = act_protect(st, session, reference, up.act_history)
            session.finish(reference)  # pins and tags follow the content's own reference, as Bee's Done
        return answered

    try:
        return await in_upload_thread(st, job)
    except SwarmError as exc:
        raise upload_error(request, exc) from None
    except TimeoutError:
        raise ApiError(408, "request body stalled: no data for too long") from None


async def in_upload_thread(st: AppState, fn: Callable[[], T]) -> T:
    """Run ``fn`` (an upload, or other work that may take long: a re-upload, mining a PSS chunk) in a thread
    of the upload pool, never the store calls' pool; 503 when ``--max-uploads`` are running already."""
    if st.uploads_running >= st.config.max_uploads:  # checked and counted on the event loop: no race
        raise ApiError(503, f"too many uploads in progress ({st.uploads_running}, --max-uploads); try again later",
                       headers={"Retry-After": "1"})  # uploads end in seconds: a client's retry may come soon
    st.uploads_running += 1
    try:
        return await asyncio.get_running_loop().run_in_executor(st.upload_executor, fn)
    finally:
        st.uploads_running -= 1


def created(reference: bytes, up: UploadRequest, headers: dict[str, str] | None = None) -> web.Response:
    """Bee's 201 ``{"reference"}`` answer of an upload."""
    resp = json_response({"reference": reference.hex()}, status=201, headers=headers)
    uid = up.tag.uid  # the tag counted under: none for a direct upload, whatever it named
    if uid:
        resp.headers[TAG_HEADER] = str(uid)
    resp.headers["Access-Control-Expose-Headers"] = TAG_HEADER
    if up.act:
        resp.headers[ACT_HISTORY_HEADER] = up.act_answer.history.hex()
        resp.headers.add("Access-Control-Expose-Headers", ACT_HISTORY_HEADER)
    return resp
