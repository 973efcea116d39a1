"""MemoryClient: the synchronous public API over one memory pack (and AsyncMemoryClient).

This module holds opening, memories, pack operations, retrieval and relevance judgments; the
learning gates, ranking profiles and the activation pointer are in :mod:`prme.client.learning`
(:class:`~prme.client.learning.LearningMethods`, which MemoryClient inherits)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from prme.client.learning import LearningMethods
from prme.config import PRMEConfig
from prme.embed.base import Embedder
from prme.embed.registry import make_embedder, provider_names
from prme.engine import Engine, utc_now
from prme.errors import InvalidInputError
from prme.models.enums import NodeType, RetrievalMode, SourceType
from prme.models.memory import MemoryRecord, StoreReceipt
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import RelevanceRecord, RelevanceSubmission
from prme.models.request import PARAMETERS, RetrievalRequest
from prme.models.retention import ReceiptPruneSummary
from prme.models.retrieval import OwnerIndexReport, RetrievalResponse
from prme.models.scope import ScopeInput
from prme.models.scoring import RankingMultipliers, ScoringWeights
from prme.services import integrity as integrity_service
from prme.services import memories, owner_index, pack_settings, receipts, retention, retrieval
from prme.services import relevance as relevance_service
from prme.services.integrity import IntegrityReport
from prme.storage import transfer
from prme.storage.base import Store
from prme.storage.registry import StoreOptions, backend_name, make_store
from prme.storage.sqlite import Tracer
from prme.storage.transfer import TransferSummary


class MemoryClient(LearningMethods):
    """A memory pack opened for use. ``MemoryClient("./memories")`` creates it if needed.

    Creating and opening (``create``):

    - ``None`` (the default): open the pack, creating a missing one as before; a pack created
      this way records no settings and follows the configuration every time it is opened.
    - ``True``: create the pack if missing and record its retrieval settings (the
      configuration's ``embedding``, ``scoring`` and ``retrieval`` sections, e.g.
      ``PRMEConfig(scoring=ScoringWeights())`` for a learning-ready, weighted-fusion pack);
      later opens use them, so no environment variable is needed again.
    - ``False``: the pack must exist (:class:`~prme.errors.PackNotFoundError` otherwise);
      nothing is created.

    A pack with recorded settings takes them as its configuration; a configured value that
    disagrees (``PRME_SCORING__FUSION``, ``PRME_EMBEDDING__PROVIDER``, the ``config``
    argument) raises InvalidInputError naming both values. Change them with
    :meth:`configure_pack` (``prme pack configure``).

    Args:
        path: the pack directory.
        config: a PRMEConfig; by default read from the environment (``PRME_*``).
        embedder: an Embedder overriding ``config.embedding``.
        frozen: refuse content writes (store, delete); retrieval, receipts, judgments and
            reports still append. A pack that cannot be written at all (read-only media, no
            permission) is opened read-only instead (see :attr:`read_only`).
        clock: a callable returning an aware datetime (tests fake the clock here).
        tracer: receives every SQL statement (tests check transactions with it).
        store: an opened Store (overrides the path and ``postgres_url``).
        postgres_url: use the PostgreSQL backend at this URL instead of the pack directory
            (also ``PRME_STORAGE__POSTGRES_URL``); needs the ``prme[postgres]`` extra.
    """

    def __init__(
        self,
        path: str | Path = ".",
        *,
        config: PRMEConfig | None = None,
        embedder: Embedder | None = None,
        frozen: bool = False,
        clock: Callable[[], datetime] | None = None,
        tracer: Tracer | None = None,
        store: Store | None = None,
        postgres_url: str | None = None,
        create: bool | None = None,
    ) -> None:
        self.config = config or PRMEConfig()
        self.path = Path(path)
        self.frozen = frozen
        if create is not None and not isinstance(create, bool):
            raise InvalidInputError("create", "must be True, False or None", create)
        configured = self.config.storage.postgres_url
        url = postgres_url or (configured.get_secret_value() if configured else None)
        # The provider name first: a bad provider must fail before any storage is opened.
        if embedder is None and self.config.embedding.provider not in provider_names():
            make_embedder(self.config.embedding.provider)  # raises, listing the valid names
        backing = store or make_store(
            backend_name(self.config.storage.backend, url),
            StoreOptions(
                path=self.path,
                url=url,
                frozen=frozen,
                tracer=tracer,
                busy_timeout_ms=self.config.storage.busy_timeout_ms,
                create=create is not False,
                index_cache=self.config.storage.postgres_index_cache,
            ),
        )
        try:  # a failed open closes what it opened (no connection or descriptor is leaked)
            stored = backing.pack_settings()
            if stored is None and create and getattr(backing, "created", False) and not frozen:
                backing.record_settings(pack_settings.settings_of(self.config), bump=False)
            elif stored is not None:
                self.config = pack_settings.apply(self.config, stored)
            chosen = embedder or make_embedder(
                self.config.embedding.provider, self.config.embedding.dimension
            )
            self._engine: Engine | None = Engine(
                store=backing, config=self.config, embedder=chosen, clock=clock or utc_now
            )
            self._engine.check_embedder()
        except BaseException:
            backing.close()
            raise

    # ------------------------------------------------------------------ lifecycle
    @property
    def read_only(self) -> bool:
        """True when the pack could not be written (read-only media or no permission) and was
        opened read-only: retrievals answer with ``receipt_persisted=False``, writes raise
        :class:`~prme.errors.ReadOnlyPackError`."""
        return bool(getattr(self.engine.store, "read_only", False))

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("MemoryClient is closed")
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.store.close()
            self._engine = None

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------- memories
    def store(self, content: str, *, user_id: str, **fields: Any) -> str:
        """Store one memory and return its id (a string).

        Keyword fields: scope, node_type, session_id, role, metadata, confidence,
        epistemic_type, source_type, event_time, valid_from, valid_to, salience, pinned,
        ttl_days. Raises InvalidInputError naming the field; nothing is written on error.

        ``ttl_days = N`` keeps the memory retrievable until its stated time (``event_time``,
        else the time it was stored) plus N days, inclusive; after that it leaves retrieval
        (``get``/``list`` still return it with ``expired=True``). None (the default) never
        expires.
        """
        return str(memories.store(self.engine, content, user_id=user_id, **fields).node_id)

    def store_with_receipt(
        self, content: str, *, user_id: str, dedupe: bool = False, **fields: Any
    ) -> dict[str, Any]:
        """Like :meth:`store`, returning ``{event_id, node_id, processing_status}``.

        ``dedupe=True``: when the owner already has a current memory in the same scope with
        the same normalised content (NFKC, whitespace collapsed, case folded), nothing is
        written and ``node_id`` is that memory's id; the result then also carries
        ``duplicate`` (True, or False when the memory was new). ``store(..., dedupe=True)``
        returns the existing id the same way.
        """
        receipt: StoreReceipt = memories.store(
            self.engine, content, user_id=user_id, dedupe=dedupe, **fields
        )
        result: dict[str, Any] = {
            "event_id": str(receipt.event_id),
            "node_id": str(receipt.node_id),
            "processing_status": receipt.processing_status,
        }
        if dedupe:
            result["duplicate"] = receipt.duplicate
        return result

    def store_many(self, items: Sequence[str | Mapping[str, Any]], *, user_id: str) -> list[str]:
        """Store a batch in one transaction; each item is a text or a dict of store fields."""
        return memories.store_many(self.engine, items, user_id=user_id)  # type: ignore[arg-type]

    def get(self, node_id: object, *, user_id: str) -> MemoryRecord | None:
        """The owner's memory, or None (another owner's id looks missing). ``expired`` says
        its ``ttl_days`` ran out at the client's clock (retrieval no longer returns it)."""
        return memories.get(self.engine, node_id, user_id=user_id)

    def list(
        self, *, user_id: str, scope: ScopeInput = None, limit: int = 100, after_id: object = None
    ) -> list[MemoryRecord]:
        """The owner's memories ordered by id, paged with ``after_id``; expired ones are
        listed with ``expired=True``."""
        return memories.list_memories(
            self.engine, user_id=user_id, scope=scope, limit=limit, after_id=after_id
        )

    def delete(self, node_id: object, *, user_id: str) -> bool:
        """Delete the owner's memory; True when something was deleted (False: missing or
        another owner's). Bumps the content write sequence, so a holdout run across it is
        refused; saved receipts still replay and ``check_pack`` stays clean.

        Raises:
            FrozenPackError / ReadOnlyPackError: the pack refuses content writes.
        """
        return memories.delete(self.engine, node_id, user_id=user_id)

    def update(self, node_id: object, *, user_id: str, **changes: Any) -> MemoryRecord:
        """Replace the owner's memory by a new version and return it (``supersedes`` names the
        old id). The old version is kept: its ``valid_to`` becomes now and its lifecycle
        ``superseded``, so default retrieval returns only the new version while
        ``knowledge_at`` queries before the update still see the old one, and receipts that
        returned it still replay.

        ``changes``: any store field but ``user_id`` and ``valid_from`` (the new version is
        valid from now); unchanged fields are copied from the old version, and ``None`` takes
        the store-time default.

        Raises:
            NotFoundError: no such memory of this owner (another owner's id looks the same).
            InvalidInputError: no change, an unknown field or bad value (naming it), or the
                memory was already superseded (update the latest version).
            FrozenPackError / ReadOnlyPackError: the pack refuses content writes.
        """
        return memories.update(self.engine, node_id, user_id=user_id, **changes)

    # ---- pack settings (services/pack_settings.py) ---------------------------------------
    def pack_settings(self) -> dict[str, Any] | None:
        """The retrieval settings recorded in the pack (``embedding``, ``scoring``,
        ``retrieval``), or None for a pack that records none (it follows the configuration)."""
        return self.engine.store.pack_settings()

    def configure_pack(
        self,
        *,
        fusion: str | None = None,
        embedder: str | None = None,
        vector_index: str | None = None,
    ) -> dict[str, Any]:
        """Change the pack's recorded settings (``prme pack configure``) and use them now.

        A content write: the write sequence moves (a frozen holdout notices) and the change is
        kept in the pack. A pack without recorded settings first records the current ones.

        Args:
            fusion: ``"weighted"`` (learning-ready: profiles apply) or ``"rrf"``.
            embedder: a provider name; only on a pack whose memories were not yet embedded.
            vector_index: ``"exact"`` (scan every cosine) or ``"hnsw"`` (HNSW segments for
                an owner past ``retrieval.vector_index_min_rows`` memories; then run
                :meth:`build_index` for the large owners, or their next retrieval builds
                them). Part of the feature identity: a profile evaluated under the other is
                ``inapplicable``.

        Raises:
            InvalidInputError: an unknown fusion or provider, nothing to change, or a new
                embedder for memories already embedded with another one.
            FrozenPackError / ReadOnlyPackError: the pack refuses content writes.
        """
        if fusion is None and embedder is None and vector_index is None:
            raise InvalidInputError("settings", "give fusion, embedder or vector_index to change")
        if embedder is not None and embedder not in provider_names():
            make_embedder(embedder)  # raises, listing the valid names
        engine = self.engine
        current = engine.store.pack_settings() or pack_settings.settings_of(self.config)
        new = pack_settings.changed(
            current, fusion=fusion, embedder=embedder, vector_index=vector_index
        )
        bound = engine.store.embedder_identity()
        if embedder is not None and bound is not None and bound.get("provider") != embedder:
            raise InvalidInputError(
                "embedding.provider",
                f"the pack's memories were embedded with {bound.get('provider')!r}; the "
                f"embedder cannot become {embedder!r} (store them again in a new pack)",
                embedder,
            )
        config = pack_settings.adopt(self.config, new)
        chosen = make_embedder(config.embedding.provider, config.embedding.dimension)
        engine.store.record_settings(new, bump=True)
        self.config = config
        engine.reconfigure(config, chosen)
        return new

    def pack_digest(self) -> str:
        """SHA-256 over the pack's retrieval-relevant content (memories, vectors, entities)."""
        return self.engine.store.pack_digest()

    # ------------------------------------------------------------------ retrieval
    def retrieve(
        self,
        query: str,
        *,
        user_id: str,
        scope: ScopeInput = None,
        time_from: datetime | None = None,
        time_to: datetime | None = None,
        reference_time: datetime | None = None,
        knowledge_at: datetime | None = None,
        event_time_from: datetime | None = None,
        event_time_to: datetime | None = None,
        token_budget: int | None = None,
        min_score: float | None = None,
        limit: int | None = None,
        max_per_source: int | None = None,
        max_per_evidence: int | None = None,
        exclude_node_types: Collection[NodeType | str] | None = None,
        source_types: Collection[SourceType | str] | None = None,
        weights: ScoringWeights | Mapping[str, Any] | None = None,
        ranking_multipliers: RankingMultipliers | Mapping[str, Any] | None = None,
        retrieval_mode: RetrievalMode | str = RetrievalMode.DEFAULT,
        include_cross_scope: bool = True,
    ) -> RetrievalResponse:
        """Hybrid retrieval with a saved receipt (``metadata.receipt_persisted`` says if it was).

        The keywords are :class:`~prme.models.request.RetrievalRequest`'s fields (a test
        checks names and defaults)."""
        given = locals()
        request = RetrievalRequest.unchecked({name: given[name] for name in PARAMETERS})
        return retrieval.retrieve(self.engine, request)

    def build_index(self, *, user_id: str) -> OwnerIndexReport:
        """Prepare the owner's index now instead of in the next retrieval (``prme pack
        index``): after a bulk load, the first retrieval would read the owner's rows, tokenize
        and save them and, past the approximate index's threshold, build the HNSW segments
        (minutes at a million memories). Returns once it is all built and saved; retrieval
        results are the same either way."""
        return owner_index.build_index(self.engine, user_id)

    def get_retrieval_receipt(self, request_id: object, *, user_id: str) -> RetrievalReceipt | None:
        """The owner's receipt for ``request_id``, or None (missing and foreign look the same)."""
        return receipts.get_receipt(self.engine, request_id, user_id=user_id)

    # ---- pack integrity (services/integrity.py) ------------------------------------------
    def check_pack(self) -> IntegrityReport:
        """Check the whole pack and report every problem (``prme pack check``); repairs nothing.

        Covers SQLite integrity and the lexical index, memories ↔ vectors ↔ lexical rows, every
        operations-log checksum, every receipt (parses and replays exactly), judgment, profile,
        pointer transition and report (attestations), and that each pointer's history is one
        chain resolving to existing profiles of the same scopes.

        Returns an IntegrityReport: counts, and ``problems`` (empty and ``ok`` when sound).

        Raises:
            sqlite3.OperationalError: the pack cannot be read at all.
        """
        return integrity_service.check_pack(self.engine)

    # ---- receipt retention (services/retention.py) --------------------------------------
    def prune_receipts(
        self, *, older_than: timedelta | float, dry_run: bool = False
    ) -> ReceiptPruneSummary:
        """Remove retrieval receipts saved more than ``older_than`` ago (a timedelta, or days)
        that no judgment, judgment evidence, evaluation report or ranking profile refers to, for
        every owner of the pack (``prme pack prune --receipts-older-than DAYS``).

        One transaction appends a ``receipt_prune`` audit record per owner (request id, payload
        SHA-256 and save time of every removed receipt) and deletes exactly those receipts;
        every judgment keeps its receipt, so :meth:`check_pack` stays clean. ``dry_run``
        counts and writes nothing.

        Raises:
            InvalidInputError: ``older_than`` is not a duration from 0 to 36525 days.
            ReadOnlyPackError: the pack is read-only.
        """
        return retention.prune_receipts(self.engine, older_than=older_than, dry_run=dry_run)

    # ---- pack transfer (storage/transfer.py) -------------------------------------------
    def export_pack(self, target: str | Path | IO[str]) -> TransferSummary:
        """Write the whole pack (memories, vectors, entity links, the operations log, the pack's
        identity and secret) as JSON Lines, for :meth:`import_pack`.

        Raises:
            IntegrityError: a stored record fails its checksum.
        """
        return transfer.export_pack(self.engine.store, target)

    def import_pack(self, source: str | Path | IO[str]) -> TransferSummary:
        """Load an export into this empty pack in one transaction; receipts keep their checksums
        and attestations stay valid because the secret moves with the pack.

        Raises:
            InvalidInputError: the pack is not empty or the file is not an export.
            IntegrityError: a record in the file fails its checksum.
            FrozenPackError: the pack is open frozen.
        """
        return transfer.import_pack(self.engine.store, source)

    # ---- relevance judgments (services/relevance.py) ---------------------------------
    def record_relevance(
        self, submission: RelevanceSubmission | Mapping[str, Any], *, user_id: str
    ) -> RelevanceRecord:
        """Save explicit labels on candidates returned by one of the owner's retrievals.

        A judgment of a retrieval run under rank fusion (rrf) is saved, but learning will
        exclude it (``rank_fusion_receipt_records``): the result is then a
        :class:`~prme.models.relevance.RecordedRelevance` whose ``warnings`` say so (create
        packs with weighted fusion to learn: ``prme init --fusion weighted``).

        Labels must name candidates of that request's saved receipt (for ``surface="context"``:
        included entries, positives with source content). Reusing ``feedback_id`` with the same
        content returns the original record; with different content it is an error.

        Raises:
            NotFoundError: no saved receipt of this owner has ``submission.request_id``.
            InvalidInputError: bad labels, or ``feedback_id`` names a different judgment.
        """
        return relevance_service.record_relevance(self.engine, submission, user_id=user_id)

    def get_relevance(self, feedback_id: object, *, user_id: str) -> RelevanceRecord | None:
        """The owner's judgment with this feedback id (UUID or string), or None.

        Raises:
            InvalidInputError: ``feedback_id`` is not a UUID; IntegrityError: the stored record
                fails its checksum, owner or identity check.
        """
        return relevance_service.get_relevance(self.engine, feedback_id, user_id=user_id)

    def list_relevance(
        self, *, user_id: str, limit: int = 100, after_id: object = None
    ) -> builtins.list[RelevanceRecord]:
        """The owner's judgments ordered by ``str(feedback_id)``; page with ``after_id``.

        Raises:
            InvalidInputError: ``limit`` is not an integer from 1 to 1000, or ``after_id`` is
                not a UUID.
        """
        return relevance_service.list_relevance(
            self.engine, user_id=user_id, limit=limit, after_id=after_id
        )
