"""Access control (ACT) over the store: the ACT, its history and grantee lists as the reference keeps them.

Follows ``pkg/accesscontrol`` (``controller.go``, ``access.go``,
``history.go``, ``grantee.go``, ``kvs/kvs.go``); the formats are in
``chunkstore.swarm.act``. The node's key is the session key: it is the
publisher of what it protects, and a grantee's node opens what it was
granted with its own key and the publisher's public key.

Everything is read and written through an ``ActStorage``: files written
with Bee's splitter at redundancy NONE (the reference's ACT load-saver),
the grantee list encrypted, everything else plain; what it wrote in this
operation is read back from memory (the session may not have stored it
yet). Loads go to the store's getter through the joiner.

Errors: ``ActNotFound`` (the reference's ``accesscontrol.ErrNotFound``: no
entry for the key in the ACT, no history entry), ``InvalidTimestamp``,
``NoGranteeFound`` (a revoke from an empty list), ``NothingToSave`` (an
ACT left unchanged, which the reference refuses to store); a missing
chunk is the joiner's ``ChunkMissing``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import coincurve

from chunkstore.swarm import act as actfmt
from chunkstore.swarm.encryption import KEY_SIZE
from chunkstore.swarm.file import Splitter, join_bytes
from chunkstore.swarm.mantaray import Manifest
from chunkstore.swarm.redundancy.level import DEFAULT_DOWNLOAD_LEVEL, Level

from .errors import ContentError

__all__ = [
    "ENCRYPTED_GL_REF_KEY",
    "ActController",
    "ActNotFound",
    "ActStorage",
    "History",
    "InvalidTimestamp",
    "Kvs",
    "NoGranteeFound",
    "NothingToSave",
]

ENCRYPTED_GL_REF_KEY = "encryptedglref"  # the history entry's metadata of a grantee list update

Getter = Callable[[bytes], bytes]
Put = Callable[[bytes, bytes], None]
Clock = Callable[[], int]


class ActNotFound(ContentError):
    """No ACT entry for the key, or no history entry (``accesscontrol.ErrNotFound``)."""


class InvalidTimestamp(ContentError):
    """A history lookup at a timestamp that is not positive (``ErrInvalidTimestamp``)."""


class NoGranteeFound(ContentError):
    """A revoke from an empty grantee list (``ErrNoGranteeFound``)."""


class NothingToSave(ContentError):
    """An ACT with no new entry cannot be saved (``kvs.ErrNothingToSave``)."""


@dataclass
class ActStorage:
    """The load-saver ACT structures go through: ``get`` reads chunks, ``put`` (None: read only) stores them."""

    get: Getter
    put: Put | None = None
    level: Level | int = DEFAULT_DOWNLOAD_LEVEL
    written: dict[bytes, bytes] = field(default_factory=dict)

    def _get(self, address: bytes) -> bytes:
        data = self.written.get(bytes(address))
        return data if data is not None else self.get(address)

    def load(self, reference: bytes) -> bytes:
        return join_bytes(bytes(reference), self._get, replica_level=self.level)

    def save(self, data: bytes, *, encrypt: bool = False) -> bytes:
        if self.put is None:
            raise ContentError("this ACT storage is read only")
        put = self.put

        def sink(address: bytes, chunk: bytes) -> None:
            self.written[bytes(address)] = bytes(chunk)
            put(address, chunk)

        splitter = Splitter(sink, level=Level.NONE, encrypt=encrypt)
        splitter.write(data)
        return splitter.finish()


class Kvs:
    """The ACT: lookup key -> encrypted access key, a simple manifest when stored (``kvs.go``)."""

    def __init__(self, storage: ActStorage, entries: Mapping[bytes, bytes] | None = None) -> None:
        self.storage = storage
        self.entries = dict(entries or {})
        self.puts = 0

    @classmethod
    def open(cls, storage: ActStorage, reference: bytes) -> Kvs:
        return cls(storage, actfmt.decode_kvs(storage.load(reference)))

    def get(self, key: bytes) -> bytes:
        value = self.entries.get(bytes(key))
        if value is None:
            raise ActNotFound("kvs entry not found")
        return value

    def put(self, key: bytes, value: bytes) -> None:
        self.entries[bytes(key)] = bytes(value)
        self.puts += 1

    def save(self) -> bytes:
        if self.puts == 0:
            raise NothingToSave("nothing to save")
        reference = self.storage.save(actfmt.encode_kvs(self.entries))
        self.puts = 0
        return reference


class History:
    """The ACT's versions by time, a plain mantaray manifest (``history.go``)."""

    def __init__(self, storage: ActStorage, reference: bytes | None = None) -> None:
        self.storage = storage
        if reference is None:
            self.manifest = Manifest.new(save=storage.save, load=storage.load)
        else:
            self.manifest = Manifest.open(bytes(reference), load=storage.load, save=storage.save)

    def add(self, act_reference: bytes, timestamp: int, metadata: Mapping[str, str] | None = None) -> None:
        self.manifest.add(actfmt.history_path(timestamp), act_reference, metadata)

    def lookup(self, timestamp: int) -> tuple[bytes, dict[str, str]]:
        """The newest entry made at or before ``timestamp``; the oldest when all are later (as the reference)."""
        if timestamp <= 0:
            raise InvalidTimestamp("invalid timestamp")
        wanted = actfmt.MAX_INT64 - timestamp
        after = None
        for path, node in self.manifest.walk():
            if not (node.is_value and node.entry):
                continue
            after = node
            reversed_time = actfmt.history_path_time(path)
            if reversed_time != 0 and wanted <= reversed_time:
                return bytes(node.entry), dict(node.metadata or {})
        if after is None:
            raise ActNotFound("access control: not found")
        return bytes(after.entry), dict(after.metadata or {})

    def store(self) -> bytes:
        return self.manifest.store()


def _clock() -> int:
    return int(time.time())


class ActController:
    """The reference's ``ControllerStruct`` with the node's key as its session key."""

    def __init__(
        self,
        private_key: bytes,
        *,
        clock: Clock | None = None,
        random_key: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self.private_key = bytes(private_key)
        self.public_key = coincurve.PrivateKey(self.private_key).public_key
        # looked up at each call, so a test can move the module's clock for a whole daemon
        self.clock = clock if clock is not None else (lambda: _clock())
        self.random_key = random_key

    # -------------------------------------------------- access.go

    def _access_key(self, act: Kvs, publisher: coincurve.PublicKey) -> bytes:
        lookup, decryption = actfmt.access_keys(self.private_key, publisher)
        return actfmt.transcrypt_reference(decryption, act.get(lookup))

    def add_grantee(self, act: Kvs, publisher: coincurve.PublicKey, grantee: coincurve.PublicKey) -> None:
        if actfmt.uncompressed(publisher) == actfmt.uncompressed(grantee):
            access_key = self.random_key(KEY_SIZE)
        else:
            access_key = self._access_key(act, publisher)
        lookup, decryption = actfmt.access_keys(self.private_key, grantee)
        act.put(lookup, actfmt.transcrypt_reference(decryption, access_key))

    def encrypt_ref(self, act: Kvs, publisher: coincurve.PublicKey, reference: bytes) -> bytes:
        return actfmt.transcrypt_reference(self._access_key(act, publisher), reference)

    def decrypt_ref(self, act: Kvs, publisher: coincurve.PublicKey, encrypted: bytes) -> bytes:
        return actfmt.transcrypt_reference(self._access_key(act, publisher), encrypted)

    # -------------------------------------------------- controller.go

    def _new_act(self, storage: ActStorage, publisher: coincurve.PublicKey) -> Kvs:
        act = Kvs(storage)
        self.add_grantee(act, publisher, publisher)
        return act

    def _history_and_act(
        self, storage: ActStorage, history_ref: bytes | None, publisher: coincurve.PublicKey, timestamp: int
    ) -> tuple[History, Kvs]:
        if history_ref is None or not any(history_ref):
            return History(storage), self._new_act(storage, publisher)
        history = History(storage, history_ref)
        act_ref, _ = history.lookup(timestamp)
        return history, Kvs.open(storage, act_ref)

    @staticmethod
    def _save(history: History, act: Kvs, timestamp: int, metadata: Mapping[str, str] | None) -> tuple[bytes, bytes]:
        act_ref = act.save()
        history.add(act_ref, timestamp, metadata)
        return history.store(), act_ref

    def download(
        self,
        storage: ActStorage,
        encrypted_ref: bytes,
        publisher: coincurve.PublicKey,
        history_ref: bytes,
        timestamp: int,
    ) -> bytes:
        """The reference ``encrypted_ref`` stands for (``DownloadHandler``)."""
        _, act = self._history_and_act(storage, history_ref, publisher, timestamp)
        return self.decrypt_ref(act, publisher, encrypted_ref)

    def upload(self, storage: ActStorage, reference: bytes, history_ref: bytes | None) -> tuple[bytes, bytes]:
        """``(encrypted reference, history reference)`` of ``reference`` protected by the node
        (``UploadHandler``): a new history with a new ACT when none is named."""
        now = self.clock()
        history, act = self._history_and_act(storage, history_ref, self.public_key, now)
        new_history = history_ref
        if history_ref is None or not any(history_ref):
            new_history, _ = self._save(history, act, now, None)
        assert new_history is not None
        return self.encrypt_ref(act, self.public_key, reference), bytes(new_history)

    def _transcrypt_for_publisher(self, reference: bytes) -> bytes:
        (key,) = actfmt.session_keys(self.private_key, self.public_key, [actfmt.ACCESS_KEY_NONCE])
        return actfmt.transcrypt_reference(key, reference)

    def _grantee_list(self, storage: ActStorage, encrypted_gl_ref: bytes | None) -> list[coincurve.PublicKey]:
        if encrypted_gl_ref is None or not any(encrypted_gl_ref):
            return []
        return actfmt.decode_grantees(storage.load(self._transcrypt_for_publisher(encrypted_gl_ref)))

    def grantees(self, storage: ActStorage, encrypted_gl_ref: bytes) -> list[coincurve.PublicKey]:
        """The grantee list the publisher's encrypted reference points to (``Get``)."""
        return self._grantee_list(storage, encrypted_gl_ref)

    def update(
        self,
        storage: ActStorage,
        encrypted_gl_ref: bytes | None,
        history_ref: bytes | None,
        add: Sequence[coincurve.PublicKey],
        remove: Sequence[coincurve.PublicKey],
    ) -> tuple[bytes, bytes]:
        """Grant ``add``, revoke ``remove``: ``(encrypted grantee list reference, history reference)``
        (``UpdateHandler``). A revoke makes a new ACT with a new access key for those who stay; content
        protected before stays readable with the older history entries, as on the reference."""
        publisher = self.public_key
        now = self.clock()
        history, act = self._history_and_act(storage, history_ref, publisher, now)
        grantees = self._grantee_list(storage, encrypted_gl_ref)
        if add:
            grantees = actfmt.add_grantees(grantees, add)
        to_add: Sequence[coincurve.PublicKey] = add
        if remove:
            if not grantees:
                raise NoGranteeFound("no grantee found")
            grantees = actfmt.remove_grantees(grantees, remove)
            if history_ref is not None and any(history_ref):
                act = self._new_act(storage, publisher)
            to_add = grantees
        for grantee in to_add:
            self.add_grantee(act, publisher, grantee)
        gl_ref = storage.save(actfmt.encode_grantees(grantees), encrypt=True)
        encrypted_gl = self._transcrypt_for_publisher(gl_ref)
        if history_ref is not None and any(history_ref):
            history = History(storage, history_ref)
        new_history, _ = self._save(history, act, now, {ENCRYPTED_GL_REF_KEY: encrypted_gl.hex()})
        return encrypted_gl, new_history
