"""The learning demo: the whole seed workflow end to end on a generated workload.

It opens its own pack with weighted fusion (``PRME_SCORING__FUSION=weighted``), stores the
workload, judges the returned candidates of one retrieval per learning group against the known
ground truth, runs gate 1, copies the closed pack to a frozen copy, runs a disjoint holdout there
(gate 2), creates the profile in the original pack, activates it, shows a retrieval that applies
it, deactivates it and rolls back to it. Only public :class:`~prme.client.MemoryClient` methods
are used. Layout of ``path``::

    path/                     the demo pack (inspect it with ``prme ... --path path``)
    path/frozen-holdout-pack/ the frozen copy the holdout ran in
    path/prme-demo.json       marks the directory as a demo pack (so a rerun may replace it)
    path/learning.html        the HTML report (unless another ``report`` path is given)
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from prme.client import MemoryClient
from prme.config import EmbeddingConfig, PRMEConfig
from prme.demo.report_html import render_report
from prme.demo.workload import Workload, generate_workload
from prme.embed.registry import provider_names
from prme.errors import InvalidInputError, PRMEError
from prme.models.holdout import FullRetrievalEvaluation
from prme.models.learning import LearningEvaluation
from prme.models.profiles import RankingProfile
from prme.models.relevance import RelevanceSubmission
from prme.models.scoring import ADDITIVE_FEATURES, RankingMultipliers, ScoringWeights

DEMO_USER = "alice"
FROZEN_DIR = "frozen-holdout-pack"
MARKER_FILE = "prme-demo.json"
REPORT_FILE = "learning.html"
PACK_FILE = "pack.sqlite3"
JUDGED_LIMIT = 10
HOLDOUT_LIMIT = 20
STORE_BATCH = 100
FUSION_NOTE = "using PRME_SCORING__FUSION=weighted for this pack"


class Progress(Protocol):
    """What a progress bar offers the demo (``click.progressbar`` fits)."""

    def update(self, n_steps: int) -> None: ...


ProgressFactory = Callable[[str, int], AbstractContextManager[Progress]]


class _Silent:
    def update(self, n_steps: int) -> None:
        pass


@contextlib.contextmanager
def silent_progress(label: str, length: int) -> Iterator[Progress]:
    """A progress factory that shows nothing (piped output, tests)."""
    yield _Silent()


class DemoStep(BaseModel):
    """One finished step: its name, its outcome (decision or status) and its key numbers."""

    model_config = ConfigDict(frozen=True)

    step: str
    outcome: str
    details: str
    seconds: float
    data: dict[str, Any]


class DemoSummary(BaseModel):
    """Everything the demo did, for ``--json`` and for tests."""

    model_config = ConfigDict(frozen=True)

    path: str
    frozen_path: str
    report_path: str
    embedder: str
    seed: int
    user_id: str
    scopes: list[str]
    fusion: str
    note: str
    memories: int
    learning_groups: int
    holdout_groups: int
    proposal_decision: str
    proposal_input_checksum: str
    multipliers: dict[str, float]
    holdout_decision: str
    holdout_input_checksum: str
    profile_id: str
    statuses: dict[str, str]
    transitions: list[str]
    steps: list[DemoStep]
    seconds: float


def prepare_directory(path: Path) -> bool:
    """Make ``path`` an empty directory, replacing an earlier demo pack; True if it replaced one.

    Raises:
        InvalidInputError: ``path`` is a file, or a directory that is neither empty nor a pack
            made by ``prme demo`` (nothing is deleted then).
    """
    if path.exists() and not path.is_dir():
        raise InvalidInputError("path", f"{path} is a file, not a directory", str(path))
    if path.is_dir() and any(path.iterdir()):
        if not ((path / PACK_FILE).is_file() and (path / MARKER_FILE).is_file()):
            raise InvalidInputError(
                "path",
                f"refusing to replace {path}: it is neither empty nor a pack made by prme demo",
                str(path),
            )
        shutil.rmtree(path)
        path.mkdir(parents=True)
        return True
    path.mkdir(parents=True, exist_ok=True)
    return False


def format_multipliers(multipliers: RankingMultipliers) -> str:
    """``semantic ×0.37 lexical ×0.83 …`` in the fixed feature order."""
    return " ".join(f"{name} ×{getattr(multipliers, name):.2f}" for name in ADDITIVE_FEATURES)


def _interval(interval: tuple[float, float] | None) -> str:
    return "none" if interval is None else f"[{interval[0]:+.3f}, {interval[1]:+.3f}]"


def _p(value: float | None) -> str:
    return "none" if value is None else f"{value:.4f}"


def _wtl(counts: dict[str, int] | None) -> str:
    c = counts or {}
    return f"{c.get('wins', 0)}/{c.get('ties', 0)}/{c.get('losses', 0)}"


class _Run:
    """One demo run: its settings, the steps so far, and how to report each one."""

    def __init__(
        self,
        root: Path,
        *,
        embedder: str,
        user_id: str,
        report_path: Path,
        workload: Workload,
        on_step: Callable[[DemoStep], None] | None,
        progress: ProgressFactory,
    ) -> None:
        self.root = root
        self.frozen_path = root / FROZEN_DIR
        self.report_path = report_path
        self.embedder = embedder
        self.user_id = user_id
        self.workload = workload
        self.scopes = [workload.scope]
        self.config = PRMEConfig(
            scoring=ScoringWeights(), embedding=EmbeddingConfig(provider=embedder)
        )
        self.on_step = on_step
        self.progress = progress
        self.steps: list[DemoStep] = []
        self.started = time.perf_counter()
        self.mark = self.started

    def step(self, name: str, outcome: str, details: str, **data: Any) -> None:
        now = time.perf_counter()
        item = DemoStep(
            step=name,
            outcome=outcome,
            details=details,
            seconds=round(now - self.mark, 3),
            data=data,
        )
        self.mark = now
        self.steps.append(item)
        if self.on_step is not None:
            self.on_step(item)

    def write_report(self, proposal: LearningEvaluation, **more: Any) -> None:
        self.report_path.parent.mkdir(parents=True, exist_ok=True)
        self.report_path.write_text(render_report(proposal, **more), encoding="utf-8")

    def stop_unless(self, decision: str, expected: str, gate: str, **report: Any) -> None:
        """Stop after a failed gate, leaving the report of the evidence gathered so far."""
        if decision != expected:
            self.write_report(**report)
            raise PRMEError(
                f"{gate} decided {decision}, so the demo stops before creating a profile "
                f"(report: {self.report_path})"
            )


def _store(run: _Run, memory: MemoryClient) -> dict[str, str]:
    items = run.workload.store_items()
    ids: list[str] = []
    with run.progress("storing memories", len(items)) as bar:
        for start in range(0, len(items), STORE_BATCH):
            batch = items[start : start + STORE_BATCH]
            ids.extend(memory.store_many(batch, user_id=run.user_id))
            bar.update(len(batch))
    projects = len({m.project for m in run.workload.memories})
    run.step(
        "store",
        f"{len(ids)} memories",
        f"{projects} projects; current facts (high confidence) and stale notes (low "
        f"confidence) about the same things; embedder {run.embedder}",
        memories=len(ids),
    )
    return {m.key: node_id for m, node_id in zip(run.workload.memories, ids, strict=True)}


def _judge(run: _Run, memory: MemoryClient, ids: dict[str, str]) -> dict[UUID, str]:
    """One judged retrieval per learning group; returned candidates labelled from ground truth."""
    groups: dict[UUID, str] = {}
    labels_total = positives = 0
    with run.progress("judging retrievals", len(run.workload.learning)) as bar:
        for query in run.workload.learning:
            response = memory.retrieve(
                query.text, user_id=run.user_id, scope=run.workload.scope, limit=JUDGED_LIMIT
            )
            if not response.metadata.receipt_persisted:
                raise PRMEError("a retrieval receipt was not saved; judgments need receipts")
            relevant = {ids[key] for key in query.relevant_keys}
            labels = {r.node.id: str(r.node.id) in relevant for r in response.results}
            if labels:
                submission = RelevanceSubmission(
                    request_id=response.metadata.request_id,
                    labels=labels,
                    method="structured_evaluation",
                )
                memory.record_relevance(submission, user_id=run.user_id)
                groups[response.metadata.request_id] = query.group
                labels_total += len(labels)
                positives += sum(labels.values())
            bar.update(1)
    run.step(
        "judge",
        f"{len(groups)} judged retrievals",
        f"{labels_total} labels ({positives} relevant) on returned candidates, limit "
        f"{JUDGED_LIMIT}, scope {run.workload.scope.value}; one group per (project, aspect)",
        labels=labels_total,
        positives=positives,
    )
    return groups


def _gate1(run: _Run) -> tuple[LearningEvaluation, dict[str, str]]:
    """Store, judge and fit in the live pack (gate 1)."""
    with MemoryClient(run.root, config=run.config, create=True) as memory:
        ids = _store(run, memory)
        groups = _judge(run, memory, ids)
        with run.progress("gate 1: fitting and validating", 1) as bar:
            proposal = memory.evaluate_learning(
                user_id=run.user_id, scopes=run.scopes, query_groups=groups
            )
            bar.update(1)
    cov, gain = proposal.coverage, proposal.validation_ndcg_gain
    run.step(
        "gate 1",
        proposal.decision,
        f"train {cov['training_queries']} / validation {cov['validation_queries']} groups; "
        f"judged NDCG gain {'none' if gain is None else f'{gain:+.3f}'} "
        f"{_interval(proposal.validation_gain_interval)} "
        f"(needs ≥ {proposal.config.min_ndcg_gain:g}, low > 0); "
        f"W/T/L {_wtl(proposal.win_tie_loss)}; p {_p(proposal.randomization_p_value)}; "
        f"{format_multipliers(proposal.multipliers)}",
        input_checksum=proposal.input_checksum,
        coverage=cov,
        exclusions=proposal.exclusions,
    )
    run.stop_unless(
        proposal.decision, "improved_on_observed_candidates", "gate 1", proposal=proposal
    )
    return proposal, ids


def _gate2(run: _Run, proposal: LearningEvaluation, ids: dict[str, str]) -> FullRetrievalEvaluation:
    """Copy the closed pack, open the copy frozen and run the disjoint holdout there (gate 2)."""
    ignore = shutil.ignore_patterns(FROZEN_DIR, MARKER_FILE, "*.html")
    shutil.copytree(run.root, run.frozen_path, ignore=ignore)
    reference_time = datetime.now(UTC)
    queries = [
        (q.group, q.text, [ids[key] for key in q.relevant_keys]) for q in run.workload.holdout
    ]
    with MemoryClient(run.frozen_path, config=run.config, frozen=True) as frozen:
        digest = frozen.pack_digest()
        run.step(
            "freeze",
            "frozen copy",
            f"{FROZEN_DIR} (opened frozen=True); pack digest {digest[:16]}…; "
            f"reference time {reference_time.isoformat(timespec='seconds')}",
            pack_digest=digest,
        )
        with run.progress(f"gate 2: {2 * len(queries)} paired retrievals", 1) as bar:
            holdout = frozen.run_full_retrieval_holdout(
                queries,
                user_id=run.user_id,
                scopes=run.scopes,
                proposal=proposal,
                reference_time=reference_time,
                limit=HOLDOUT_LIMIT,
                memory_artifact_sha256=digest,
            )
            bar.update(1)
    cfg = holdout.config
    run.step(
        "gate 2",
        holdout.decision,
        f"{holdout.coverage['query_groups']} groups; NDCG@{cfg.k} {holdout.baseline_ndcg:.3f} → "
        f"{holdout.candidate_ndcg:.3f} ({holdout.ndcg_gain:+.3f} "
        f"{_interval(holdout.ndcg_gain_interval)}, needs ≥ {cfg.min_ndcg_gain:g}, low > 0); "
        f"recall {holdout.baseline_recall:.3f} → {holdout.candidate_recall:.3f}; regressions "
        f"{holdout.regression_fraction:.1%} (≤ {cfg.max_regression_fraction:.0%}); "
        f"W/T/L {_wtl(holdout.win_tie_loss)}; p {_p(holdout.randomization_p_value)}",
        input_checksum=holdout.input_checksum,
        coverage=holdout.coverage,
    )
    run.stop_unless(
        holdout.decision, "improved_full_retrieval", "gate 2", proposal=proposal, holdout=holdout
    )
    return holdout


def _showcase_query(workload: Workload, holdout: FullRetrievalEvaluation) -> str:
    """The holdout query whose group gained most (the first such group on ties)."""
    best = max(holdout.queries, key=lambda q: q.candidate_ndcg - q.baseline_ndcg)
    return next(q.text for q in workload.holdout if q.group == best.group_id)


def _pointer(
    run: _Run, proposal: LearningEvaluation, holdout: FullRetrievalEvaluation
) -> tuple[RankingProfile, dict[str, str], list[str]]:
    """Create the profile in the live pack, activate, deactivate and roll back, probing each."""
    statuses: dict[str, str] = {}
    transitions: list[str] = []
    probe = _showcase_query(run.workload, holdout)
    with MemoryClient(run.root, config=run.config) as memory:
        profile = memory.create_ranking_profile(proposal, holdout, user_id=run.user_id)
        pid = str(profile.profile_id)
        run.step("profile", "created", f"profile {pid}", profile_id=pid)

        def probe_status(key: str) -> str:
            response = memory.retrieve(probe, user_id=run.user_id, scope=run.workload.scope)
            meta = response.metadata
            statuses[key] = str(meta.ranking_profile_status)
            top = response.results[0].node.content if response.results else "(no results)"
            return f"retrieve {probe!r} → status {meta.ranking_profile_status}, top: {top}"

        state = memory.activate_ranking_profile(pid, user_id=run.user_id)
        transitions.append(state.action)
        run.step("activate", f"active {pid[:8]}", probe_status("activated"))
        change = memory.deactivate_ranking_profile(user_id=run.user_id, scopes=run.scopes)
        transitions.append("none" if change is None else change.action)
        run.step("deactivate", "base scoring", probe_status("deactivated"))
        state = memory.rollback_ranking_profile(pid, user_id=run.user_id, scopes=run.scopes)
        transitions.append(state.action)
        run.step("rollback", f"active {pid[:8]}", probe_status("rolled_back"))
        history = memory.list_ranking_profile_history(user_id=run.user_id, scopes=run.scopes)
    run.write_report(proposal, holdout=holdout, profile=profile, history=history)
    run.step("report", "written", str(run.report_path))
    return profile, statuses, transitions


def run_demo(
    path: str | Path,
    *,
    embedder: str = "minilm",
    seed: int = 0,
    user_id: str = DEMO_USER,
    report: str | Path | None = None,
    on_step: Callable[[DemoStep], None] | None = None,
    progress: ProgressFactory = silent_progress,
) -> DemoSummary:
    """Run the whole learning workflow in a fresh demo pack at ``path``.

    Args:
        path: the demo pack directory; it must be empty, missing, or an earlier demo pack
            (which is replaced).
        embedder: ``"minilm"`` (default) or ``"hash"`` (fast, no weights).
        seed: the workload seed.
        user_id: the owner of every memory and judgment.
        report: where to write the HTML report (default ``path/learning.html``).
        on_step: called with each finished step (the CLI prints it as a table row).
        progress: makes progress bars for the long steps.

    Raises:
        InvalidInputError: ``path`` is not safe to replace, or an argument is invalid.
        PRMEError: a gate did not pass (the steps so far were reported and the report of the
            evidence so far was written).
    """
    if embedder not in provider_names():
        valid = ", ".join(provider_names())
        raise InvalidInputError("embedder", f"unknown embedder {embedder!r} (valid: {valid})")
    root = Path(path)
    replaced = prepare_directory(root)
    marker = {"seed": seed, "embedder": embedder, "user_id": user_id}
    (root / MARKER_FILE).write_text(json.dumps(marker) + "\n")
    run = _Run(
        root,
        embedder=embedder,
        user_id=user_id,
        report_path=Path(report) if report is not None else root / REPORT_FILE,
        workload=generate_workload(seed),
        on_step=on_step,
        progress=progress,
    )
    run.step(
        "pack",
        "replaced earlier demo" if replaced else "new demo pack",
        f"weighted fusion; embedder {embedder}; workload seed {seed}; owner {user_id}; "
        f"scope {run.workload.scope.value}",
    )
    proposal, ids = _gate1(run)
    holdout = _gate2(run, proposal, ids)
    profile, statuses, transitions = _pointer(run, proposal, holdout)
    return DemoSummary(
        path=str(root),
        frozen_path=str(run.frozen_path),
        report_path=str(run.report_path),
        embedder=embedder,
        seed=seed,
        user_id=user_id,
        scopes=[s.value for s in run.scopes],
        fusion="weighted",
        note=FUSION_NOTE,
        memories=len(ids),
        learning_groups=len(run.workload.learning),
        holdout_groups=len(run.workload.holdout),
        proposal_decision=proposal.decision,
        proposal_input_checksum=proposal.input_checksum,
        multipliers=proposal.multipliers.model_dump(mode="json"),
        holdout_decision=holdout.decision,
        holdout_input_checksum=holdout.input_checksum,
        profile_id=str(profile.profile_id),
        statuses=statuses,
        transitions=transitions,
        steps=run.steps,
        seconds=round(time.perf_counter() - run.started, 3),
    )
