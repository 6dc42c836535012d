"""Who may change postage batches and the chain state (``POST /batches``, ``DELETE /batches/{id}``,
``POST /chainstate``).

- A client on the loopback interface (127.0.0.0/8, ::1, or ::ffff:127.x) may,
  without a token.
- Any other client needs ``Authorization: Bearer <admin token>``; a missing or
  wrong token is 401.
- When no admin token is configured, non-loopback clients are refused with 403.

The check looks at the TCP peer address only: a reverse proxy on the same host
makes every client look local, so put the token on the proxy's side too, or
bind the daemon to an address the proxy cannot reach.
"""

from __future__ import annotations

import hmac
import ipaddress

from aiohttp import web

from .errors import ApiError


def is_loopback(remote: str | None) -> bool:
    if not remote:
        return False
    try:
        addr = ipaddress.ip_address(remote.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def bearer_token(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def require_admin(request: web.Request, admin_token: str | None) -> None:
    """Raise an ``ApiError`` (401/403) unless the request may change batches or the chain state."""
    if is_loopback(request.remote):
        return
    if not admin_token:
        raise ApiError(403, "batch and chain state changes are allowed from loopback only; no admin token is configured")
    token = bearer_token(request)
    if token is None:
        raise ApiError(401, "admin token required: send Authorization: Bearer <token>", headers={"WWW-Authenticate": "Bearer"})
    # surrogateescape: a token holding undecodable bytes compares unequal instead of failing to encode
    if not hmac.compare_digest(token.encode("utf-8", "surrogateescape"), admin_token.encode("utf-8", "surrogateescape")):
        raise ApiError(401, "admin token is wrong", headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
