"""create_ranking_profile: one test per evidence rule, idempotency, reads and their integrity.

Every report here is real: made by gate 1 and gate 2 on the golden workload (see
``support.golden``), or by running a gate differently in a copy of that pack.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.golden import HOLDOUT_TIME, OWNER, QUICK, SCOPES, Golden, fresh_pack

from prme import IntegrityError, InvalidInputError, MemoryClient, NotFoundError, RankingMultipliers
from prme.canonical import canonical_json, sha256_hex
from prme.models.holdout import FullRetrievalEvaluation
from prme.models.learning import LearningConfig, LearningEvaluation
from prme.models.profiles import RankingProfile
from prme.models.scope import scope_namespace
from prme.services import profiles
from prme.storage.timeutil import to_us


@pytest.fixture
def pack(gold: Golden, pack_path: Path) -> Path:
    return fresh_pack(gold.memories, pack_path)


@pytest.fixture
def memory(pack: Path, make_client: Callable[..., MemoryClient]) -> MemoryClient:
    return make_client()


@dataclass(frozen=True)
class StandIn:
    """A proposal identity for running a holdout arm with other multipliers."""

    multipliers: RankingMultipliers
    input_checksum: str


def one_query_holdout(
    memory: MemoryClient, gold: Golden, *, user_id: str = OWNER, scopes: Any = SCOPES
) -> FullRetrievalEvaluation:
    """A real holdout of a single query group: ``insufficient_data`` under the default gate."""
    group, text, relevant = gold.holdout_queries()[0]
    return memory.run_full_retrieval_holdout(
        [(group, text, relevant)],
        user_id=user_id,
        scopes=scopes,
        proposal=gold.proposal,
        reference_time=HOLDOUT_TIME,
    )


def rejected(memory: MemoryClient, *args: Any, **kwargs: Any) -> InvalidInputError:
    kwargs.setdefault("user_id", OWNER)
    with pytest.raises(InvalidInputError) as error:
        memory.create_ranking_profile(*args, **kwargs)
    return error.value


# ------------------------------------------------------------------------ rules, in order
def test_rule_owner(memory: MemoryClient, gold: Golden) -> None:
    error = rejected(memory, gold.proposal, gold.holdout, user_id="bob")
    assert error.field == "proposal.user_id"
    assert "must belong to its owner" in str(error)
    bobs = one_query_holdout(memory, gold, user_id="bob")
    error = rejected(memory, gold.proposal, bobs)
    assert error.field == "holdout.user_id"
    assert "must belong to its owner" in str(error)


def test_rule_exact_scope_set(memory: MemoryClient, gold: Golden) -> None:
    # Both positive; the proposal is unfiltered, the holdout project-scoped.
    error = rejected(memory, gold.unfiltered_proposal, gold.holdout)
    assert (error.field, "must match its scopes" in str(error)) == ("holdout.scopes", True)
    unfiltered = one_query_holdout(memory, gold, scopes=None)
    error = rejected(memory, gold.proposal, unfiltered)
    assert "must match its scopes" in str(error)


def test_rule_results_surface(memory: MemoryClient, gold: Golden) -> None:
    context = memory.evaluate_learning(user_id=OWNER, scopes=SCOPES, surface="context")
    assert context.surface == "context"
    error = rejected(memory, context, gold.holdout)
    assert (error.field, "must match its surface" in str(error)) == ("proposal.surface", True)


def test_rule_positive_proposal(memory: MemoryClient, gold: Golden) -> None:
    unproven = memory.evaluate_learning(
        user_id=OWNER, scopes=SCOPES, config=LearningConfig(min_training_queries=1000)
    )
    assert unproven.decision == "insufficient_data"
    error = rejected(memory, unproven, gold.holdout)
    assert error.field == "proposal.decision"
    assert "positive proposal evaluation" in str(error)


def test_rule_positive_holdout(memory: MemoryClient, gold: Golden) -> None:
    single = one_query_holdout(memory, gold)
    assert single.decision == "insufficient_data"
    error = rejected(memory, gold.proposal, single)
    assert error.field == "holdout.decision"
    assert "positive full-retrieval holdout" in str(error)


def test_rule_holdout_names_the_proposal(memory: MemoryClient, gold: Golden) -> None:
    # Both positive, but the holdout evaluated the weak proposal.
    error = rejected(memory, gold.proposal, gold.weak_holdout)
    assert error.field == "holdout.proposal_input_checksum"
    assert "identify its proposal" in str(error)


def test_rule_multiplier_agreement(memory: MemoryClient, gold: Golden) -> None:
    # A positive holdout that names the proposal but ran other candidate multipliers.
    other = StandIn(gold.chained_proposal.multipliers, gold.proposal.input_checksum)
    holdout = memory.run_full_retrieval_holdout(
        gold.holdout_queries()[:30],
        user_id=OWNER,
        scopes=SCOPES,
        proposal=other,
        reference_time=HOLDOUT_TIME,
        config=QUICK,
    )
    assert holdout.decision == "improved_full_retrieval"
    error = rejected(memory, gold.proposal, holdout)
    assert error.field == "holdout.candidate_multipliers"
    assert "agree on multipliers" in str(error)


def test_rule_non_neutral_baseline_needs_baseline_profile_id(
    memory: MemoryClient, gold: Golden
) -> None:
    error = rejected(memory, gold.chained_proposal, gold.chained_holdout)
    assert error.field == "baseline_profile_id"
    assert "non-unity holdout baseline requires baseline_profile_id" in str(error)


def test_rule_baseline_profile_must_exist_for_owner_and_scopes(
    memory: MemoryClient, gold: Golden
) -> None:
    args = (gold.chained_proposal, gold.chained_holdout)
    error = rejected(memory, *args, baseline_profile_id=uuid.uuid4())
    assert (error.field, "holdout baseline is unavailable" in str(error)) == (
        "baseline_profile_id",
        True,
    )
    unfiltered = memory.create_ranking_profile(
        gold.unfiltered_proposal, gold.unfiltered_holdout, user_id=OWNER
    )
    error = rejected(memory, *args, baseline_profile_id=unfiltered.profile_id)
    assert "holdout baseline is unavailable" in str(error)
    main = memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
    error = rejected(memory, *args, baseline_profile_id=str(main.profile_id))
    assert "holdout baseline multipliers differ" in str(error)
    weak = memory.create_ranking_profile(gold.weak_proposal, gold.weak_holdout, user_id=OWNER)
    assert rejected(memory, *args, user_id="bob", baseline_profile_id=weak.profile_id).field == (
        "proposal.user_id"
    )
    chained = memory.create_ranking_profile(
        *args, user_id=OWNER, baseline_profile_id=weak.profile_id
    )
    assert chained.baseline_profile_id == weak.profile_id


def test_rule_attestation_from_an_unrelated_pack(
    gold: Golden, tmp_path: Path, make_client: Callable[..., MemoryClient]
) -> None:
    unrelated = make_client(tmp_path / "unrelated")
    error = rejected(unrelated, gold.proposal, gold.holdout)
    assert error.field == "proposal.attestation"
    assert "attestation" in str(error)
    assert unrelated.list_ranking_profiles(user_id=OWNER) == []


def test_rule_attestation_of_a_hand_built_report(memory: MemoryClient, gold: Golden) -> None:
    for forged in (None, "0" * 64, gold.proposal.attestation):
        holdout = gold.holdout.model_copy(update={"attestation": forged})
        error = rejected(memory, gold.proposal, holdout)
        assert (error.field, "attestation" in str(error)) == ("holdout.attestation", True)
    unsigned = gold.proposal.model_dump(mode="json")
    del unsigned["attestation"]
    assert rejected(memory, unsigned, gold.holdout).field == "proposal.attestation"


def test_rule_attestation_of_an_edited_report(memory: MemoryClient, gold: Golden) -> None:
    # Edits that report verification accepts (nothing internal is inconsistent).
    proposal = gold.proposal.model_dump(mode="json")
    proposal["training_loss_after"] = gold.proposal.training_loss_after * 0.5  # type: ignore[operator]
    error = rejected(memory, proposal, gold.holdout)
    assert (error.field, "attestation" in str(error)) == ("proposal.attestation", True)
    holdout = gold.holdout.model_dump(mode="json")
    holdout["randomization_p_value"] = 0.0
    error = rejected(memory, gold.proposal, holdout)
    assert (error.field, "attestation" in str(error)) == ("holdout.attestation", True)
    # Editing a field that verification checks fails it first (before the attestation).
    broken = gold.holdout.model_dump(mode="json")
    broken["ndcg_gain"] = 0.5
    assert rejected(memory, gold.proposal, broken).field.startswith("holdout")


def test_rule_holdout_groups_disjoint_from_proposal_groups(
    gold: Golden, tmp_path: Path, make_client: Callable[..., MemoryClient], memory: MemoryClient
) -> None:
    # Evaluated in a copy made before gate 1 (same secret, the proposal is not in it), so gate 2
    # cannot check disjointness; creation must.
    copy = make_client(fresh_pack(gold.before_gate1, tmp_path / "before"))
    learned = gold.workload.learning[0]
    queries = [
        *gold.holdout_queries()[:24],
        (learned.group, learned.text, [gold.ids[learned.relevant_keys[0]]]),
    ]
    holdout = copy.run_full_retrieval_holdout(
        queries,
        user_id=OWNER,
        scopes=SCOPES,
        proposal=gold.chained_proposal,
        reference_time=HOLDOUT_TIME,
        config=QUICK,
    )
    assert holdout.decision == "improved_full_retrieval"
    error = rejected(memory, gold.chained_proposal, holdout)
    assert error.field == "holdout.queries"
    assert "disjoint" in str(error)


# -------------------------------------------------------------------------- creation itself
def test_create_embeds_evidence_and_never_activates(
    memory: MemoryClient, gold: Golden, make_client: Callable[..., MemoryClient]
) -> None:
    rrf = make_client(fusion="rrf")  # creation never checks applicability
    profile = rrf.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
    assert profile.user_id == OWNER and profile.surface == "results"
    assert profile.scopes == gold.holdout.scopes
    assert profile.baseline_profile_id is None
    assert profile.multipliers == gold.proposal.multipliers == gold.holdout.candidate_multipliers
    assert (profile.proposal, profile.holdout) == (gold.proposal, gold.holdout)
    assert profile.application.feature_identity_sha256 == gold.holdout.feature_identity_sha256
    assert profile.application.base_scoring == gold.holdout.base_scoring
    assert profile.checksum == sha256_hex(canonical_json(profile))
    assert memory.get_active_ranking_profile(user_id=OWNER, scopes=SCOPES) is None
    assert memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES) == []
    assert memory.get_ranking_profile(str(profile.profile_id), user_id=OWNER) == profile


def test_create_accepts_report_dicts(memory: MemoryClient, gold: Golden) -> None:
    from_dicts = memory.create_ranking_profile(
        gold.proposal.model_dump(mode="json"),
        json.loads(gold.holdout.model_dump_json()),
        user_id=OWNER,
    )
    assert (from_dicts.proposal, from_dicts.holdout) == (gold.proposal, gold.holdout)


def test_create_takes_stored_reports_by_input_checksum(
    gold: Golden, tmp_path: Path, make_client: Callable[..., MemoryClient]
) -> None:
    memory = make_client(fresh_pack(gold.root / "frozen", tmp_path / "frozen"))  # both reports
    proposal, holdout = gold.proposal.input_checksum, gold.holdout.input_checksum
    assert memory.get_full_retrieval_evaluation(holdout, user_id=OWNER) == gold.holdout
    by_checksum = memory.create_ranking_profile(
        user_id=OWNER, proposal_input_checksum=proposal, holdout_input_checksum=holdout
    )
    assert (by_checksum.proposal, by_checksum.holdout) == (gold.proposal, gold.holdout)
    mixed = memory.create_ranking_profile(
        gold.proposal, user_id=OWNER, holdout_input_checksum=holdout
    )
    assert mixed.multipliers == by_checksum.multipliers
    whole = {"holdout": gold.holdout}
    both = {"proposal": gold.proposal, "holdout_input_checksum": holdout, **whole}
    for kwargs, field in (
        ({"holdout_input_checksum": holdout}, "proposal_input_checksum"),  # neither
        ({**both, "proposal_input_checksum": proposal}, "proposal_input_checksum"),  # both
        (
            {"proposal_input_checksum": proposal, "holdout_input_checksum": holdout, **whole},
            "holdout_input_checksum",
        ),
        ({"proposal_input_checksum": proposal.upper(), **whole}, "proposal_input_checksum"),
        ({"proposal_input_checksum": 7, **whole}, "proposal_input_checksum"),
    ):
        assert rejected(memory, **kwargs).field == field
    named = {"proposal_input_checksum": proposal, "holdout_input_checksum": holdout}
    for user_id, kwargs, field in (
        (OWNER, {"proposal_input_checksum": "0" * 64, **whole}, "proposal"),
        ("bob", named, "proposal"),  # another owner's reports look exactly like missing ones
        ("bob", {"proposal": gold.proposal, "holdout_input_checksum": holdout}, "holdout"),
    ):
        with pytest.raises(NotFoundError) as missing:
            memory.create_ranking_profile(user_id=user_id, **kwargs)
        assert missing.value.field == f"{field}_input_checksum"
        assert str(missing.value).startswith(f"{field}_input_checksum: ")
    assert len(memory.list_ranking_profiles(user_id=OWNER)) == 2
    assert memory.list_ranking_profiles(user_id="bob") == []


def test_profile_id_makes_creation_idempotent(memory: MemoryClient, gold: Golden) -> None:
    chosen = uuid.uuid4()
    first = memory.create_ranking_profile(
        gold.proposal, gold.holdout, user_id=OWNER, profile_id=chosen
    )
    retry = memory.create_ranking_profile(
        gold.proposal, gold.holdout, user_id=OWNER, profile_id=str(chosen)
    )
    assert retry == first and retry.created_at == first.created_at
    assert first.profile_id == chosen
    error = rejected(memory, gold.weak_proposal, gold.weak_holdout, profile_id=chosen)
    assert error.field == "profile_id"
    assert "profile_id already identifies a different ranking profile" in str(error)
    assert [p.profile_id for p in memory.list_ranking_profiles(user_id=OWNER)] == [chosen]


def test_ids_must_be_uuids(memory: MemoryClient, gold: Golden) -> None:
    assert rejected(memory, gold.proposal, gold.holdout, profile_id="nope").field == "profile_id"
    error = rejected(memory, gold.proposal, gold.holdout, baseline_profile_id=7)
    assert error.field == "baseline_profile_id"
    assert rejected(memory, "not a report", gold.holdout).field.startswith("proposal")
    assert rejected(memory, gold.proposal, 42).field == "holdout"


# -------------------------------------------------------------------------------- reading
def test_list_is_owner_bound_newest_first_and_paged(memory: MemoryClient, gold: Golden) -> None:
    made = [
        memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER).profile_id
        for _ in range(3)
    ]
    newest_first = list(reversed(made))
    assert [p.profile_id for p in memory.list_ranking_profiles(user_id=OWNER)] == newest_first
    page = memory.list_ranking_profiles(user_id=OWNER, limit=2)
    assert [p.profile_id for p in page] == newest_first[:2]
    rest = memory.list_ranking_profiles(user_id=OWNER, limit=2, after_id=page[-1].profile_id)
    assert [p.profile_id for p in rest] == newest_first[2:]
    assert memory.list_ranking_profiles(user_id=OWNER, after_id=str(made[0])) == []
    assert memory.list_ranking_profiles(user_id="bob") == []
    with pytest.raises(NotFoundError):
        memory.list_ranking_profiles(user_id="bob", after_id=made[0])
    for bad in (0, 1001, True):
        with pytest.raises(InvalidInputError, match="limit"):
            memory.list_ranking_profiles(user_id=OWNER, limit=bad)


def test_operation_ids_match_the_reference_vectors() -> None:
    assert profiles.profile_op_id("alice", uuid.UUID(int=1)) == (
        "9f41e020-7384-59fc-be0c-1c7daadb80c5"
    )
    assert profiles.state_op_id("alice", uuid.UUID(int=1)) == (
        "2ad195c0-57f4-58a6-822c-78253c837650"
    )


def append_profile_op(
    memory: MemoryClient, *, owner: str, profile_id: uuid.UUID, payload: str, namespace: str
) -> None:
    memory.engine.store.append_op(
        op_id=profiles.profile_op_id(owner, profile_id),
        op_type=profiles.PROFILE_OP,
        user_id=owner,
        target_id=str(profile_id),
        namespace=namespace,
        created_at_us=to_us(HOLDOUT_TIME),
        payload=payload,
    )


def test_reads_verify_owner_identity_scopes_and_canonical_form(
    memory: MemoryClient, gold: Golden
) -> None:
    profile = memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
    payload = canonical_json(profile)
    namespace = scope_namespace(profile.scopes)
    # Alice's record filed under bob's key.
    append_profile_op(
        memory, owner="bob", profile_id=profile.profile_id, payload=payload, namespace=namespace
    )
    with pytest.raises(IntegrityError, match="owner"):
        memory.get_ranking_profile(profile.profile_id, user_id="bob")
    # Alice's record filed under another id.
    other = uuid.uuid4()
    append_profile_op(memory, owner=OWNER, profile_id=other, payload=payload, namespace=namespace)
    with pytest.raises(IntegrityError, match="identity mismatch"):
        memory.get_ranking_profile(other, user_id=OWNER)
    # A valid record in another scope set's namespace.
    moved = profile.model_copy(update={"profile_id": uuid.uuid4()})
    append_profile_op(
        memory,
        owner=OWNER,
        profile_id=moved.profile_id,
        payload=canonical_json(moved),
        namespace=scope_namespace(None),
    )
    with pytest.raises(IntegrityError, match="scope mismatch"):
        memory.get_ranking_profile(moved.profile_id, user_id=OWNER)
    # The same content, not in canonical form.
    loose = profile.model_copy(update={"profile_id": uuid.uuid4()})
    append_profile_op(
        memory,
        owner=OWNER,
        profile_id=loose.profile_id,
        payload=json.dumps(json.loads(canonical_json(loose)), indent=1),
        namespace=namespace,
    )
    with pytest.raises(IntegrityError, match="checksum mismatch"):
        memory.get_ranking_profile(loose.profile_id, user_id=OWNER)
    with pytest.raises(IntegrityError):
        memory.list_ranking_profiles(user_id=OWNER)
    assert memory.get_ranking_profile(profile.profile_id, user_id=OWNER) == profile


@pytest.mark.sqlite_only
def test_a_record_changed_on_disk_is_detected(
    memory: MemoryClient, gold: Golden, pack: Path
) -> None:
    profile = memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
    memory.close()
    edited = canonical_json(profile).replace('"surface":"results"', '"surface":"result5"', 1)
    with sqlite3.connect(pack / "pack.sqlite3") as db:
        db.execute("DROP TRIGGER oplog_append_only_update")
        db.execute(
            "UPDATE oplog SET payload = ? WHERE op_id = ?",
            (edited, profiles.profile_op_id(OWNER, profile.profile_id)),
        )
    db.close()
    reopened = MemoryClient(pack, config=memory.config)
    try:
        with pytest.raises(IntegrityError, match="checksum"):
            reopened.get_ranking_profile(profile.profile_id, user_id=OWNER)
    finally:
        reopened.close()


def test_the_model_rechecks_the_evidence_rules(gold: Golden) -> None:
    fields: dict[str, Any] = {
        "profile_id": uuid.uuid4(),
        "user_id": OWNER,
        "scopes": gold.holdout.scopes,
        "created_at": HOLDOUT_TIME,
        "multipliers": gold.proposal.multipliers,
        "proposal": gold.proposal,
        "holdout": gold.holdout,
    }
    assert RankingProfile(**fields).application.profile_id == fields["profile_id"]
    for change, fragment in (
        ({"user_id": "bob"}, "must belong to its owner"),
        ({"holdout": gold.weak_holdout}, "identify its proposal"),
        ({"multipliers": RankingMultipliers()}, "agree on multipliers"),
        ({"scopes": None}, "must match its scopes"),
        ({"proposal": gold.chained_proposal, "holdout": gold.chained_holdout}, "non-unity"),
    ):
        with pytest.raises(ValueError, match=fragment):
            RankingProfile(**{**fields, **change})
    assert isinstance(gold.proposal, LearningEvaluation)
