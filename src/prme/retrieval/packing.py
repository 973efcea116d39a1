"""Packing ranked memories into a token budget, one plain line per memory (pure)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from prme.text import count_words_and_marks

TOKENIZERS: dict[str, Callable[[str], int]] = {"prme-regex-v1": count_words_and_marks}


def count_tokens(text: str, tokenizer: str = "prme-regex-v1") -> int:
    """Deterministic token count: words and single punctuation marks (``prme-regex-v1``)."""
    try:
        return TOKENIZERS[tokenizer](text)
    except KeyError:
        raise ValueError(
            f"unknown tokenizer {tokenizer!r} (valid: {', '.join(sorted(TOKENIZERS))})"
        ) from None


def render_line(content: str, when: datetime) -> str:
    """One line per memory: its date and its text, newlines folded to spaces."""
    return f"[{when.date().isoformat()}] {' '.join(content.split())}"


@dataclass(frozen=True, slots=True)
class PackedItem:
    line: str
    token_cost: int
    in_context: bool
    has_content: bool


@dataclass(frozen=True, slots=True)
class Packed:
    items: list[PackedItem]
    rendered_context: str
    tokens_used: int
    token_budget: int


def pack(
    entries: Sequence[tuple[str, datetime]], token_budget: int, tokenizer: str = "prme-regex-v1"
) -> Packed:
    """Greedy in rank order: an entry that does not fit is excluded, later ones may still fit."""
    items: list[PackedItem] = []
    lines: list[str] = []
    used = 0
    for content, when in entries:
        line = render_line(content, when)
        cost = count_tokens(line, tokenizer) + 1  # +1 for the line break
        fits = used + cost <= token_budget
        if fits:
            used += cost
            lines.append(line)
        items.append(PackedItem(line, cost, fits, fits and bool(content.strip())))
    return Packed(items, "\n".join(lines), used, token_budget)
