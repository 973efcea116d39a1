"""The generated workload: deterministic, realistic in shape, and with a known ground truth."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from prme import Scope
from prme.demo.workload import (
    ASPECTS,
    CURRENT_CONFIDENCE,
    PROJECT_NAMES,
    STALE_CONFIDENCE,
    generate_workload,
)


def test_same_seed_same_workload_other_seed_differs() -> None:
    assert generate_workload(3) == generate_workload(3)
    assert generate_workload(3) != generate_workload(4)


def test_shape_many_projects_and_disjoint_groups() -> None:
    workload = generate_workload(0)
    projects = {m.project for m in workload.memories}
    assert len(projects) == 40
    learning = [q.group for q in workload.learning]
    holdout = [q.group for q in workload.holdout]
    assert len(learning) == len(set(learning)) == 40 * 3
    assert len(holdout) == len(set(holdout)) == 40 * 1
    assert set(learning).isdisjoint(holdout)
    assert {q.text for q in workload.learning}.isdisjoint(q.text for q in workload.holdout)
    keys = [m.key for m in workload.memories]
    assert len(keys) == len(set(keys))
    # every project: 6 aspects with a current fact and 1-3 stale notes each, plus 2 notes
    per_project = Counter(m.project for m in workload.memories)
    assert all(6 * 2 + 2 <= n <= 6 * 4 + 2 for n in per_project.values())


def test_ground_truth_is_the_current_fact_and_stale_notes_compete() -> None:
    workload = generate_workload(1)
    by_key = {m.key: m for m in workload.memories}
    by_group = defaultdict(list)
    for m in workload.memories:
        if m.aspect is not None:
            by_group[f"{m.project.lower()}/{m.aspect}"].append(m)
    for query in (*workload.learning, *workload.holdout):
        (relevant,) = query.relevant_keys
        current = by_key[relevant]
        assert current.kind == "current"
        stale = [m for m in by_group[query.group] if m.kind == "stale"]
        assert 1 <= len(stale) <= 3
        # stale notes name the same project, and their confidence is always lower
        assert all(current.project in m.content for m in [current, *stale])
        assert all(m.confidence < current.confidence for m in stale)
        # queries are phrased differently from every stored text
        assert all(query.text not in m.content for m in workload.memories)
        assert current.project in query.text
    assert all(
        CURRENT_CONFIDENCE[0] <= m.confidence <= CURRENT_CONFIDENCE[1]
        for m in workload.memories
        if m.kind in ("current", "unqueried")
    )
    assert all(
        STALE_CONFIDENCE[0] <= m.confidence <= STALE_CONFIDENCE[1]
        for m in workload.memories
        if m.kind == "stale"
    )


def test_store_items_are_store_many_input() -> None:
    workload = generate_workload(2)
    items = workload.store_items()
    assert len(items) == len(workload.memories)
    first, memory = items[0], workload.memories[0]
    assert first == {
        "content": memory.content,
        "scope": Scope.PROJECT.value,
        "node_type": "note" if memory.kind == "note" else "fact",
        "confidence": memory.confidence,
        "metadata": {"workload_key": memory.key},
    }


def test_invalid_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="projects"):
        generate_workload(0, projects=len(PROJECT_NAMES) + 1)
    with pytest.raises(ValueError, match="aspects"):
        generate_workload(0, learning_aspects=len(ASPECTS))
    with pytest.raises(ValueError, match="learning_aspects"):
        generate_workload(0, holdout_aspects=0)
