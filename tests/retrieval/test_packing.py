"""Token-budget packing: one plain line per memory, greedy in rank order."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from prme.retrieval.packing import count_tokens, pack, render_line

WHEN = datetime(2026, 9, 1, 23, 59, tzinfo=UTC)


def test_count_tokens_words_and_punctuation() -> None:
    assert count_tokens("Aster uses PostgreSQL.") == 4
    assert count_tokens("[2026-09-01] it's") == 10  # [ 2026 - 09 - 01 ] it ' s
    assert count_tokens("") == 0
    assert count_tokens("  \n ") == 0


def test_unknown_tokenizer_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="prme-regex-v1"):
        count_tokens("x", "gpt")


def test_render_line_folds_whitespace() -> None:
    assert render_line("a\n b\t\tc ", WHEN) == "[2026-09-01] a b c"


def test_pack_greedy_with_later_fits() -> None:
    entries = [("one two", WHEN), ("three four five six seven", WHEN), ("eight", WHEN)]
    costs = [count_tokens(render_line(c, w)) + 1 for c, w in entries]
    date = 7  # [ 2026 - 09 - 01 ]
    assert costs == [date + 2 + 1, date + 5 + 1, date + 1 + 1]
    packed = pack(entries, costs[0] + costs[2])
    assert [i.in_context for i in packed.items] == [True, False, True]
    assert [i.token_cost for i in packed.items] == costs
    assert packed.tokens_used == costs[0] + costs[2]
    assert packed.rendered_context == "[2026-09-01] one two\n[2026-09-01] eight"
    assert packed.token_budget == costs[0] + costs[2]


def test_pack_budget_edges() -> None:
    entries = [("alpha", WHEN)]
    cost = count_tokens(render_line("alpha", WHEN)) + 1
    assert pack(entries, cost).items[0].in_context
    assert not pack(entries, cost - 1).items[0].in_context
    empty = pack(entries, 0)
    assert (empty.rendered_context, empty.tokens_used) == ("", 0)
    assert pack([], 100).items == []


def test_has_content_requires_in_context() -> None:
    packed = pack([("alpha", WHEN), ("beta " * 50, WHEN)], 10)
    assert [(i.in_context, i.has_content) for i in packed.items] == [(True, True), (False, False)]
