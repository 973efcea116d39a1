"""MemoryClient: the synchronous public API over one memory pack (and AsyncMemoryClient)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from prme.config import PRMEConfig
from prme.embed.base import Embedder
from prme.embed.registry import make_embedder
from prme.engine import Engine, utc_now
from prme.models.enums import NodeType, RetrievalMode, SourceType
from prme.models.memory import MemoryNode, StoreReceipt
from prme.models.receipt import RetrievalReceipt
from prme.models.retrieval import RetrievalResponse
from prme.models.scope import ScopeInput
from prme.models.scoring import RankingMultipliers, ScoringWeights
from prme.services import memories, receipts, retrieval
from prme.storage.base import Store
from prme.storage.sqlite import SQLiteStore, Tracer

P = ParamSpec("P")
R = TypeVar("R")


class MemoryClient:
    """A memory pack opened for use. ``MemoryClient("./memories")`` creates it if needed.

    Args:
        path: the pack directory.
        config: a PRMEConfig; by default read from the environment (``PRME_*``).
        embedder: an Embedder overriding ``config.embedding``.
        frozen: refuse content writes (store, delete); retrieval, receipts, judgments and
            reports still append.
        clock: a callable returning an aware datetime (tests fake the clock here).
        tracer: receives every SQL statement (tests check transactions with it).
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
    ) -> None:
        self.config = config or PRMEConfig()
        self.path = Path(path)
        self.frozen = frozen
        backing = store or SQLiteStore(
            self.path,
            frozen=frozen,
            busy_timeout_ms=self.config.storage.busy_timeout_ms,
            tracer=tracer,
        )
        chosen = embedder or make_embedder(
            self.config.embedding.provider, self.config.embedding.dimension
        )
        self._engine: Engine | None = Engine(
            store=backing, config=self.config, embedder=chosen, clock=clock or utc_now
        )
        try:
            self._engine.check_embedder()
        except Exception:
            backing.close()
            raise

    # ------------------------------------------------------------------ lifecycle
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
        """
        return str(memories.store(self.engine, content, user_id=user_id, **fields).node_id)

    def store_with_receipt(self, content: str, *, user_id: str, **fields: Any) -> dict[str, Any]:
        """Like :meth:`store`, returning ``{event_id, node_id, processing_status}``."""
        receipt: StoreReceipt = memories.store(self.engine, content, user_id=user_id, **fields)
        return {
            "event_id": str(receipt.event_id),
            "node_id": str(receipt.node_id),
            "processing_status": receipt.processing_status,
        }

    def store_many(self, items: Sequence[str | Mapping[str, Any]], *, user_id: str) -> list[str]:
        """Store a batch in one transaction; each item is a text or a dict of store fields."""
        return memories.store_many(self.engine, items, user_id=user_id)  # type: ignore[arg-type]

    def get(self, node_id: object, *, user_id: str) -> MemoryNode | None:
        """The owner's memory, or None (another owner's id looks missing)."""
        return memories.get(self.engine, node_id, user_id=user_id)

    def list(
        self, *, user_id: str, scope: ScopeInput = None, limit: int = 100, after_id: object = None
    ) -> list[MemoryNode]:
        """The owner's memories ordered by id, paged with ``after_id``."""
        return memories.list_memories(
            self.engine, user_id=user_id, scope=scope, limit=limit, after_id=after_id
        )

    def delete(self, node_id: object, *, user_id: str) -> bool:
        """Delete the owner's memory; True when something was deleted."""
        return memories.delete(self.engine, node_id, user_id=user_id)

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
        """Hybrid retrieval with a saved receipt (``metadata.receipt_persisted`` says if it was)."""
        return retrieval.retrieve(
            self.engine,
            query,
            user_id=user_id,
            scope=scope,
            time_from=time_from,
            time_to=time_to,
            reference_time=reference_time,
            knowledge_at=knowledge_at,
            event_time_from=event_time_from,
            event_time_to=event_time_to,
            token_budget=token_budget,
            min_score=min_score,
            limit=limit,
            max_per_source=max_per_source,
            max_per_evidence=max_per_evidence,
            exclude_node_types=exclude_node_types,
            source_types=source_types,
            weights=weights,
            ranking_multipliers=ranking_multipliers,
            retrieval_mode=retrieval_mode,
            include_cross_scope=include_cross_scope,
        )

    def get_retrieval_receipt(self, request_id: object, *, user_id: str) -> RetrievalReceipt | None:
        """The owner's receipt for ``request_id``, or None (missing and foreign look the same)."""
        return receipts.get_receipt(self.engine, request_id, user_id=user_id)

    # ---- relevance judgments (services/relevance.py) ---------------------------------

    # ---- learning gate 1 (services/learning.py) ---------------------------------------

    # ---- learning gate 2 (services/holdout.py) ----------------------------------------

    # ---- ranking profiles and the activation pointer (services/profiles.py) -----------


class AsyncMemoryClient:
    """The same API as MemoryClient, each call offloaded to a worker thread."""

    def __init__(self, path: str | Path = ".", **kwargs: Any) -> None:
        self.sync = MemoryClient(path, **kwargs)

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.sync.close()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.sync, name)
        if not callable(method):
            return method

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call
