"""The Store protocol: what the engine needs from a backend, and the row types it exchanges."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from prme.index.ann import AnnPolicy
from prme.index.owner_index import OwnerIndex
from prme.models.enums import Scope
from prme.models.memory import MemoryNode
from prme.models.receipt import PackIdentity

if TYPE_CHECKING:  # both import this module's record types
    from prme.storage.digest import DigestState
    from prme.storage.pack_rows import RowKind


Tracer = Callable[[str], None]  # receives every SQL statement a store runs


def new_pack_meta(store_schema_version: str) -> dict[str, str]:
    """The ``meta`` rows of a new pack: its schema version, a fresh pack id, the secret its
    attestations are keyed by, and both sequences at zero."""
    return {
        "store_schema_version": store_schema_version,
        "pack_id": str(uuid.uuid4()),
        "secret": secrets.token_hex(32),
        "write_seq": "0",
        "delete_seq": "0",
    }


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One row of the append-only operations log (payload already checksum-verified)."""

    seq: int
    op_id: str
    op_type: str
    user_id: str
    target_id: str | None
    namespace: str | None
    created_at_us: int
    payload: str
    checksum: str


@dataclass(frozen=True, slots=True)
class OpHead:
    """An operation without its payload: what receipt retention decides on."""

    op_id: str
    user_id: str
    target_id: str | None
    created_at_us: int
    checksum: str


@dataclass(frozen=True, slots=True)
class RowScan:
    """What the integrity check reads from the memory tables (:meth:`Store.scan_rows`).

    ``orphans``: ``(message, ref)`` of each row without its counterpart (at most the scan's
    limit per kind), e.g. ``("memory without a vector", node_id)``; ``bad_vectors``: refs of
    vectors that are not the pack's dimension."""

    memories: int
    vectors: int
    lexical_rows: int
    orphans: tuple[tuple[str, str], ...]
    bad_vectors: tuple[str, ...]


StorageCheckName = Literal["sqlite", "postgres"]


@dataclass(frozen=True, slots=True)
class StorageFinding:
    """One problem the backend's own check found (:meth:`Store.check_storage`)."""

    check: StorageCheckName
    ref: str | None
    message: str


class Store(Protocol):
    """A memory pack: memories, vectors, lexical index, entity links and the operations log."""

    @property
    def backend_name(self) -> str: ...

    @property
    def lexical_identity(self) -> dict[str, Any]: ...

    def close(self) -> None: ...

    # identity and secrets
    def pack_identity(self) -> PackIdentity: ...

    def attest(self, payload: Any) -> str: ...

    def verify_attestation(self, payload: Any, attestation: str) -> bool: ...

    def pack_digest(self) -> str: ...

    def embedder_identity(self) -> dict[str, Any] | None: ...

    def bind_embedder(self, identity: dict[str, Any]) -> None: ...

    def owner_write_seq(self, user_id: str) -> int:
        """The owner's content write sequence (0 before the owner's first content write):
        bumped in the transaction of every content write to the owner's memories, and
        consistent with :meth:`read_snapshot` when read inside one."""
        ...

    def pack_settings(self) -> dict[str, Any] | None:
        """The retrieval settings recorded with the pack (services/pack_settings.py), or None."""
        ...

    def record_settings(self, settings: dict[str, Any], *, bump: bool) -> None:
        """Record the pack's settings; ``bump``: a change of a pack in use (a content write
        moving the write sequence), not the recording that creates the pack."""
        ...

    # content writes (each bumps the pack's and the owners' content write sequences)
    def insert_memories(
        self,
        nodes: Sequence[MemoryNode],
        vectors: npt.NDArray[np.float32],
        entities: Sequence[Sequence[str]],
    ) -> None: ...

    def delete_memory(self, user_id: str, node_id: str) -> bool: ...

    def supersede_memory(self, user_id: str, node_id: str, ended_at_us: int) -> bool:
        """End a current memory (``valid_to``, lifecycle ``superseded``); False when it is
        missing, another owner's or already superseded."""
        ...

    def current_contents(self, user_id: str, scope: Scope) -> list[tuple[str, str]]: ...

    # memory reads
    def get_memory(self, user_id: str, node_id: str) -> MemoryNode | None: ...

    def list_memories(
        self, user_id: str, scopes: Sequence[Scope] | None, limit: int, after_id: str | None
    ) -> list[MemoryNode]: ...

    def get_memories_by_rowid(self, rowids: Sequence[int]) -> dict[int, MemoryNode]: ...

    # candidate generation (owner and scope filtered)
    def read_snapshot(self, owner: str | None = None) -> AbstractContextManager[PackIdentity]:
        """A consistent read transaction; yields the pack identity it sees. ``owner``: whose
        sequences (``owner_write_seq``, ``owner_index``) the block will read (a store that
        reads them over the network reads them with the pack's, in one round trip)."""
        ...

    def pinned(self) -> AbstractContextManager[None]:
        """This thread's store calls inside the block share one connection (a pooled store
        checks a connection out once, not once per call)."""
        ...

    def configure_vector_index(self, policy: AnnPolicy | None) -> None:
        """Build owner indexes that search vectors approximately past ``policy``'s size
        (None: exact scans only); indexes cached under another policy are dropped."""
        ...

    def owner_index(self, user_id: str) -> OwnerIndex | None: ...

    def wait_for_index_saves(self) -> None:
        """Return once the owner-index saves started so far have finished."""
        ...

    def lexical_search(
        self, user_id: str, scopes: Sequence[Scope] | None, terms: Sequence[str], k: int
    ) -> list[tuple[int, float]]: ...

    # operations log (append-only; appends never bump the write sequence)
    def append_op(
        self,
        *,
        op_id: str,
        op_type: str,
        user_id: str,
        target_id: str | None,
        namespace: str | None,
        created_at_us: int,
        payload: str,
    ) -> bool: ...

    def get_op(self, op_id: str) -> OpRecord | None: ...

    def find_ops(
        self, op_type: str, user_id: str, target_id: str | None = None
    ) -> list[OpRecord]: ...

    def op_checksums(
        self,
        op_type: str,
        user_id: str,
        target_ids: Sequence[str] | None = None,
        *,
        limit: int | None = None,
    ) -> dict[str, str]:
        """``{target_id: checksum}`` of the owner's operations of this type (those among
        ``target_ids`` when given), ordered by target id: the stored SHA-256 of each payload,
        read from an index without the payloads."""
        ...

    def iter_ops(
        self,
        op_type: str,
        user_id: str,
        *,
        namespace: str | None = None,
        after_target: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        order_by_target: bool = False,
        before: tuple[int, int] | None = None,
    ) -> Iterator[OpRecord]:
        """The owner's operations of one type; ``before`` = ``(created_at, seq)`` of the last
        operation already seen keeps only older ones (newest-first paging in SQL)."""
        ...

    def serialized(self, key: str) -> AbstractContextManager[None]: ...

    # receipt retention (services/retention.py): the one deliberate deletion from the log
    def op_heads(self, op_type: str, *, created_before_us: int) -> list[OpHead]:
        """Every operation of this type (all owners) saved before ``created_before_us``, by
        sequence, without payloads."""
        ...

    def iter_payloads(self, *, exclude_op_types: Sequence[str]) -> Iterator[str]:
        """Every other operation's payload (streamed, by sequence)."""
        ...

    def delete_ops(self, op_type: str, op_ids: Sequence[str]) -> int:
        """Delete these operations of ``op_type`` (retrieval receipts only) inside the caller's
        ``serialized`` transaction, through the backend's guarded path; returns the count.

        Raises:
            InvalidInputError: ``op_type`` is not ``retrieval_receipt``.
            IntegrityError: the append-only guard is missing (the log was tampered with).
        """
        ...

    # whole-pack rows: export, import (storage/transfer.py) and the integrity check
    def meta_values(self) -> dict[str, str]:
        """Every pack metadata key and value (identity, secret, sequences, embedder...)."""
        ...

    def owner_sequences(self) -> dict[str, int]:
        """Every owner's content write sequence, by owner."""
        ...

    def iter_rows(self, kind: RowKind) -> Iterator[tuple[Any, ...]]:
        """Every stored row of ``kind`` in export order, in the neutral form of
        :mod:`prme.storage.pack_rows` (streamed; inside the caller's snapshot if any)."""
        ...

    def import_meta(
        self, meta: dict[str, str], embedder: str | None, owners: dict[str, int]
    ) -> None:
        """Set an empty pack's identity (``pack_id``, ``secret``, ``write_seq``,
        ``delete_seq``), its embedder (canonical JSON) and the owners' sequences (inside the
        caller's ``serialized("content")`` transaction)."""
        ...

    def import_rows(self, kind: RowKind, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert rows of ``kind`` as :meth:`iter_rows` yields them (same transaction)."""
        ...

    def finish_import(self) -> None:
        """Rebuild derived state from the imported rows: the kept digest state, and the
        backend's own (lexical statistics, sequences); same transaction."""
        ...

    def reload(self) -> None:
        """Re-read the pack identity and secret and drop caches (after an import commits)."""
        ...

    def kept_digest_state(self) -> DigestState | None:
        """The digest state kept with the writes (None: a read-only pack from before it)."""
        ...

    def recompute_digest_state(self) -> DigestState:
        """The digest state recomputed from every stored memory."""
        ...

    def scan_rows(self, dimension: int | None, limit: int) -> RowScan:
        """Count the memory tables' rows and find orphans and vectors not of ``dimension``
        (None: not checked), at most ``limit`` of each kind."""
        ...

    def check_storage(self) -> tuple[list[StorageFinding], list[str]]:
        """The backend's own consistency checks (problems, and checks it had to skip)."""
        ...
