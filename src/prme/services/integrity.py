"""check_pack: a full integrity check of one pack (``prme pack check``).

Everything is read in one consistent snapshot and nothing is repaired or written:

- ``sqlite``: ``PRAGMA integrity_check`` and the FTS5 index against the memories table;
- ``postgres``: every owner's kept BM25 statistics against those of the stored memories;
- ``memories``: every memory has exactly one vector of the pack's dimension and one lexical
  row, its ``content_sha256`` matches its content, and no vector, lexical row or entity link
  is orphaned;
- ``digest``: the pack digest's state kept with the writes (:mod:`prme.storage.digest`)
  equals the one recomputed from every stored memory;
- ``oplog``: every operation's payload matches its checksum, and its type is a registered record
  kind (:data:`prme.services.records.KINDS`) or a memory version link;
- ``receipt``: every retrieval receipt parses, is canonical and replays its scores and order;
- ``relevance``: every judgment verifies and is bound to a stored receipt with its checksum;
- ``evidence``: every judgment's stored evidence is canonical, names its judgment, and equals
  the evidence cut afresh from the judged receipt;
- ``profile`` / ``report``: every ranking profile and evaluation report verifies, and every
  attestation (including the reports embedded in profiles) was made by this pack's secret;
- ``state`` / ``pointer``: every pointer transition verifies, each (owner, scope set) history is
  one chain (each ``previous_profile_id`` is the prior ``active_profile_id``), and each pointer
  resolves to an existing profile of the same scopes;
- ``retention``: every receipt-prune audit record parses, is canonical, names its owner and
  prune, and lists only receipts that are indeed gone.

Each record is read through its kind in :mod:`prme.services.records` (its row rule, its verify
function in full, its owner and id rules), then the checks that bind records together run. The
checks read the pack through the Store protocol (``check_storage``, ``scan_rows``,
``iter_rows``, the digest state), so they run on every backend; ``postgres`` checks the owners'
BM25 statistics against the stored memories where ``sqlite`` runs its database and FTS5 checks.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, model_validator

from prme.canonical import canonical_json, sha256_hex
from prme.engine import Engine
from prme.errors import IntegrityError
from prme.models.base import Frozen
from prme.models.profiles import RankingProfile, RankingProfileState
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import RelevanceRecord
from prme.models.retention import ReceiptPruneRecord
from prme.models.scope import ScopeKey
from prme.services import profiles, records, reports
from prme.services.records import RecordKind
from prme.services.relevance import cut_evidence
from prme.storage.base import OpRecord, Store
from prme.storage.columns import MEMORY_COLUMNS
from prme.storage.oplog_sql import op_record, stored_payload

CheckName = Literal[
    "backend",
    "sqlite",
    "postgres",
    "memories",
    "digest",
    "oplog",
    "receipt",
    "relevance",
    "evidence",
    "profile",
    "report",
    "state",
    "pointer",
    "retention",
]
_ID, _CONTENT, _CONTENT_SHA256 = (
    MEMORY_COLUMNS.index(c) for c in ("id", "content", "content_sha256")
)


class IntegrityProblem(Frozen):
    """One thing that failed: which check, what it concerns (an operation or memory id, a
    pointer), and why."""

    check: CheckName
    ref: str | None = None
    message: str


class IntegrityReport(Frozen):
    """What :func:`check_pack` read and every problem it found (``ok`` when there are none)."""

    pack_id: str
    write_seq: int
    memories: int
    vectors: int
    lexical_rows: int
    operations: int
    receipts: int
    relevance_records: int
    relevance_evidence: int
    profiles: int
    pointer_states: int
    pointers: int
    reports: int
    other_operations: int
    pruned_receipts: int = 0  # receipts removed by receipt retention, per its audit records
    ok: bool
    problems: tuple[IntegrityProblem, ...]
    skipped: tuple[str, ...] = ()  # checks that could not run (e.g. on a read-only pack)

    @model_validator(mode="after")
    def _ok_means_no_problems(self) -> IntegrityReport:
        if self.ok != (not self.problems):
            raise ValueError("ok must be true exactly when there are no problems")
        return self


@dataclass
class _Findings:
    problems: list[IntegrityProblem] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, check: CheckName, ref: object, message: str) -> None:
        self.problems.append(
            IntegrityProblem(check=check, ref=None if ref is None else str(ref), message=message)
        )

    def verify(self, check: CheckName, ref: object, action: Callable[[], Any]) -> Any:
        """Run one verification; any failure becomes a problem (None is returned)."""
        try:
            return action()
        except Exception as exc:
            self.add(check, ref, f"{type(exc).__name__}: {exc}")
            return None


def check_pack(engine: Engine) -> IntegrityReport:
    """Check every table and every operation of the pack; never raises on a finding.

    Returns an IntegrityReport whose ``problems`` list each failed check (empty: the pack is
    sound). Only a pack that cannot be read at all raises (e.g. ``sqlite3.OperationalError``).
    """
    store = engine.store
    found = _Findings()
    problems, skipped = store.check_storage()
    found.skipped += skipped
    for problem in problems:
        found.add(problem.check, problem.ref, problem.message)
    with store.read_snapshot() as identity:
        _check_memories(store, found)
        _check_digest(store, found)
        _check_operations(engine, store, found)
    return _report(identity.pack_id, identity.write_seq, found)


def _report(pack_id: str, write_seq: int, found: _Findings) -> IntegrityReport:
    counts = found.counts
    return IntegrityReport(
        pack_id=pack_id,
        write_seq=write_seq,
        memories=counts["memories"],
        vectors=counts["vectors"],
        lexical_rows=counts["lexical_rows"],
        operations=counts["operations"],
        receipts=counts["receipts"],
        relevance_records=counts["relevance_records"],
        relevance_evidence=counts["relevance_evidence"],
        profiles=counts["profiles"],
        pointer_states=counts["pointer_states"],
        pointers=counts["pointers"],
        reports=counts["reports"],
        other_operations=counts["other_operations"],
        pruned_receipts=counts["pruned_receipts"],
        ok=not found.problems,
        problems=tuple(found.problems),
        skipped=tuple(found.skipped),
    )


# ------------------------------------------------------------------------------- memories
_SCAN_LIMIT = 100  # problems reported per kind of orphan


def _check_memories(store: Store, found: _Findings) -> None:
    dimension = (store.embedder_identity() or {}).get("dimension")
    scan = store.scan_rows(None if dimension is None else int(dimension), _SCAN_LIMIT)
    counts = found.counts
    counts["memories"] = scan.memories
    counts["vectors"] = scan.vectors
    counts["lexical_rows"] = scan.lexical_rows
    for message, ref in scan.orphans:
        found.add("memories", ref, message)
    if dimension is None and counts["memories"]:
        found.add("memories", None, "memories are stored but no embedder is bound")
    for ref in scan.bad_vectors:
        found.add("memories", ref, f"vector is not {dimension} float32 values")
    for row in store.iter_rows("memory"):
        node_id, content, digest = row[_ID], row[_CONTENT], row[_CONTENT_SHA256]
        if sha256_hex(content) != digest:
            found.add("memories", node_id, "content does not match content_sha256")


def _check_digest(store: Store, found: _Findings) -> None:
    kept = store.kept_digest_state()
    if kept is None:
        found.skipped.append("digest: the pack predates the kept digest (opened read-only)")
        return
    recomputed = store.recompute_digest_state()
    if kept != recomputed:
        found.add(
            "digest",
            None,
            f"the kept pack digest state ({kept.count} memories, sum {kept.encode()[1]}) differs"
            f" from the stored memories ({recomputed.count}, sum {recomputed.encode()[1]})",
        )


# ------------------------------------------------------------------------ operations log
@dataclass
class _Ledger:
    """What later checks need from earlier operations."""

    receipts: dict[tuple[str, str], str] = field(default_factory=dict)  # → receipt checksum
    unverified: set[tuple[str, str]] = field(default_factory=set)  # receipts that failed
    bindings: list[tuple[OpRecord, str, str]] = field(default_factory=list)  # judgments
    records: dict[str, tuple[OpRecord, RelevanceRecord]] = field(default_factory=dict)  # by op id
    evidence: list[OpRecord] = field(default_factory=list)
    profiles: dict[tuple[str, uuid.UUID], RankingProfile] = field(default_factory=dict)
    chains: dict[tuple[str, str], list[tuple[int, int, RankingProfileState]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    pruned: list[tuple[OpRecord, ReceiptPruneRecord]] = field(default_factory=list)


def _operations(store: Store, found: _Findings, ledger: _Ledger) -> Iterator[OpRecord]:
    """Every operation whose payload matches its checksum (the others become problems)."""
    for row in store.iter_rows("op"):
        found.counts["operations"] += 1
        try:
            payload = stored_payload(row[7], str(row[2]), str(row[1]))
        except IntegrityError as exc:
            found.add("oplog", row[1], f"{exc} (seq {row[0]})")
            if row[2] == records.RECEIPTS.op_type:
                ledger.unverified.add((str(row[3]), str(row[4])))
            continue
        op = op_record(row, payload)
        if sha256_hex(op.payload) != op.checksum:
            found.add("oplog", op.op_id, f"checksum mismatch ({op.op_type}, seq {op.seq})")
            if op.op_type == records.RECEIPTS.op_type:
                ledger.unverified.add((op.user_id, str(op.target_id)))
            continue
        yield op


def _check_operations(engine: Engine, store: Store, found: _Findings) -> None:
    """Read every operation through its registered kind, then check what binds them together."""
    ledger = _Ledger()
    for op in _operations(store, found, ledger):
        kind = records.KINDS.get(op.op_type)
        if kind is None:
            found.counts["other_operations"] += 1
            if op.op_type not in records.LINK_OP_TYPES:
                found.add("oplog", op.op_id, f"unknown operation type {op.op_type!r} (seq {op.seq})")
            continue
        if kind.counter is not None:
            found.counts[kind.counter] += 1
        if kind is records.EVIDENCE:
            ledger.evidence.append(op)  # checked once every judgment has been read
            continue
        _read(engine, kind, op, found, ledger)
    for op, request_id, receipt_checksum in ledger.bindings:
        stored = ledger.receipts.get((op.user_id, request_id))
        if (op.user_id, request_id) in ledger.unverified:
            found.add("relevance", op.op_id, f"judged receipt {request_id} fails verification")
        elif stored is None:
            found.add("relevance", op.op_id, f"judged receipt {request_id} is not stored")
        elif stored != receipt_checksum:
            found.add("relevance", op.op_id, f"receipt_checksum differs from receipt {request_id}")
    for op in ledger.evidence:
        _check_evidence(engine, op, found, ledger)
    for op, record in ledger.pruned:
        for item in record.receipts:
            if (op.user_id, str(item.request_id)) in ledger.receipts:
                found.add("retention", op.op_id, f"pruned receipt {item.request_id} is stored")
    _check_pointers(engine, found, ledger)


def _read(
    engine: Engine, kind: RecordKind[Any], op: OpRecord, found: _Findings, ledger: _Ledger
) -> None:
    """One operation of a registered kind: its row's own rule, then its payload through the
    kind's verify function in full (a receipt replays), then the owner and id rules; the
    kind's collector keeps what later checks need (it sees None when the payload failed)."""
    problem = kind.row_problem(op)
    if problem is not None:
        found.add(kind.check, op.op_id, problem)
        return
    record = found.verify(
        kind.check, op.op_id, lambda: kind.parse(op, op.user_id, str(op.target_id), True)
    )
    if record is not None and (kind.owner(record) != op.user_id or kind.op_id(record) != op.op_id):
        found.add(kind.check, op.op_id, kind.mismatch)
    _COLLECT[kind.check](engine, op, record, found, ledger)


def _receipt(
    engine: Engine, op: OpRecord, receipt: RetrievalReceipt | None, found: _Findings, ledger: _Ledger
) -> None:
    if receipt is None:
        ledger.unverified.add((op.user_id, str(op.target_id)))
    else:  # parsed with the exact score and order replay, and canonical
        ledger.receipts[(op.user_id, str(op.target_id))] = receipt.checksum


def _relevance(
    engine: Engine, op: OpRecord, record: RelevanceRecord | None, found: _Findings, ledger: _Ledger
) -> None:
    if record is not None:
        ledger.bindings.append((op, str(record.request_id), record.receipt_checksum))
        ledger.records[op.op_id] = (op, record)


def _check_evidence(engine: Engine, op: OpRecord, found: _Findings, ledger: _Ledger) -> None:
    judged = ledger.records.get(op.op_id.removeprefix(f"{records.EVIDENCE.op_type}:"))
    if judged is None:
        found.add("evidence", op.op_id, "evidence names no verified judgment")
        return
    record_op, record = judged
    evidence = found.verify(
        "evidence",
        op.op_id,
        lambda: records.EVIDENCE.parse(op, op.user_id, str(record_op.target_id), True),
    )
    if evidence is None or (record.user_id, str(record.request_id)) not in ledger.receipts:
        return  # the judgment's own binding check reports a missing or broken receipt
    # The receipt itself was verified (canonical, replays) when the log was read.
    fresh = found.verify("evidence", op.op_id, lambda: cut_evidence(engine, record))
    if fresh is not None and canonical_json(fresh) != op.payload:
        found.add("evidence", op.op_id, f"evidence differs from receipt {record.request_id}")


def _profile(
    engine: Engine, op: OpRecord, profile: RankingProfile | None, found: _Findings, ledger: _Ledger
) -> None:
    if profile is None:
        return
    for name, report in (("proposal", profile.proposal), ("holdout", profile.holdout)):
        if not reports.verify(engine, report):
            found.add("profile", op.op_id, f"embedded {name} attestation does not verify")
    ledger.profiles[(op.user_id, profile.profile_id)] = profile


def _report_op(
    engine: Engine, op: OpRecord, report: BaseModel | None, found: _Findings, ledger: _Ledger
) -> None:
    if report is not None and not reports.verify(engine, report):
        found.add("report", op.op_id, "attestation does not verify with this pack's secret")


def _state(
    engine: Engine,
    op: OpRecord,
    state: RankingProfileState | None,
    found: _Findings,
    ledger: _Ledger,
) -> None:
    if state is not None:
        ledger.chains[(op.user_id, str(op.namespace))].append((op.created_at_us, op.seq, state))


def _prune(
    engine: Engine,
    op: OpRecord,
    record: ReceiptPruneRecord | None,
    found: _Findings,
    ledger: _Ledger,
) -> None:
    if record is not None:
        found.counts["pruned_receipts"] += len(record.receipts)
        ledger.pruned.append((op, record))


# What each check keeps from the records it read (evidence is read after every judgment).
_COLLECT: dict[str, Callable[[Engine, OpRecord, Any, _Findings, _Ledger], None]] = {
    "receipt": _receipt,
    "relevance": _relevance,
    "profile": _profile,
    "report": _report_op,
    "state": _state,
    "retention": _prune,
}


# -------------------------------------------------------------------------------- pointers
def _scope_text(key: ScopeKey) -> str:
    return json.dumps(None if key is None else [s.value for s in key])


def _check_pointers(engine: Engine, found: _Findings, ledger: _Ledger) -> None:
    for (owner, _namespace), entries in sorted(ledger.chains.items()):
        found.counts["pointers"] += 1
        chain = [state for _, _, state in sorted(entries, key=lambda e: (e[0], e[1]))]
        _check_chain(engine, found, ledger, owner, chain)


def _check_chain(
    engine: Engine,
    found: _Findings,
    ledger: _Ledger,
    owner: str,
    chain: list[RankingProfileState],
) -> None:
    """One pointer's transitions, oldest first: one chain, every target resolvable."""
    key = chain[-1].scopes
    ref = f"{owner} {_scope_text(key)}"
    previous: uuid.UUID | None = None
    for state in chain:
        if state.scopes != key:
            found.add("pointer", state.change_id, f"transition of {ref} has other scopes")
        if state.previous_profile_id != previous:
            found.add(
                "pointer",
                state.change_id,
                f"history of {ref} is not one chain: previous_profile_id "
                f"{state.previous_profile_id} after active {previous}",
            )
        target = state.active_profile_id
        if target is not None:
            profile = ledger.profiles.get((owner, target))
            if profile is None or profile.scopes != state.scopes:
                found.add(
                    "pointer",
                    state.change_id,
                    f"{ref} names profile {target}, which is missing or has other scopes",
                )
            elif profile.application != state.application:
                found.add("pointer", state.change_id, f"application differs from {target}")
        previous = target
    latest = found.verify("pointer", ref, lambda: profiles.latest_state(engine, owner, key))
    if latest is not None and latest != chain[-1]:
        found.add("pointer", ref, "the pointer's latest transition is not the chain's last")
    scopes = None if key is None else list(key)
    found.verify(
        "pointer",
        ref,
        lambda: profiles.get_active_ranking_profile(engine, user_id=owner, scopes=scopes),
    )
