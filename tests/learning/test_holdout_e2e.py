"""Gate 2 through MemoryClient on a real pack: paired retrievals, frozen packs, persistence."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from seed_blocks import BLOCK_3 as SEED_HOLDOUT_BLOCK

import prme
from prme import (
    FrozenPackError,
    IntegrityError,
    InvalidInputError,
    MemoryClient,
    RankingMultipliers,
    Scope,
)
from prme.canonical import canonical_json
from prme.models.holdout import FullRetrievalEvaluation, FullRetrievalTrial
from prme.models.relevance import RelevanceSubmission
from prme.services import learning, relevance, reports
from prme.services.receipts import RECEIPT_OP

CLOCK = datetime(2026, 9, 14, tzinfo=UTC)
# Confidence predicts relevance in the workload below; the candidate leans on it.
HELPFUL = RankingMultipliers(confidence=4.0, semantic=0.25, lexical=0.25, graph=0.25)
NEUTRAL = RankingMultipliers()
PROPOSAL_CHECKSUM = "f" * 64
ARTIFACT = "ab" * 32


@dataclass(frozen=True)
class Proposal:
    """What a holdout uses from a gate-1 report: its multipliers and input checksum."""

    multipliers: RankingMultipliers
    input_checksum: str = PROPOSAL_CHECKSUM


def build_workload(client: MemoryClient, groups: int = 30) -> list[tuple[str, str, list[str]]]:
    """Per group one current fact (confidence 0.95, worded unlike the question) and three stale
    notes (confidence 0.1) phrased like the question: base scoring ranks the stale notes first."""
    items: list[dict[str, Any]] = []
    for g in range(groups):
        token = f"kelvor{g}"
        items.append(
            {
                "content": f"the {token} archive moved to cold storage last spring",
                "scope": "project",
                "confidence": 0.95,
            }
        )
        items += [
            {
                "content": f"where is the {token} archive kept? the {token} archive kept, note {j}",
                "scope": "project",
                "confidence": 0.1,
            }
            for j in range(3)
        ]
    ids = client.store_many(items, user_id="alice")
    return [
        (f"archive-{g:02d}", f"Where is the kelvor{g} archive kept?", [ids[4 * g]])
        for g in range(groups)
    ]


def paired(
    client: MemoryClient,
    query: str = "Where is the kelvor0 archive kept?",
    *,
    baseline: dict[str, Any] | None = None,
    candidate: dict[str, Any] | None = None,
) -> tuple[str, str]:
    common: dict[str, Any] = {
        "user_id": "alice",
        "scope": Scope.PROJECT,
        "reference_time": CLOCK,
        "limit": 20,
        "include_cross_scope": False,
    }
    b = client.retrieve(query, **{**common, **(baseline or {})})
    c = client.retrieve(query, **{**common, "ranking_multipliers": HELPFUL, **(candidate or {})})
    return str(b.metadata.request_id), str(c.metadata.request_id)


def trial(ids: tuple[str, str], relevant: list[str], group: str = "g") -> FullRetrievalTrial:
    return FullRetrievalTrial(
        group_id=group,
        baseline_request_id=ids[0],
        candidate_request_id=ids[1],
        relevant_node_ids=tuple(relevant),
    )


def gate2(client: MemoryClient, trials: list[Any], **overrides: Any) -> FullRetrievalEvaluation:
    kwargs: dict[str, Any] = {
        "user_id": "alice",
        "scopes": [Scope.PROJECT],
        "proposal_input_checksum": PROPOSAL_CHECKSUM,
        "memory_artifact_sha256": ARTIFACT,
        "candidate_multipliers": HELPFUL,
    }
    kwargs.update(overrides)
    return client.evaluate_full_retrieval(trials, **kwargs)


def rejects(client: MemoryClient, trials: list[Any], match: str, field: str, **kw: Any) -> None:
    with pytest.raises(InvalidInputError, match=match) as info:
        gate2(client, trials, **kw)
    assert info.value.field == field


@pytest.fixture
def workload(client: MemoryClient) -> list[tuple[str, str, list[str]]]:
    return build_workload(client)


# ------------------------------------------------------------------ the seed


def test_seed_holdout_block_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not hasattr(prme, "FullRetrievalTrial"):
        pytest.skip("prme does not export FullRetrievalTrial yet (added in prme/__init__.py)")
    monkeypatch.setenv("PRME_SCORING__FUSION", "weighted")
    monkeypatch.setenv("PRME_EMBEDDING__PROVIDER", "hash")
    monkeypatch.chdir(tmp_path)
    with MemoryClient("./frozen-holdout-pack") as memory:
        known = memory.store("I use a Celestron C8 telescope.", user_id="alice", scope="project")
        memory.store("The garden needs watering on Sundays.", user_id="alice", scope="project")
        digest = memory.pack_digest()
    namespace: dict[str, Any] = {
        "MemoryClient": MemoryClient,
        "Scope": Scope,
        "proposal": Proposal(RankingMultipliers(confidence=2.0)),
        "known_relevant_node_id": known,
        "frozen_fixture_sha256": digest,
    }
    exec(SEED_HOLDOUT_BLOCK, namespace)
    holdout = namespace["holdout"]
    assert holdout.decision == "insufficient_data"
    assert holdout.ndcg_gain_interval is None
    assert holdout.memory_artifact_sha256 == holdout.pack_digest == digest
    assert holdout.queries[0].normalized_queries == ("what telescope do i use?",)


# ------------------------------------------------------------ evaluations


def test_holdout_on_a_workload_where_the_candidate_helps(
    client: MemoryClient, workload: list[tuple[str, str, list[str]]]
) -> None:
    report = client.run_full_retrieval_holdout(
        workload,
        user_id="alice",
        scopes=[Scope.PROJECT],
        proposal=Proposal(HELPFUL),
        reference_time=CLOCK,
    )
    assert report.decision == "improved_full_retrieval"
    assert report.win_tie_loss["wins"] >= 25 and report.win_tie_loss["losses"] == 0
    assert report.candidate_ndcg == 1.0 and report.ndcg_gain >= 0.5
    assert report.candidate_recall >= report.baseline_recall
    assert report.ndcg_gain_interval is not None and report.ndcg_gain_interval[0] > 0
    assert report.randomization_p_value is not None and report.randomization_p_value < 0.01
    assert report.memory_artifact_sha256 == report.pack_digest == client.pack_digest()
    assert report.feature_identity == client.engine.feature_identity()
    assert report.base_scoring == client.config.scoring
    assert report.coverage == {"trials": 30, "query_groups": 30, "relevant_nodes": 30}
    # every receipt records the pack identity, and the report carries it
    receipt = client.get_retrieval_receipt(report.trials[0].baseline_request_id, user_id="alice")
    assert receipt is not None
    assert (report.pack_id, report.write_seq) == (receipt.pack.pack_id, receipt.pack.write_seq)
    # the report is attested by this pack and persisted; reading it back gives the same bytes
    assert report.attestation is not None and reports.verify(client.engine, report)
    stored = client.get_full_retrieval_evaluation(report.input_checksum, user_id="alice")
    assert stored is not None and canonical_json(stored) == canonical_json(report)
    assert client.get_full_retrieval_evaluation(report.input_checksum, user_id="bob") is None
    with pytest.raises(InvalidInputError) as info:
        client.get_full_retrieval_evaluation(report.input_checksum.upper(), user_id="alice")
    assert info.value.field == "input_checksum"


def test_equal_arms_are_no_improvement(
    client: MemoryClient, workload: list[tuple[str, str, list[str]]]
) -> None:
    report = client.run_full_retrieval_holdout(
        workload,
        user_id="alice",
        scopes=Scope.PROJECT,
        proposal=Proposal(NEUTRAL),
        reference_time=CLOCK,
        memory_artifact_sha256=ARTIFACT,
    )
    assert report.decision == "no_improvement"
    assert report.ndcg_gain == 0.0 and report.win_tie_loss["ties"] == 30
    assert report.memory_artifact_sha256 == ARTIFACT != report.pack_digest


def test_explicit_baseline_multipliers(
    client: MemoryClient, workload: list[tuple[str, str, list[str]]]
) -> None:
    # baseline = the helpful multipliers, candidate = neutral: the candidate is worse
    report = client.run_full_retrieval_holdout(
        workload[:20],
        user_id="alice",
        scopes=[Scope.PROJECT],
        proposal=Proposal(NEUTRAL),
        reference_time=CLOCK,
        baseline_multipliers=HELPFUL,
    )
    assert report.baseline_multipliers == HELPFUL
    assert report.ndcg_gain < 0 and report.decision == "no_improvement"


def test_manual_trials_in_any_order_give_identical_reports(
    client: MemoryClient, workload: list[tuple[str, str, list[str]]]
) -> None:
    trials = [trial(paired(client, q), rel, group) for group, q, rel in workload[:5]]
    first = gate2(client, trials)
    second = gate2(client, [t.model_dump(mode="json") for t in reversed(trials)])
    assert first.decision == "insufficient_data"
    assert canonical_json(first) == canonical_json(second)


def test_relevant_node_ids_accept_uuid_strings(
    client: MemoryClient, workload: list[tuple[str, str, list[str]]]
) -> None:
    group, query, relevant = workload[0]
    report = gate2(client, [trial(paired(client, query), relevant, group)])
    assert report.queries[0].candidate_ndcg == 1.0
    assert report.queries[0].baseline_ndcg < 1.0


# ------------------------------------------------------------ rejections


def test_inputs_are_validated_once(client: MemoryClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The service parses the trials and checks the owner and digests before loading the
    receipts; the gate takes them as parsed instead of validating them again."""
    from prme.learning import gate2 as gate

    build_workload(client, 1)
    t = trial(paired(client), [str(uuid.UUID(int=1))])
    calls: dict[str, list[str]] = {"parse_trials": [], "require_digest": [], "owner": []}
    real = gate.parse_trials, gate.require_digest, gate.require_owner

    def parse_trials(trials: Any) -> Any:
        calls["parse_trials"].append("trials")
        return real[0](trials)

    def require_digest(value: object, field: str) -> str:
        calls["require_digest"].append(field)
        return real[1](value, field)

    def require_owner(user_id: object, field: str = "user_id") -> str:
        calls["owner"].append(field)
        return real[2](user_id, field)

    monkeypatch.setattr(gate, "parse_trials", parse_trials)
    monkeypatch.setattr(gate, "require_digest", require_digest)
    monkeypatch.setattr(gate, "require_owner", require_owner)
    report = gate2(client, [t.model_dump(mode="json")])
    assert report.coverage["query_groups"] == 1
    assert calls == {
        "parse_trials": ["trials"],
        "require_digest": ["proposal_input_checksum", "memory_artifact_sha256", "pack_digest"],
        "owner": ["user_id"],
    }




def test_trial_count_and_digests(client: MemoryClient) -> None:
    build_workload(client, 1)
    rejects(client, [], "trials must contain from 1 to 10000 pairs", "trials")
    t = trial(paired(client), [str(uuid.UUID(int=1))])
    rejects(client, [t], "SHA-256", "memory_artifact_sha256", memory_artifact_sha256="AB" * 32)
    rejects(client, [t], "SHA-256", "proposal_input_checksum", proposal_input_checksum="x")


def test_missing_and_foreign_receipts(client: MemoryClient) -> None:
    build_workload(client, 1)
    client.store("kelvor0 archive", user_id="bob", scope="project")
    b, _ = paired(client)
    foreign = client.retrieve(
        "Where is the kelvor0 archive kept?",
        user_id="bob",
        scope=Scope.PROJECT,
        reference_time=CLOCK,
        include_cross_scope=False,
        ranking_multipliers=HELPFUL,
    )
    relevant = [b]  # any UUID
    never = "00000000-0000-4000-8000-000000000000"
    rejects(client, [trial((b, never), relevant)], "references a missing receipt", "trials")
    foreign_id = str(foreign.metadata.request_id)
    rejects(client, [trial((b, foreign_id), relevant)], "references a missing receipt", "trials")


def test_a_receipt_cannot_enter_two_trials(client: MemoryClient) -> None:
    build_workload(client, 2)
    first = paired(client)
    second = paired(client, "Where is the kelvor1 archive kept?")
    reused = trial((first[0], second[1]), [first[0]], "h")
    for match in ("request_ids must be unique", "cannot enter more than one"):
        rejects(client, [trial(first, [first[0]]), reused], match, "trials")


def test_scopes_must_match(client: MemoryClient) -> None:
    build_workload(client, 1)
    t = trial(paired(client), [str(uuid.UUID(int=1))])
    rejects(client, [t], "must match the requested scopes", "scopes", scopes=None)
    rejects(client, [t], "must match the requested scopes", "scopes", scopes=["personal"])


@pytest.mark.parametrize(
    ("change", "field", "match"),
    [
        ({"reference_time": CLOCK + timedelta(hours=1)}, "reference_time", "same clock"),
        ({"limit": 10}, "result_limit", "same clock, filters, limits, scoring, and packing"),
        ({"token_budget": 50}, "packing", "same clock, filters, limits, scoring, and packing"),
        ({"min_score": 0.05}, "min_score", "same clock, filters, limits, scoring, and packing"),
        ({"time_from": CLOCK - timedelta(days=400)}, "time_from", "same clock"),
        ({"max_per_source": 2}, "execution.inputs.max_per_source", "execution parameters differ"),
        ({"include_cross_scope": True}, "execution.inputs.include_cross_scope", "parameters"),
        ({"knowledge_at": CLOCK}, "execution.inputs.knowledge_at", "execution parameters differ"),
    ],
)
def test_arms_may_differ_only_in_multipliers(
    client: MemoryClient, change: dict[str, Any], field: str, match: str
) -> None:
    build_workload(client, 1)
    ids = paired(client, candidate=change)
    rejects(client, [trial(ids, [ids[0]])], match, field)


def test_queries_must_match(client: MemoryClient) -> None:
    build_workload(client, 1)
    b = client.retrieve(
        "Where is the kelvor0 archive kept?",
        user_id="alice",
        scope=Scope.PROJECT,
        reference_time=CLOCK,
        include_cross_scope=False,
    )
    c = client.retrieve(
        "Which archive is kelvor0?",
        user_id="alice",
        scope=Scope.PROJECT,
        reference_time=CLOCK,
        include_cross_scope=False,
        ranking_multipliers=HELPFUL,
    )
    ids = (str(b.metadata.request_id), str(c.metadata.request_id))
    rejects(client, [trial(ids, [ids[0]])], "same normalized query", "query")


def test_arms_must_use_the_declared_multipliers(client: MemoryClient) -> None:
    build_workload(client, 1)
    ids = paired(client)
    t = trial(ids, [ids[0]])
    rejects(
        client,
        [t],
        "does not use the declared multipliers",
        "candidate_multipliers",
        candidate_multipliers=RankingMultipliers(confidence=3.0),
    )
    rejects(
        client,
        [t],
        "does not use the declared multipliers",
        "baseline_multipliers",
        baseline_multipliers=HELPFUL,
    )


def test_one_query_cannot_sit_in_two_groups(client: MemoryClient) -> None:
    build_workload(client, 1)
    first, second = paired(client), paired(client, "where is the KELVOR0 archive kept?")
    rejects(
        client,
        [trial(first, [first[0]], "a"), trial(second, [first[0]], "b")],
        "different groups",
        "group_id",
    )


# ------------------------------------------------------------ frozen pack


def test_a_write_between_the_arms_is_rejected(client: MemoryClient) -> None:
    build_workload(client, 1)
    b = client.retrieve(
        "Where is the kelvor0 archive kept?",
        user_id="alice",
        scope=Scope.PROJECT,
        reference_time=CLOCK,
        include_cross_scope=False,
    )
    client.store("kelvor0 archive is also mirrored", user_id="alice", scope="project")
    c = client.retrieve(
        "Where is the kelvor0 archive kept?",
        user_id="alice",
        scope=Scope.PROJECT,
        reference_time=CLOCK,
        include_cross_scope=False,
        ranking_multipliers=HELPFUL,
    )
    ids = (str(b.metadata.request_id), str(c.metadata.request_id))
    rejects(
        client,
        [trial(ids, [ids[0]])],
        "a memory write happened during the holdout",
        "pack.write_seq",
    )


def test_a_write_between_trials_is_rejected(client: MemoryClient) -> None:
    build_workload(client, 2)
    first = paired(client)
    # any write to the owner's memories counts, even outside the holdout's scopes
    client.store("an unrelated note", user_id="alice", scope="personal")
    second = paired(client, "Where is the kelvor1 archive kept?")
    rejects(
        client,
        [trial(first, [first[0]], "a"), trial(second, [first[0]], "b")],
        "a memory write happened during the holdout",
        "pack.write_seq",
    )


def test_a_write_after_the_retrievals_is_rejected(client: MemoryClient) -> None:
    build_workload(client, 1)
    ids = paired(client)
    client.delete(client.store("temporary", user_id="alice"), user_id="alice")
    rejects(
        client,
        [trial(ids, [ids[0]])],
        "a memory write happened during the holdout",
        "pack.write_seq",
    )


def test_another_owners_writes_neither_show_nor_block_the_holdout(client: MemoryClient) -> None:
    # Issue 17 item 2: bob's stores between alice's arms, between her trials and after her
    # retrievals cannot change what she retrieved, so her gate 2 accepts the trials.
    workload = build_workload(client, 2)
    arm = {
        "user_id": "alice",
        "scope": Scope.PROJECT,
        "reference_time": CLOCK,
        "limit": 20,
        "include_cross_scope": False,
    }
    query = "Where is the kelvor0 archive kept?"
    b = client.retrieve(query, **arm)
    client.store("the kelvor0 archive is kept by bob", user_id="bob", scope="project")
    c = client.retrieve(query, **arm, ranking_multipliers=HELPFUL)
    first = (str(b.metadata.request_id), str(c.metadata.request_id))
    client.store_many(["bob's kelvor1 archive", "another note"], user_id="bob")
    second = paired(client, "Where is the kelvor1 archive kept?")
    client.delete(client.store("bob's temporary note", user_id="bob"), user_id="bob")
    trials = [trial(first, workload[0][2], "a"), trial(second, workload[1][2], "b")]
    report = gate2(client, trials)
    receipts = [
        client.get_retrieval_receipt(rid, user_id="alice")
        for pair in (first, second)
        for rid in pair
    ]
    assert {(r.schema_version, r.pack.write_seq) for r in receipts if r is not None} == {
        (2, report.write_seq)
    }
    assert report.pack_digest == client.pack_digest()
    # alice's own write still marks the pack as changed under her receipts
    client.store("the kelvor0 archive moved again", user_id="alice", scope="project")
    rejects(client, trials, "a memory write happened during the holdout", "pack.write_seq")


def _legacy_copy(client: MemoryClient, request_id: str) -> str:
    """A schema-1 copy of a stored receipt under a new request id, as packs written before
    per-owner write sequences hold them (``pack.write_seq`` is the pack-wide sequence)."""
    receipt = client.get_retrieval_receipt(request_id, user_id="alice")
    assert receipt is not None and receipt.schema_version == 2
    data = receipt.model_dump(mode="json")
    new_id = str(uuid.uuid4())
    data.update(
        schema_version=1,
        request_id=new_id,
        pack={**data["pack"], "write_seq": client.engine.store.pack_identity().write_seq},
    )
    client.engine.store.append_op(
        op_id=f"receipt:{new_id}",
        op_type=RECEIPT_OP,
        user_id="alice",
        target_id=new_id,
        namespace=None,
        created_at_us=0,
        payload=canonical_json(data),
    )
    return new_id


def test_schema_1_receipts_keep_the_pack_wide_frozen_check(client: MemoryClient) -> None:
    workload = build_workload(client, 1)
    ids = paired(client)
    legacy = (_legacy_copy(client, ids[0]), _legacy_copy(client, ids[1]))
    report = gate2(client, [trial(legacy, workload[0][2])])
    assert report.write_seq == client.engine.store.pack_identity().write_seq
    # a schema-1 receipt cannot pair with a schema-2 one: their sequences count differently
    rejects(
        client,
        [trial((legacy[0], ids[1]), workload[0][2])],
        "count content writes differently",
        "schema_version",
    )
    # the pack-wide sequence cannot tell whose write it was, so any write still blocks them
    client.store("an unrelated note", user_id="bob")
    rejects(
        client,
        [trial(legacy, workload[0][2])],
        "a memory write happened during the holdout",
        "pack.write_seq",
    )
    assert gate2(client, [trial(ids, workload[0][2])]).write_seq == report_seq(client, ids[0])


def report_seq(client: MemoryClient, request_id: str) -> int:
    receipt = client.get_retrieval_receipt(request_id, user_id="alice")
    assert receipt is not None
    return receipt.pack.write_seq


def test_a_frozen_pack_refuses_writes_but_appends_evidence(
    make_client: Callable[..., MemoryClient],
) -> None:
    writer = make_client()
    workload = build_workload(writer, 20)
    victim = workload[0][2][0]
    writer.close()

    memory = make_client(frozen=True)
    before = memory.engine.store.pack_identity()
    digest = memory.pack_digest()
    with pytest.raises(FrozenPackError):
        memory.store("new", user_id="alice")
    with pytest.raises(FrozenPackError):
        memory.store_many(["a", "b"], user_id="alice")
    with pytest.raises(FrozenPackError):
        memory.delete(victim, user_id="alice")
    # retrieval, receipts, judgments and reports still append
    response = memory.retrieve("Where is the kelvor0 archive kept?", user_id="alice")
    assert response.metadata.receipt_persisted
    assert memory.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    record_relevance = getattr(memory, "record_relevance", None)
    submission = RelevanceSubmission(
        request_id=response.metadata.request_id, labels={response.results[0].node.id: True}
    )
    if record_relevance is not None:
        record = record_relevance(submission, user_id="alice")
    else:
        record = relevance.record_relevance(memory.engine, submission, user_id="alice")
    saved = memory.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert saved is not None and record.receipt_checksum == saved.checksum
    report = memory.run_full_retrieval_holdout(
        workload,
        user_id="alice",
        scopes=[Scope.PROJECT],
        proposal=Proposal(HELPFUL),
        reference_time=CLOCK,
    )
    assert report.decision == "improved_full_retrieval"
    assert memory.get_full_retrieval_evaluation(report.input_checksum, user_id="alice") == report
    assert memory.engine.store.pack_identity() == before
    assert memory.pack_digest() == digest == report.pack_digest
    assert report.write_seq == memory.engine.store.owner_write_seq("alice")


@pytest.mark.sqlite_only
def test_a_frozen_copy_shares_pack_id_and_secret(
    make_client: Callable[..., MemoryClient], pack_path: Path, tmp_path: Path
) -> None:
    original = make_client()
    workload = build_workload(original, 20)
    original.close()
    copy_path = tmp_path / "frozen-holdout-pack"
    shutil.copytree(pack_path, copy_path)
    assert sorted(os.listdir(copy_path)) == sorted(os.listdir(pack_path))

    frozen = make_client(copy_path, frozen=True)
    report = frozen.run_full_retrieval_holdout(
        workload,
        user_id="alice",
        scopes=[Scope.PROJECT],
        proposal=Proposal(HELPFUL),
        reference_time=CLOCK,
    )
    source = make_client()
    assert frozen.engine.store.pack_identity() == source.engine.store.pack_identity()
    assert frozen.pack_digest() == source.pack_digest() == report.pack_digest
    # the copy's attestation verifies with the source pack's secret, and the other way round
    assert reports.verify(source.engine, report)
    assert source.engine.store.attest(reports.unattested(report)) == report.attestation
    forged = report.model_copy(update={"attestation": "0" * 64})
    assert not reports.verify(source.engine, forged)
    # an unrelated pack does not share the secret
    stranger = make_client(tmp_path / "other-pack")
    assert not reports.verify(stranger.engine, report)
    # a report signed elsewhere, planted in another pack, does not read back as evidence
    stranger.engine.store.append_op(
        op_id=f"full_retrieval_evaluation:alice:{report.input_checksum}",
        op_type="full_retrieval_evaluation",
        user_id="alice",
        target_id=report.input_checksum,
        namespace=None,
        created_at_us=0,
        payload=canonical_json(report),
    )
    with pytest.raises(IntegrityError, match="attestation"):
        stranger.get_full_retrieval_evaluation(report.input_checksum, user_id="alice")


# ------------------------------------------------------------ disjointness


def _judged_proposal(
    client: MemoryClient, queries: list[tuple[str, str, list[str]]], *, explicit: bool = False
) -> Any:
    """A real gate-1 report over judged retrievals of ``queries`` (persisted in the pack); with
    ``explicit`` every query sits in a caller-named group ``topic-<n>``."""
    groups: dict[str, str] = {}
    for n, (_group, query, relevant) in enumerate(queries):
        response = client.retrieve(query, user_id="alice", scope=Scope.PROJECT)
        labels = {r.node.id: str(r.node.id) in relevant for r in response.results[:4]}
        relevance.record_relevance(
            client.engine,
            RelevanceSubmission(request_id=response.metadata.request_id, labels=labels),
            user_id="alice",
        )
        groups[str(response.metadata.request_id)] = f"topic-{n}"
    return learning.evaluate_learning(
        client.engine,
        user_id="alice",
        scopes=[Scope.PROJECT],
        config={"min_training_queries": 2, "min_validation_queries": 2},
        query_groups=groups if explicit else None,
    )


def test_holdout_must_be_disjoint_from_the_stored_proposal(
    client: MemoryClient, workload: list[tuple[str, str, list[str]]]
) -> None:
    proposal = _judged_proposal(client, workload[:12])
    assert proposal.queries, proposal.decision
    labels = {q.group_label for q in proposal.queries}
    overlapping = next(item for item in workload[:12] if item[1].lower() in labels)
    mixed = [overlapping, *workload[12:]]
    with pytest.raises(InvalidInputError, match="overlaps the proposal's groups") as info:
        client.run_full_retrieval_holdout(
            mixed,
            user_id="alice",
            scopes=[Scope.PROJECT],
            proposal=Proposal(HELPFUL, proposal.input_checksum),
            reference_time=CLOCK,
        )
    assert info.value.field == "query"
    # a holdout group named like a proposal group is rejected as well
    renamed = [(next(iter(labels)), *workload[12][1:]), *workload[13:]]
    with pytest.raises(InvalidInputError, match="overlaps the proposal's groups") as info:
        client.run_full_retrieval_holdout(
            renamed,
            user_id="alice",
            scopes=[Scope.PROJECT],
            proposal=Proposal(HELPFUL, proposal.input_checksum),
            reference_time=CLOCK,
        )
    assert info.value.field == "group_id"
    # the disjoint remainder passes, and lists each group's normalized queries
    report = client.run_full_retrieval_holdout(
        workload[12:],
        user_id="alice",
        scopes=[Scope.PROJECT],
        proposal=Proposal(HELPFUL, proposal.input_checksum),
        reference_time=CLOCK,
    )
    assert report.proposal_input_checksum == proposal.input_checksum
    assert not {n for q in report.queries for n in q.normalized_queries} & labels


# ------------------------------------------------------------ run_full_retrieval_holdout inputs


def test_run_holdout_input_checks(
    client: MemoryClient, workload: list[tuple[str, str, list[str]]]
) -> None:
    common: dict[str, Any] = {
        "user_id": "alice",
        "scopes": [Scope.PROJECT],
        "proposal": Proposal(HELPFUL),
        "reference_time": CLOCK,
    }
    with pytest.raises(InvalidInputError) as info:
        client.run_full_retrieval_holdout(workload, ranking_multipliers=NEUTRAL, **common)
    assert info.value.field == "ranking_multipliers"
    with pytest.raises(InvalidInputError) as info:
        client.run_full_retrieval_holdout([("g", "q")], **common)
    assert info.value.field == "queries[0]"
    with pytest.raises(InvalidInputError, match="from 1 to 10000 pairs"):
        client.run_full_retrieval_holdout([], **common)
    with pytest.raises(InvalidInputError) as info:
        client.run_full_retrieval_holdout(
            workload, **{**common, "reference_time": datetime(2026, 9, 14)}
        )
    assert info.value.field == "reference_time"


def test_a_query_from_an_explicitly_named_proposal_group_is_rejected(
    client: MemoryClient, workload: list[tuple[str, str, list[str]]]
) -> None:
    proposal = _judged_proposal(client, workload[:12], explicit=True)
    assert {q.group_label for q in proposal.queries} <= {f"topic-{n}" for n in range(12)}
    judged = next(
        item for item in workload[:12] if item[1].lower() in proposal.queries[0].normalized_queries
    )
    with pytest.raises(InvalidInputError, match="overlaps the proposal's groups") as info:
        client.run_full_retrieval_holdout(
            [judged, *workload[12:]],
            user_id="alice",
            scopes=[Scope.PROJECT],
            proposal=Proposal(HELPFUL, proposal.input_checksum),
            reference_time=CLOCK,
        )
    assert info.value.field == "query"
