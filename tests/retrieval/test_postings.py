"""An owner's lexical postings (prme.index.postings): however the rows were appended (one
segment at once, or batches merged as they come), every token's instances are the same, in
position then offset order; a view of fewer positions reads only theirs; the flat arrays a
saved index keeps give the same postings back."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from prme.index import postings as postings_
from prme.index.postings import OwnerPostings, Vocabulary, merged

WORDS = [f"w{i}" for i in range(40)] + ["é", "naïve", "x" * 30, "new\nline"]


def documents(rng: random.Random, count: int, long_every: int = 0) -> list[list[str]]:
    """Token lists; every ``long_every``-th one long enough for offsets past uint16."""
    docs = []
    for i in range(count):
        length = 70_000 if long_every and i % long_every == long_every - 1 else rng.randint(0, 12)
        docs.append([rng.choice(WORDS) for _ in range(length)])
    return docs


def batch(docs: list[list[str]], start: int) -> tuple[list[str], Any, Any, Any]:
    """Positions ``start, start + 1, ...`` tokenized as FTS5's vocabulary tables list them:
    tokens ascending, each token's instances by position then offset."""
    found: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for i, tokens in enumerate(docs):
        for offset, token in enumerate(tokens):
            found[token].append((start + i, offset))
    tokens = sorted(found)
    pairs = [p for t in tokens for p in found[t]]
    return (
        tokens,
        np.asarray([len(found[t]) for t in tokens], np.int64),
        np.asarray([p for p, _ in pairs], np.int64),
        np.asarray([o for _, o in pairs], np.int64),
    )


def built(docs: list[list[str]], sizes: list[int]) -> OwnerPostings:
    postings = OwnerPostings(Vocabulary())
    for size in sizes:
        start = postings.size
        postings = postings.appended(start + size, *batch(docs[start : start + size], start))
    assert postings.size == len(docs)
    return postings


def expected(docs: list[list[str]], size: int) -> dict[str, list[tuple[int, int]]]:
    found: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for position, tokens in enumerate(docs[:size]):
        for offset, token in enumerate(tokens):
            found[token].append((position, offset))
    return found


def read(postings: OwnerPostings, tokens: list[str]) -> dict[str, list[tuple[int, int]]]:
    found = postings.lookup(tokens)
    return {t: list(zip(found[t][0].tolist(), found[t][1].tolist(), strict=True)) for t in tokens}


def sizes_summing_to(rng: random.Random, total: int) -> list[int]:
    sizes = []
    while sum(sizes) < total:
        sizes.append(min(rng.choice([1, 1, 2, 5, 17, 64, 300]), total - sum(sizes)))
    return sizes


@pytest.mark.parametrize("seed", [3, 4])
def test_postings_appended_in_batches_are_the_postings_made_at_once(seed: int) -> None:
    rng = random.Random(seed)
    docs = documents(rng, 1500, long_every=700)
    at_once = built(docs, [len(docs)])
    batches = built(docs, sizes_summing_to(rng, len(docs)))
    tokens = [*WORDS, "absent"]
    want = expected(docs, len(docs))
    assert read(at_once, tokens) == read(batches, tokens) == {t: want[t] for t in tokens}
    assert len(at_once.segments) == 1 and len(batches.segments) > 1
    # a token repeated in the query is read once and given back once
    assert set(batches.lookup(["w1", "w1", "w2"])) == {"w1", "w2"}
    # offsets past uint16 keep their values: only the segments holding them are int32
    for segment in (*at_once.segments, *batches.segments, *built(docs[:600], [600]).segments):
        wide = segment.offsets.size > 0 and int(segment.offsets.max()) > 65535
        assert segment.offsets.dtype == np.dtype(np.int32 if wide else np.uint16)


def test_segments_stay_few_and_within_the_merge_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postings_, "MAX_SEGMENT_ROWS", 256)
    rng = random.Random(5)
    docs = documents(rng, 2000)
    postings = built(docs, [1] * 2000)  # one row at a time, as single stores are
    rows = [s.rows for s in postings.segments]
    assert sum(rows) == 2000 and max(rows) <= 256
    assert len(rows) <= 2000 // 256 + 9  # full segments plus a binary counter's tail
    assert [(s.start, s.end) for s in postings.segments] == list(
        zip(np.cumsum([0, *rows[:-1]]).tolist(), np.cumsum(rows).tolist(), strict=True)
    )
    want = expected(docs, 2000)
    assert read(postings, WORDS) == {t: want[t] for t in WORDS}


def test_a_view_of_fewer_positions_reads_only_theirs() -> None:
    rng = random.Random(6)
    docs = documents(rng, 900)
    postings = built(docs, sizes_summing_to(rng, 900))
    for size in (0, 1, 37, 512, 899, 900):
        view = postings.upto(size)
        want = expected(docs, size)
        assert read(view, WORDS) == {t: want[t] for t in WORDS}
        exact = view.exact()
        assert all(s.end <= size for s in exact.segments)
        assert read(exact, WORDS) == {t: want[t] for t in WORDS}


def test_merging_keeps_each_tokens_instances_by_position() -> None:
    rng = random.Random(7)
    docs = documents(rng, 300)
    parts = built(docs, [100, 120, 80])  # 100 then 120 merge; 80 stays
    assert [s.rows for s in parts.segments] == [220, 80]
    one = merged(parts.segments)
    assert (one.start, one.end) == (0, 300)
    assert OwnerPostings(parts.vocabulary, (one,), 300).lookup(WORDS).keys() == set(WORDS)
    assert read(OwnerPostings(parts.vocabulary, (one,), 300), WORDS) == read(parts, WORDS)


def test_the_saved_arrays_give_the_same_postings(tmp_path: Path) -> None:
    rng = random.Random(8)
    docs = documents(rng, 1200, long_every=500)
    postings = built(docs, sizes_summing_to(rng, 1200)).upto(1100)  # a view: saved exactly
    bounds, arrays = postings.arrays()
    assert bounds[-1][1] == 1100
    for name, array in arrays.items():  # through files, memory-mapped as a saved index is
        np.save(tmp_path / f"{name}.npy", array)
    mapped = {name: np.load(tmp_path / f"{name}.npy", mmap_mode="r") for name in arrays}
    loaded = OwnerPostings.from_arrays(1100, bounds, mapped)
    want = expected(docs, 1100)
    assert read(loaded, WORDS) == {t: want[t] for t in WORDS}
    # and it grows as the postings it was saved from do
    more = loaded.appended(1200, *batch(docs[1100:], 1100))
    want = expected(docs, 1200)
    assert read(more, [*WORDS, "brand-new"]) == {t: want[t] for t in [*WORDS, "brand-new"]}
    with pytest.raises(ValueError):
        OwnerPostings.from_arrays(1099, bounds, mapped)
    with pytest.raises(ValueError):
        OwnerPostings.from_arrays(1100, bounds[:-1], mapped)


def test_an_empty_owner_has_empty_postings(tmp_path: Path) -> None:
    postings = OwnerPostings(Vocabulary()).appended(3, [], *(np.zeros(0, np.int64),) * 3)
    assert read(postings, ["w1"]) == {"w1": []}
    bounds, arrays = postings.arrays()
    assert read(OwnerPostings.from_arrays(3, bounds, arrays), ["w1"]) == {"w1": []}


def documents_read(postings: OwnerPostings, tokens: list[str]) -> dict[str, list[tuple[int, int]]]:
    found = postings.documents(tokens)
    return {t: list(zip(found[t][0].tolist(), found[t][1].tolist(), strict=True)) for t in tokens}


def documents_expected(docs: list[list[str]], size: int) -> dict[str, list[tuple[int, int]]]:
    """Each token's rows (ascending) and its instance count in each."""
    counted: dict[str, dict[int, int]] = defaultdict(dict)
    for position, tokens in enumerate(docs[:size]):
        for token in tokens:
            counted[token][position] = counted[token].get(position, 0) + 1
    return {t: sorted(c.items()) for t, c in counted.items()}


def test_document_postings_are_the_instances_by_row(tmp_path: Path) -> None:
    rng = random.Random(9)
    docs = documents(rng, 1300, long_every=650)
    docs[1100] = ["w1"] * 70_000  # a count past uint16: the segments holding it count in int32
    tokens = [*WORDS, "absent"]
    at_once = built(docs, [len(docs)])
    batches = built(docs, sizes_summing_to(rng, len(docs)))
    want = documents_expected(docs, len(docs))
    for postings in (
        at_once,
        batches,
        OwnerPostings(batches.vocabulary, (merged(batches.segments),), 1300),
    ):
        assert documents_read(postings, tokens) == {t: want.get(t, []) for t in tokens}
        found = postings.documents(["w1"])["w1"]
        assert found[0].dtype == np.int32 and found[1].dtype == np.int32
        assert postings.documents(["w2"])["w2"][1].dtype in (np.uint16, np.int32)
    for segment in (*at_once.segments, *batches.segments):
        wide = segment.end > 1100 >= segment.start
        assert segment.freqs.dtype == np.dtype(np.int32 if wide else np.uint16)
    for size in (0, 1, 401, 1299):  # views, and their exact segments
        want = documents_expected(docs, size)
        for view in (batches.upto(size), batches.upto(size).exact()):
            assert documents_read(view, tokens) == {t: want.get(t, []) for t in tokens}
    # saved and loaded, and saved in the format before document postings (derived on loading)
    view = batches.upto(1250)
    bounds, arrays = view.arrays()
    assert all(len(b) == 5 for b in bounds)
    old_bounds = [b[:4] for b in bounds]
    old_arrays = {n: a for n, a in arrays.items() if n not in postings_.DOCUMENT_ARRAYS}
    want = documents_expected(docs, 1250)
    for saved_bounds, saved in ((bounds, arrays), (old_bounds, old_arrays)):
        loaded = OwnerPostings.from_arrays(1250, saved_bounds, saved)
        assert documents_read(loaded, tokens) == {t: want.get(t, []) for t in tokens}
        assert read(loaded, tokens) == read(view, tokens)
    with pytest.raises(ValueError):  # document arrays that do not match their bounds
        OwnerPostings.from_arrays(1250, bounds, {**arrays, "docs": arrays["docs"][:-1]})
    with pytest.raises(ValueError):  # bounds of both formats
        OwnerPostings.from_arrays(1250, [bounds[0], *old_bounds[1:]], arrays)
