"""retrieve(): the I/O around the pure stages of :mod:`prme.retrieval`.

validate → resolve the profile → embed → candidates (one read snapshot) → score → select →
fetch and pack → build and persist the receipt → respond.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from prme.embed.base import embed_queries
from prme.engine import Engine
from prme.index.owner_index import OwnerIndex
from prme.models.receipt import PackIdentity
from prme.models.request import RetrievalRequest
from prme.models.retrieval import RetrievalResponse
from prme.models.scope import scope_set_key
from prme.models.scoring import adjusted_weights
from prme.retrieval.candidates import candidate_pool, channel_hits, cross_scope_hints
from prme.retrieval.packing import pack
from prme.retrieval.query import analyze_query
from prme.retrieval.ranking import score_pool
from prme.retrieval.receipt_builder import Outcome, build_receipt, build_response
from prme.retrieval.scan import discard, finish, start
from prme.retrieval.selection import Caps, select_candidates
from prme.retrieval.validate import ValidRequest, validate_request
from prme.services.receipts import persist_receipt
from prme.services.resolution import resolve_multipliers
from prme.storage.timeutil import to_us

log = logging.getLogger("prme.retrieval")
# Owner indexes with at least this many memories scan their vectors on the scan thread. The
# hand-off is not free: the worker waits for the GIL the caller holds, and at 10k rows (a 0.4 ms
# scan) a retrieve cost 0.7 ms more process CPU on the thread than inline, for no less wall
# time (interleaved, 1,000 retrieves); a scan of 32k rows takes about 1.3 ms.
PARALLEL_SCAN_ROWS = 32768


class _Stopwatch:
    """Milliseconds per named step (the response's ``timing_ms``)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.ms: dict[str, float] = {}

    @contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        t0 = time.perf_counter()
        yield
        self.ms[step] = (time.perf_counter() - t0) * 1000


def retrieve(engine: Engine, request: RetrievalRequest) -> RetrievalResponse:
    """One retrieval with its receipt (a failed receipt write never fails the retrieval)."""
    clock = _Stopwatch()
    r = validate_request(request, engine.config.retrieval, engine.config.scoring)
    with engine.store.pinned():  # every read and the receipt's write on one connection
        return _retrieve(engine, r, clock)


def _retrieve(engine: Engine, r: ValidRequest, clock: _Stopwatch) -> RetrievalResponse:
    cfg, store = engine.config.retrieval, engine.store
    owner, scopes = r.owner, r.scopes
    resolution, multipliers = resolve_multipliers(
        engine, owner, scope_set_key(scopes), r.base, r.multipliers
    )
    now = r.reference_time or engine.clock()
    analysis = analyze_query(r.query)
    with clock("embed_query"):
        query_vector = embed_queries(engine.embedder, [r.query])[0]
    # One read snapshot from the owner index to the returned memories: a memory deleted or
    # changed meanwhile by another connection is read as the index saw it.
    with store.read_snapshot(owner) as snapshot:
        with clock("candidates"):
            # the pack identity matches the data read
            pack_identity = PackIdentity(
                pack_id=snapshot.pack_id, write_seq=store.owner_write_seq(owner)
            )
            stored = store.owner_index(owner)  # None: nothing stored yet in this pack
            ix = OwnerIndex(engine.embedder.identity.dimension) if stored is None else stored
            in_scope = ix.scope_mask(scopes)
            k = cfg.vector_k  # a large owner's scan runs on a thread or process meanwhile
            threaded = ix.size >= PARALLEL_SCAN_ROWS
            scan = start(ix, query_vector, scopes, in_scope, k, threaded)
            try:
                lexical = store.lexical_search(owner, scopes, analysis.terms, cfg.lexical_k)
                hits = channel_hits(
                    ix, in_scope, lambda: finish(scan, ix, query_vector, in_scope, k), lexical,
                    analysis.entity_names, cfg.graph_max_hops, cfg.graph_max_candidates,
                )  # fmt: skip
            except BaseException:
                discard(scan)
                raise
        with clock("score"):
            settings = r.filter_settings(cfg.unverified_confidence_threshold, to_us(now))
            pool = candidate_pool(ix, hits, settings)
            wanted = r.include_cross_scope and scopes is not None
            hints = cross_scope_hints(ix, hits.cosines, in_scope, settings) if wanted else ()
            applied = adjusted_weights(r.base, multipliers)
            scored = score_pool(
                ix, pool, r.base, applied, cfg.epistemic_weights, to_us(now),
                analysis.current_state,
            )  # fmt: skip
            caps = Caps(r.result_limit, r.min_score, r.max_per_source, r.max_per_evidence)
            selection = select_candidates(ix, pool, scored, caps)
        with clock("pack"):
            nodes = ix.memories(selection.positions, store.get_memories_by_rowid)
            packed = pack(
                [(m.content, m.event_time or m.created_at) for m in nodes], r.token_budget
            )
    outcome = Outcome(
        uuid.uuid4(), r, now, resolution, multipliers, pool, scored, selection, nodes, packed, hints
    )
    with clock("receipt"):
        built = build_receipt(outcome, ix, cfg, pack_identity, engine.feature_identity())
        persisted = True
        try:
            persist_receipt(engine, built.receipt)
        except Exception:  # a failed receipt write never fails the retrieval
            log.exception("retrieval receipt %s was not persisted", outcome.request_id)
            persisted = False
    clock.ms["total"] = (time.perf_counter() - clock.started) * 1000
    return build_response(outcome, built, ix, persisted, clock.ms)
