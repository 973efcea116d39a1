"""MemoryClient: the synchronous public API over one memory pack (and AsyncMemoryClient)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from prme.config import PRMEConfig
from prme.embed.base import Embedder
from prme.embed.registry import make_embedder, provider_names
from prme.engine import Engine, utc_now
from prme.errors import InvalidInputError
from prme.models.enums import NodeType, RetrievalMode, SourceType
from prme.models.holdout import (
    FullRetrievalEvaluation,
    FullRetrievalEvaluationConfig,
    FullRetrievalTrial,
)
from prme.models.learning import LearningConfig, LearningEvaluation
from prme.models.memory import MemoryRecord, StoreReceipt
from prme.models.profiles import (
    RankingProfile,
    RankingProfileState,
    RankingProfileStatus,
)
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import RelevanceRecord, RelevanceSubmission
from prme.models.request import PARAMETERS, RetrievalRequest
from prme.models.retention import ReceiptPruneSummary
from prme.models.retrieval import RetrievalResponse
from prme.models.scope import ScopeInput
from prme.models.scoring import RankingMultipliers, ScoringWeights
from prme.services import holdout as gate2_service
from prme.services import integrity as integrity_service
from prme.services import learning as gate1_service
from prme.services import memories, pack_settings, receipts, retention, retrieval
from prme.services import profiles as profile_service
from prme.services import relevance as relevance_service
from prme.services.integrity import IntegrityReport
from prme.storage import transfer
from prme.storage.base import Store
from prme.storage.registry import StoreOptions, backend_name, make_store
from prme.storage.sqlite import Tracer
from prme.storage.transfer import TransferSummary
from prme.validation import require_owner


class MemoryClient:
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
        self, *, fusion: str | None = None, embedder: str | None = None
    ) -> dict[str, Any]:
        """Change the pack's recorded settings (``prme pack configure``) and use them now.

        A content write: the write sequence moves (a frozen holdout notices) and the change is
        kept in the pack. A pack without recorded settings first records the current ones.

        Args:
            fusion: ``"weighted"`` (learning-ready: profiles apply) or ``"rrf"``.
            embedder: a provider name; only on a pack whose memories were not yet embedded.

        Raises:
            InvalidInputError: an unknown fusion or provider, nothing to change, or a new
                embedder for memories already embedded with another one.
            FrozenPackError / ReadOnlyPackError: the pack refuses content writes.
        """
        if fusion is None and embedder is None:
            raise InvalidInputError("settings", "give fusion or embedder to change")
        if embedder is not None and embedder not in provider_names():
            make_embedder(embedder)  # raises, listing the valid names
        engine = self.engine
        current = engine.store.pack_settings() or pack_settings.settings_of(self.config)
        new = pack_settings.changed(current, fusion=fusion, embedder=embedder)
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
        engine.config, engine.embedder, engine._features = config, chosen, None
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

    # ---- learning gate 1 (services/learning.py) ---------------------------------------
    def evaluate_learning(
        self,
        *,
        user_id: str,
        scopes: ScopeInput = None,
        surface: str = "results",
        config: LearningConfig | Mapping[str, Any] | None = None,
        query_groups: Mapping[Any, str] | None = None,
        max_records: int = 10_000,
    ) -> LearningEvaluation:
        """Gate 1: fit ranking multipliers from the owner's judgments and validate them offline.

        Args:
            user_id: the owner whose judgments and receipts are used.
            scopes: the exact scope set to learn for (None = unfiltered retrievals only).
            surface: ``"results"`` or ``"context"``.
            config: LearningConfig (seed, split, minimum groups, thresholds, ...).
            query_groups: ``{request_id: name}`` to merge paraphrased queries into one group.
            max_records: fail (rather than truncate) above this many judgments, 1–100000.

        Returns the attested report, also persisted under its ``input_checksum``. It never
        changes retrieval.

        Raises:
            InvalidInputError: invalid arguments or evidence, naming the field.
            IntegrityError: stored judgments or receipts fail verification.
        """
        return gate1_service.evaluate_learning(
            self.engine,
            user_id=user_id,
            scopes=scopes,
            surface=surface,
            config=config,
            query_groups=query_groups,
            max_records=max_records,
        )

    def get_learning_evaluation(
        self, input_checksum: str, *, user_id: str
    ) -> LearningEvaluation | None:
        """The owner's persisted gate-1 report with this ``input_checksum``, or None.

        Raises:
            InvalidInputError: ``input_checksum`` is not a SHA-256 hex digest.
        """
        return gate1_service.get_learning_evaluation(self.engine, input_checksum, user_id=user_id)

    # ---- learning gate 2 (services/holdout.py) ----------------------------------------
    def evaluate_full_retrieval(
        self,
        trials: Sequence[FullRetrievalTrial | Mapping[str, Any]],
        *,
        user_id: str,
        scopes: ScopeInput,
        proposal_input_checksum: str,
        memory_artifact_sha256: str,
        candidate_multipliers: RankingMultipliers | Mapping[str, Any],
        baseline_multipliers: RankingMultipliers | Mapping[str, Any] | None = None,
        config: FullRetrievalEvaluationConfig | Mapping[str, Any] | None = None,
    ) -> FullRetrievalEvaluation:
        """Gate 2: compare paired baseline/candidate retrievals of a fixed holdout.

        Loads both saved receipts of every trial, checks that the arms differ only in their
        multipliers and ran on one frozen pack (same ``pack_id`` and content write sequence),
        that the holdout is disjoint from the proposal's groups when that report is in this
        pack, scores recall/NDCG/MRR against the complete relevant sets, and persists the
        attested report (read it back with :meth:`get_full_retrieval_evaluation`).

        Args:
            trials: 1–10000 FullRetrievalTrial; each receipt may enter only one trial.
            user_id: the owner of every receipt.
            scopes: the exact scope set the retrievals used (None = unfiltered).
            proposal_input_checksum: the gate-1 report's ``input_checksum``.
            memory_artifact_sha256: your SHA-256 of the frozen fixture (``pack_digest()`` works).
            candidate_multipliers: the multipliers every candidate arm applied.
            baseline_multipliers: the multipliers every baseline arm applied (None = neutral).
            config: FullRetrievalEvaluationConfig (k, minimum groups, bootstrap, thresholds).

        Raises:
            InvalidInputError: any gate-2 rule, naming the field that differs.
        """
        return gate2_service.evaluate(
            self.engine,
            trials,
            user_id=user_id,
            scopes=scopes,
            proposal_input_checksum=proposal_input_checksum,
            memory_artifact_sha256=memory_artifact_sha256,
            candidate_multipliers=candidate_multipliers,
            baseline_multipliers=baseline_multipliers,
            config=config,
        )

    def get_full_retrieval_evaluation(
        self, input_checksum: str, *, user_id: str
    ) -> FullRetrievalEvaluation | None:
        """The owner's stored gate-2 report with this ``input_checksum``, or None.

        Raises:
            InvalidInputError: a malformed checksum or owner.
            IntegrityError: the stored report fails its checksum or attestation.
        """
        return gate2_service.get_evaluation(self.engine, input_checksum, user_id=user_id)

    def run_full_retrieval_holdout(
        self,
        queries: Sequence[Any],
        *,
        user_id: str,
        scopes: ScopeInput,
        proposal: gate2_service.Proposal,
        reference_time: datetime,
        limit: int = 20,
        baseline_multipliers: RankingMultipliers | Mapping[str, Any] | None = None,
        memory_artifact_sha256: str | None = None,
        config: FullRetrievalEvaluationConfig | Mapping[str, Any] | None = None,
        **retrieve_kwargs: Any,
    ) -> FullRetrievalEvaluation:
        """Run both arms of every ``(group_id, query, relevant_ids)`` and evaluate them (gate 2).

        The baseline arm uses ``baseline_multipliers`` (or nothing explicit, so an active profile
        applies), the candidate arm ``proposal.multipliers``; everything else is identical
        (``include_cross_scope`` defaults to False). ``proposal`` is the gate-1 report;
        ``memory_artifact_sha256`` defaults to :meth:`pack_digest`.

        Raises:
            InvalidInputError: a malformed query, a retrieval error, or any gate-2 rule.
        """
        return gate2_service.run_holdout(
            self.engine,
            queries,
            user_id=user_id,
            scopes=scopes,
            proposal=proposal,
            reference_time=reference_time,
            limit=limit,
            baseline_multipliers=baseline_multipliers,
            memory_artifact_sha256=memory_artifact_sha256,
            config=config,
            **retrieve_kwargs,
        )

    # ---- ranking profiles and the activation pointer (services/profiles.py) -----------
    def create_ranking_profile(
        self,
        proposal: LearningEvaluation | Mapping[str, Any] | None = None,
        holdout: FullRetrievalEvaluation | Mapping[str, Any] | None = None,
        *,
        user_id: str,
        profile_id: object = None,
        baseline_profile_id: object = None,
        proposal_input_checksum: str | None = None,
        holdout_input_checksum: str | None = None,
    ) -> RankingProfile:
        """Create an immutable ranking profile from a passing proposal and a passing holdout.

        Each report is given whole or by its ``input_checksum`` (the pack loads the owner's
        stored, verified report), exactly one of the two.

        Args:
            proposal: the gate-1 report (``evaluate_learning``), a model or its JSON dict.
            holdout: the gate-2 report (``evaluate_full_retrieval``) for that proposal.
            user_id: the owner; both reports must belong to it.
            profile_id: a UUID (or its string) making creation idempotent; new by default.
            baseline_profile_id: the profile that was active when the holdout ran (required
                when the holdout's baseline multipliers are not neutral).
            proposal_input_checksum: the stored gate-1 report's ``input_checksum``, instead of
                ``proposal``.
            holdout_input_checksum: the stored gate-2 report's ``input_checksum``, instead of
                ``holdout``.

        Raises:
            InvalidInputError: owner, scopes, surface, decisions, proposal checksum, multipliers,
                baseline, attestation (reports made by another pack, hand-built or edited) or
                overlapping holdout groups; a ``profile_id`` naming different evidence; both or
                neither of a report and its checksum.
            NotFoundError: no stored report of this owner has the given checksum (naming
                ``proposal_input_checksum`` or ``holdout_input_checksum``).
        """
        owner = require_owner(user_id)
        prop = profile_service.chosen_report(
            LearningEvaluation,
            "proposal",
            proposal_input_checksum,
            proposal,
            lambda checksum: self.get_learning_evaluation(checksum, user_id=owner),
        )
        hold = profile_service.chosen_report(
            FullRetrievalEvaluation,
            "holdout",
            holdout_input_checksum,
            holdout,
            lambda checksum: self.get_full_retrieval_evaluation(checksum, user_id=owner),
        )
        return profile_service.create_from_reports(
            self.engine,
            prop,
            hold,
            user_id=owner,
            profile_id=profile_id,
            baseline_profile_id=baseline_profile_id,
        )

    def activate_ranking_profile(
        self, profile_id: object, *, user_id: str, change_id: object = None
    ) -> RankingProfileState:
        """Make a profile active for its owner and exact scope set (one append-only transition).

        Args:
            profile_id: the profile (UUID or string).
            user_id: its owner.
            change_id: a stable UUID to retry a lost acknowledgement safely.

        Raises:
            NotFoundError: unknown or foreign profile.
            InvalidInputError: inapplicable under the running engine (``rank_fusion_scoring``,
                ``feature_identity_mismatch``, ``base_scoring_mismatch``); a reused change_id.
            StaleRankingProfileError: the pointer is not the profile's evaluated baseline, or it
                moved concurrently; inspect the current state and retry deliberately.
        """
        return profile_service.activate_ranking_profile(
            self.engine, profile_id, user_id=user_id, change_id=change_id
        )

    def deactivate_ranking_profile(
        self, *, user_id: str, scopes: ScopeInput = None, change_id: object = None
    ) -> RankingProfileState | None:
        """Return the exact scope set (None: unfiltered) to base scoring.

        Returns None and writes nothing when no profile is active.

        Raises:
            InvalidInputError: empty or invalid ``scopes``; a reused change_id.
            StaleRankingProfileError: the pointer moved concurrently.
        """
        return profile_service.deactivate_ranking_profile(
            self.engine, user_id=user_id, scopes=scopes, change_id=change_id
        )

    def rollback_ranking_profile(
        self,
        profile_id: object,
        *,
        user_id: str,
        scopes: ScopeInput = None,
        change_id: object = None,
    ) -> RankingProfileState:
        """Point the exact scope set back at a profile it had active before, or None (base).

        Raises:
            NotFoundError: unknown or foreign profile.
            InvalidInputError: a profile this pointer never had active ("unavailable for these
                scopes"), an inapplicable one, a no-op rollback, a reused change_id, bad scopes.
            StaleRankingProfileError: the pointer moved concurrently.
        """
        return profile_service.rollback_ranking_profile(
            self.engine, profile_id, user_id=user_id, scopes=scopes, change_id=change_id
        )

    def get_ranking_profile(self, profile_id: object, *, user_id: str) -> RankingProfile | None:
        """The owner's profile with its evidence, or None (unknown and foreign ids look alike).

        Raises:
            IntegrityError: the stored record failed verification.
        """
        return profile_service.get_ranking_profile(self.engine, profile_id, user_id=user_id)

    def list_ranking_profiles(
        self, *, user_id: str, limit: int = 100, after_id: object = None
    ) -> builtins.list[RankingProfile]:
        """The owner's profiles (all scope sets), newest first; ``after_id`` = last id seen.

        Raises:
            InvalidInputError: ``limit`` outside 1–1000.
            NotFoundError: ``after_id`` is not one of the owner's profiles.
        """
        return profile_service.list_ranking_profiles(
            self.engine, user_id=user_id, limit=limit, after_id=after_id
        )

    def get_active_ranking_profile(
        self, *, user_id: str, scopes: ScopeInput = None
    ) -> RankingProfile | None:
        """The profile active for the exact scope set (None: unfiltered), or None.

        Raises:
            InvalidInputError: empty or invalid ``scopes``.
            IntegrityError: the pointer or its profile failed verification.
        """
        return profile_service.get_active_ranking_profile(
            self.engine, user_id=user_id, scopes=scopes
        )

    def get_ranking_profile_status(
        self, profile_id: object, *, user_id: str
    ) -> RankingProfileStatus | None:
        """``{profile, active, latest_change}`` for the profile's own scope set, or None."""
        return profile_service.get_ranking_profile_status(self.engine, profile_id, user_id=user_id)

    def list_ranking_profile_history(
        self,
        *,
        user_id: str,
        scopes: ScopeInput = None,
        limit: int = 100,
        after_change_id: object = None,
    ) -> builtins.list[RankingProfileState]:
        """The exact scope set's transitions, newest first; page on with ``after_change_id``
        = the ``change_id`` of the last transition seen (an empty page: no older ones).

        Raises:
            InvalidInputError: empty or invalid ``scopes``; ``limit`` outside 1–1000.
            NotFoundError: ``after_change_id`` is not a transition of this pointer.
        """
        return profile_service.list_ranking_profile_history(
            self.engine,
            user_id=user_id,
            scopes=scopes,
            limit=limit,
            after_change_id=after_change_id,
        )
