"""Content through the store: node-owned stamps, upload sessions, files and manifests written and read.

Holds ``NodeStamper`` (stamps for the batches the node owns, positions kept
durably by ``chunkstore.store.issuers``), ``UploadSession`` (the one path
every chunk of an upload takes: stamp, store in groups, count, tell the
observers; the root last), ``track_upload`` (the tags and pins of an
upload, the one hook every upload path calls; the session calls it itself), and the file and collection helpers the
``/bytes`` and ``/bzz`` endpoints are built on. The protocol itself (splitter,
joiner, encryption, erasure coding, mantaray, bzz layouts) is
``chunkstore.swarm``; this package only connects it to a store.

May import chunkstore.store and chunkstore.swarm; nothing above.
"""

from .errors import ContentError, InvalidCollection, NotNodeBatch, SessionClosed, UploadFailed
from .files import load_manifest, open_file, write_bytes, write_file
from .options import UploadOptions
from .session import UploadCounts, UploadObserver, UploadSession
from .stamper import NodeStamper
from .tracking import UploadTracker, track_upload

__all__ = [
    "ContentError",
    "InvalidCollection",
    "NodeStamper",
    "NotNodeBatch",
    "SessionClosed",
    "UploadCounts",
    "UploadFailed",
    "UploadObserver",
    "UploadOptions",
    "UploadSession",
    "UploadTracker",
    "load_manifest",
    "open_file",
    "track_upload",
    "write_bytes",
    "write_file",
]
