"""The operator's status page: ``/ui/`` and its static files (``api/ui/``).

The page is plain HTML, CSS and JavaScript served from the package: no build step, nothing
fetched from elsewhere (the Content-Security-Policy below forbids it), so it works offline.
It reads the endpoints any client reads (``/health``, ``/readiness``, ``/status``,
``/reservestate``, ``/batches``) plus ``/chunkstore/status`` (``api.routes_daemon``), the
daemon-specific facts. Not at ``/``, whose text clients may read.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

UI_DIR = Path(__file__).resolve().parent / "ui"
# name in the URL -> (file, content type); nothing else under /ui/ is served
FILES = {
    "": ("index.html", "text/html"),
    "status.css": ("status.css", "text/css"),
    "status.js": ("status.js", "text/javascript"),
    "favicon.svg": ("favicon.svg", "image/svg+xml"),  # else the browser asks for /favicon.ico and logs a 404
}
HEADERS = {
    # only this daemon's own files and endpoints: an asset from elsewhere would be refused, offline or not
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


async def ui_file(request: web.Request) -> web.Response:
    entry = FILES.get(request.match_info.get("name", ""))
    if entry is None:
        raise web.HTTPNotFound()
    name, content_type = entry
    body = (UI_DIR / name).read_bytes()
    return web.Response(body=body, content_type=content_type, charset="utf-8", headers=HEADERS)


async def ui_redirect(request: web.Request) -> web.Response:
    raise web.HTTPMovedPermanently("/ui/")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/ui", ui_redirect)
    app.router.add_get("/ui/", ui_file)
    app.router.add_get("/ui/{name}", ui_file)
