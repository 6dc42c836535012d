"""``POST /bzz`` and ``GET``/``HEAD /bzz/{reference}/{path}``: files and collections behind manifests.

Uploads (``pkg/api/bzz.go``, ``dirs.go``), stamped by the node like
``/bytes`` (``api.uploads``):

- a single file: the body, ``name`` query (must not start with "/"; empty:
  the file reference in hex), ``Content-Type`` (trimmed; absent: sniffed from
  the first 512 bytes, as Bee, so the reference matches Bee's);
- a collection, when ``Swarm-Collection: true`` or the type is
  ``multipart/form-data``: a tar (``Content-Type: application/x-tar``, as
  bee-js and swarm-cli send folders) or a multipart body, with
  ``Swarm-Index-Document`` and ``Swarm-Error-Document``; any other type is a
  400 "invalid content-type", a body that is not what its type says a 400
  naming the problem, an entry path with ``..`` or an absolute name a 400.

Answer: 201 ``{"reference"}`` with ``ETag`` (single file), once the files and
the manifest are stored.

Downloads resolve the path in the manifest (``chunkstore.swarm.bzz.resolve``:
the index document for ``/`` and folder paths, a 308 to ``dir/`` for a
folder named without its slash, the error document or 404 for a missing
path) and serve the entry (``api.serve``: ``Range``, ``HEAD``, ``ETag``),
with ``Content-Type`` and ``Content-Disposition`` from its metadata.
``/bzz/{reference}`` without a path redirects to ``/bzz/{reference}/`` as
Bee's router does. A feed manifest resolves to the feed's latest update
through ``state.feed_resolver`` (the feeds work, issue 13, sets it); until
then it is a 501 saying so.
"""

from __future__ import annotations

from collections.abc import Iterable
from email.message import Message

from aiohttp import web

from chunkstore.content import UploadSession, load_manifest
from chunkstore.content.bzz import (
    IncomingFile,
    check_file_name,
    check_index_document,
    write_collection,
    write_single_file,
)
from chunkstore.content.multipart import iter_parts
from chunkstore.content.tarstream import TarStream
from chunkstore.swarm.bzz import NotFound, Redirect, Resolution, Serve, feed_pointer, resolve_path
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.file import join_bytes
from chunkstore.swarm.mantaray import Manifest

from .bodyreader import BodyReader
from .errors import ApiError, ParamError
from .middleware import raw_query
from .params import go_path_unescape, go_query, parse_go_bool
from .routes_bytes import open_joiner, parse_reference
from .serve import FileBody, check_retrieval_headers, serve_file, tree_error
from .state import AppState, FeedTarget, state_of
from .uploads import UploadRequest, act_reference, created, parse_upload, run_upload

TAR = "application/x-tar"
MULTIPART = "multipart/form-data"
COLLECTION_HEADER = "Swarm-Collection"
INDEX_HEADER = "Swarm-Index-Document"
ERROR_HEADER = "Swarm-Error-Document"


def _media_type(value: str) -> tuple[str, dict[str, str]]:
    """Go's ``mime.ParseMediaType`` for what this handler needs: the lower-cased type and its parameters."""
    message = Message()
    message["Content-Type"] = value
    params = {k.lower(): str(v) for k, v in (message.get_params() or [])[1:]}
    return message.get_content_type() if value else "", params


async def post_bzz(request: web.Request) -> web.Response:
    st = state_of(request)
    up = parse_upload(request)
    content_type = request.headers.get("Content-Type", "").strip()
    media, params = _media_type(content_type)
    raw_collection = request.headers.get(COLLECTION_HEADER, "")
    collection = bool(raw_collection) and parse_go_bool("header", COLLECTION_HEADER, raw_collection)
    if collection or media == MULTIPART:
        return await _post_collection(request, st, up, content_type, media, params)
    # Bee reads the name from r.URL.Query(): Go's rules for ";", bad escapes and raw bytes.
    name = go_query(raw_query(request).removeprefix("?")).get("name", [""])[0]
    try:
        check_file_name(name)
    except SwarmError as exc:
        raise ParamError("query", "name", name, str(exc)) from None
    stored = await run_upload(
        request, st, up,
        lambda session, body: write_single_file(
            body, session, name=name, content_type=content_type, level=up.level, encrypt=up.encrypt
        ).reference,
    )
    return created(stored, up, headers={"ETag": f'"{stored.hex()}"'})


async def _post_collection(
    request: web.Request, st: AppState, up: UploadRequest, content_type: str, media: str, params: dict[str, str]
) -> web.Response:
    if not content_type:
        raise ApiError(400, "invalid content-type: a collection upload needs Content-Type application/x-tar "
                            "or multipart/form-data")
    if media not in (TAR, MULTIPART):
        raise ApiError(400, f"invalid content-type: {media!r}; a collection is application/x-tar or multipart/form-data")
    index = request.headers.get(INDEX_HEADER, "")
    error = request.headers.get(ERROR_HEADER, "")
    try:
        check_index_document(index)
    except SwarmError as exc:
        raise ParamError("header", INDEX_HEADER, index, str(exc)) from None
    boundary = params.get("boundary", "")
    if media == MULTIPART and not boundary:
        raise ApiError(400, "invalid content-type: multipart/form-data without a boundary")

    def files(body: BodyReader) -> Iterable[IncomingFile]:
        if media == TAR:
            return (IncomingFile(e.name, None, e) for e in TarStream(body))
        return iter_parts(body, boundary)

    def work(session: UploadSession, body: BodyReader) -> bytes:
        return write_collection(
            files(body), session, level=up.level, encrypt=up.encrypt, mime=st.mime, index_document=index,
            error_document=error,
        ).reference

    return created(await run_upload(request, st, up, work), up)


# ---------------------------------------------------------------- downloads


def _manifest(st: AppState, reference: bytes, root: bytes | None) -> Manifest:
    """The manifest at ``reference``; ``root``: its root chunk when a feed update carries it (not stored there)."""
    if root is None:
        return load_manifest(st.store, reference)

    def get(address: bytes) -> bytes:
        if address == reference[:32]:
            return root
        return st.store.get(address)

    return Manifest.open(reference, load=lambda ref: join_bytes(ref, get))


def _resolve(st: AppState, reference: bytes, path: str) -> tuple[Resolution, dict[str, str]]:
    manifest = load_manifest(st.store, reference)
    headers: dict[str, str] = {}
    pointer = feed_pointer(manifest)
    if pointer is not None:
        resolver = st.feed_resolver
        if resolver is None:
            raise ApiError(501, "this reference is a feed manifest; this node does not resolve feeds yet")
        target: FeedTarget | None = resolver(pointer)
        if target is None:
            raise ApiError(404, "no update found")
        headers.update(target.headers)
        manifest = _manifest(st, target.reference, target.root_chunk)
    return resolve_path(manifest, path), headers


def _with_slash(request: web.Request) -> web.Response:
    """A 308 to the request URL with "/" added to its path, the query kept byte for byte (Go's
    ``u.Path += "/"`` leaves ``RawQuery`` as sent). Not ``HTTPPermanentRedirect``: it runs the Location
    through yarl, which re-encodes the query (``%2F`` to "/", ``a%20b&x`` to ``a+b&x=``)."""
    url = request.rel_url
    location = str(url.with_path(url.path + "/", encoded=False).with_query(None)) + raw_query(request)
    return web.Response(status=308, text="308: Permanent Redirect", headers={"Location": location})


def _path_var(request: web.Request) -> str:
    """The ``{path}`` of ``/bzz/{address}/{path}`` as Bee's router sees it: Go's ``PathUnescape`` of
    the path as sent, so escaped bytes that are no UTF-8 (``%FF``) are those bytes. yarl leaves such
    escapes undecoded; for everything else the two agree."""
    decoded = request.match_info.get("path", "")
    _, _, after = request.raw_path.partition("?")[0].partition("/bzz/")
    _, slash, raw = after.partition("/")
    if not slash or "%" not in raw:
        return decoded
    unescaped = go_path_unescape(raw)
    return decoded if unescaped is None else unescaped


async def get_bzz(request: web.Request) -> web.StreamResponse:
    st = state_of(request)
    reference = parse_reference(request.match_info["address"])
    path = _path_var(request)
    reference = await act_reference(request, st, reference)
    check_retrieval_headers(request)
    try:
        resolution, headers = await st.run(_resolve, st, reference, path)
    except SwarmError as exc:
        raise tree_error(exc) from None
    if isinstance(resolution, Redirect):
        return _with_slash(request)
    if isinstance(resolution, NotFound):
        raise ApiError(404, resolution.message)
    assert isinstance(resolution, Serve)
    entry = resolution.entry
    joiner = await open_joiner(st, entry.reference)
    expose = ["Content-Disposition"]
    if resolution.content_disposition is not None:
        headers["Content-Disposition"] = resolution.content_disposition
    if headers.get("Swarm-Feed-Index"):
        expose.append("Swarm-Feed-Index")
    headers["Access-Control-Expose-Headers"] = ", ".join(expose)
    feed = "Swarm-Feed-Index" in headers
    return await serve_file(
        request,
        FileBody(joiner),
        content_type=resolution.content_type,
        headers=headers,
        etag=None if feed else f'"{entry.reference.hex()}"',
    )


async def bzz_root_redirect(request: web.Request) -> web.Response:
    """``/bzz/{address}``: the reference's plain redirect handler, for every method and whatever the
    address (it is read after the redirect, by ``/bzz/{address}/{path}``)."""
    return _with_slash(request)


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_post(p + "/bzz", post_bzz)
        app.router.add_route("*", p + "/bzz/{address}", bzz_root_redirect)
        app.router.add_get(p + "/bzz/{address}/{path:.*}", get_bzz)
