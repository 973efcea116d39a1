"""SEED-LEARNING.md's five code blocks, copied verbatim, run in order as one user session.

The blocks need a pack with judged retrievals (so gate 1 can pass) and, for blocks 4 and 5, a
passing holdout: the golden pack (``support.golden``) provides the judgments, and a real
holdout run in the frozen copy provides ``holdout`` after block 3's single-pair example.

The copy (``tests/seed_blocks.py``) keeps a clean checkout without ``../shared`` testable;
:func:`test_seed_blocks_are_the_documents_blocks` fails as soon as it drifts from the document.
"""

from __future__ import annotations

import shutil
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import seed_blocks
from seed_blocks import BLOCK_1, BLOCK_2, BLOCK_3, BLOCK_4, BLOCK_5
from support.golden import Golden, fresh_pack

from prme import MemoryClient, Scope

SEED_DOCUMENT = Path(__file__).resolve().parents[1] / ".." / "shared" / "SEED-LEARNING.md"


def document_blocks(text: str) -> list[str]:
    """The code blocks of SEED-LEARNING.md, as the copy holds them.

    The document has no fences: a code block starts after two empty lines and ends at the next
    empty line; its own blank lines hold a single space (stripped here, as in the copy)."""
    lines = text.split("\n")
    blocks, i = [], 2
    while i < len(lines):
        if lines[i] and lines[i - 1] == "" and lines[i - 2] == "":
            end = lines.index("", i) if "" in lines[i:] else len(lines)
            blocks.append("\n" + "\n".join(line.rstrip() for line in lines[i:end]) + "\n")
            i = end
        else:
            i += 1
    return blocks


def test_document_blocks_finds_unfenced_blocks() -> None:
    text = "Title\n\nProse.\n\n\nx = 1\n \nprint(x)\n\nMore prose.\n\n\ny = 2"
    assert document_blocks(text) == ["\nx = 1\n\nprint(x)\n", "\ny = 2\n"]
    assert document_blocks("One paragraph.\n\nAnother.\n") == []


@pytest.mark.skipif(not SEED_DOCUMENT.is_file(), reason=f"{SEED_DOCUMENT} is not checked out")
def test_seed_blocks_are_the_documents_blocks() -> None:
    blocks = document_blocks(SEED_DOCUMENT.read_text("utf-8"))
    copy = [getattr(seed_blocks, f"BLOCK_{n}") for n in range(1, 6)]
    assert [name for name in dir(seed_blocks) if name.startswith("BLOCK_")] == [
        f"BLOCK_{n}" for n in range(1, 6)
    ]
    assert blocks == copy
    for block in blocks:
        compile(textwrap.dedent(block), "SEED-LEARNING.md", "exec")  # each is Python


def run(block: str, namespace: dict[str, Any]) -> None:
    exec(compile(textwrap.dedent(block), "SEED-LEARNING.md", "exec"), namespace)


def test_seed_session_runs_as_written(
    gold: Golden,
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
