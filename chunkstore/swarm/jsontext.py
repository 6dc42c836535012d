"""JSON from outside (request bodies, manifest metadata) parsed without letting its nesting crash the caller.

Python's parser recurses once per nested array or object and raises
``RecursionError`` a thousand levels down: a few kilobytes of ``[`` are
enough. The reference node's Go decoder refuses such input as an ordinary
decode error (its bodies and metadata never nest), so here it is an ordinary
``ValueError`` too, which every caller already turns into its 400 or its
``InvalidManifest``.
"""

from __future__ import annotations

import json
from typing import Any


def parse_json(raw: bytes | bytearray | str) -> Any:
    """``json.loads(raw)``; raises ``ValueError`` (``UnicodeDecodeError`` is one) for bad or too deeply nested JSON."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
