"""SEED-LEARNING.md's five code blocks, copied verbatim, run in order as one user session.

The blocks need a pack with judged retrievals (so gate 1 can pass) and, for blocks 4 and 5, a
passing holdout: the golden pack of test_learning_workflow provides the judgments, and a real
holdout run in the frozen copy provides ``holdout`` after block 3's single-pair example.
"""

from __future__ import annotations

import shutil
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from seed_blocks import BLOCK_1, BLOCK_2, BLOCK_3, BLOCK_4, BLOCK_5
from test_learning_workflow import Golden, fresh_pack, gold  # noqa: F401  (fixture)

from prme import MemoryClient, Scope


def run(block: str, namespace: dict[str, Any]) -> None:
    exec(compile(textwrap.dedent(block), "SEED-LEARNING.md", "exec"), namespace)


def test_seed_session_runs_as_written(
    gold: Golden,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fresh_pack(gold.memories, tmp_path / "memories")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRME_SCORING__FUSION", "weighted")
    monkeypatch.setenv("PRME_EMBEDDING__PROVIDER", "hash")
    namespace: dict[str, Any] = {}

    run(BLOCK_1, namespace)
    run(BLOCK_2, namespace)
    proposal = namespace["proposal"]
    assert proposal.decision == "improved_on_observed_candidates"

    shutil.copytree("memories", "frozen-holdout-pack")
    with MemoryClient("./frozen-holdout-pack", frozen=True) as frozen:
        namespace["frozen_fixture_sha256"] = frozen.pack_digest()
        namespace["known_relevant_node_id"] = frozen.list(user_id="alice", limit=1)[0].id
    run(BLOCK_3, namespace)
    assert namespace["holdout"].decision == "insufficient_data"

    # Blocks 4 and 5 need a holdout that passed: accumulate real groups in the frozen copy.
    with MemoryClient("./frozen-holdout-pack", frozen=True) as frozen:
        namespace["holdout"] = frozen.run_full_retrieval_holdout(
            gold.holdout_queries(),
            user_id="alice",
            scopes=[Scope.PROJECT],
            proposal=proposal,
            reference_time=datetime(2026, 9, 14, tzinfo=UTC),
            limit=10,
        )
    assert namespace["holdout"].decision == "improved_full_retrieval"

    run(BLOCK_4, namespace)
    run(BLOCK_5, namespace)
    assert namespace["status"].active is True
    with MemoryClient("./memories") as memory:
        history = memory.list_ranking_profile_history(user_id="alice", scopes=[Scope.PROJECT])
    assert [s.action for s in history] == ["rollback", "deactivate", "activate"]
