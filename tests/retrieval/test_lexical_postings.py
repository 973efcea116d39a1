"""The SQLite lexical channel scores BM25 from the owner's own postings (prme.index.postings):
the same rows, scores and order, bit for bit, as reading the pack's FTS5 postings of each token
and keeping the owner's rows (the path before, for owners past 1,024 memories); what it reads
never depends on another owner's memories; and the postings are saved with the owner's index,
so a reopened pack does not tokenize its rows again."""

from __future__ import annotations

import json
import random
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from prme import MemoryClient
from prme.index import bm25_topk, index_file
from prme.index import postings as postings_
from prme.index.bm25 import bm25_idf, bm25_scores
from prme.models.enums import Scope
from prme.retrieval.query import analyze_query
from prme.storage import fts5_lexical, owner_indexes
from prme.storage.sqlite import indexes

ClientFactory = Callable[..., MemoryClient]
WORDS = [
    "aster", "kestrel", "lisbon", "running", "ran", "runs", "café", "cafe", "naïve", "user_id",
    "deploy", "deployed", "incident", "postgres", "helm", "rollback", "migration", "review",
    "budget", "the", "a", "of", "42", "x",
]  # fmt: skip
# multi-token terms (FTS5 phrases), tokens repeated within a phrase, a term FTS5 drops
PHRASES = [
    "deploy rollback", "user_id", "runs running", "aster aster", "the incident review",
    "café naïve", "x x x", "...", "helm-rollback",
]  # fmt: skip
SCOPES = (None, [Scope.PROJECT], [Scope.PERSONAL, Scope.ORGANISATION])


def _generated(rng: random.Random, count: int) -> list[dict[str, Any]]:
    scopes = ("personal", "project", "organisation")
    return [
        {
            "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))),
            "scope": rng.choice(scopes),
        }
        for _ in range(count)
    ]


def _queries(rng: random.Random, count: int) -> list[list[str]]:
    found = []
    for _ in range(count):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))
        terms = list(analyze_query(text).terms) or ["aster"]
        found.append(terms + rng.sample(PHRASES, rng.randint(0, 2)))
    return found


def pack_postings_bm25(
    store: Any, user_id: str, scopes: Sequence[Scope] | None, terms: Sequence[str], k: int
) -> list[tuple[int, float]]:
    """The path before: each token's instances read from the pack's FTS5 index (an
    ``fts5vocab`` ``instance`` table: every owner's rows), the owner's rows kept, and FTS5's
    BM25 over the owner's statistics."""
    index = store.owner_index(user_id)
    in_scope = index.scope_mask(scopes)
    conn = sqlite3.connect(store.db_path)
    conn.execute("CREATE VIRTUAL TABLE temp.instance USING fts5vocab(main, memories_fts, instance)")
    per_phrase = []
    for tokens in store._tokenizer.tokens(terms):
        if not tokens:
            continue
        starts: set[tuple[int, int]] | None = None
        for shift, token in enumerate(tokens):
            rows = conn.execute("SELECT doc, offset FROM temp.instance WHERE term = ?", (token,))
            at = {(int(d), int(o) - shift) for d, o in rows}
            starts = at if starts is None else starts & at
        counts = Counter(d for d, _ in starts or ())
        docs = np.asarray(sorted(counts), np.int64)
        positions, mine = index.positions_of(docs)
        freq = np.asarray([counts[d] for d in docs.tolist()], np.float64)[mine]
        per_phrase.append((positions, freq))
    conn.close()
    matched = [p for p, _ in per_phrase if p.size]
    if not matched:
        return []
    pool = np.unique(np.concatenate(matched))
    pool = pool[in_scope[pool]]
    if pool.size == 0:
        return []
    idfs, frequencies = [], []
    for positions, freq in per_phrase:
        idfs.append(bm25_idf(index.size, int(positions.size)))
        aligned = np.zeros(pool.size, np.float64)
        inside = np.isin(positions, pool)
        aligned[np.searchsorted(pool, positions[inside])] = freq[inside]
        frequencies.append(aligned)
    doc_len = index.col("doc_len")
    avgdl = float(doc_len.sum()) / float(index.size)
    scores = bm25_scores(idfs, frequencies, doc_len[pool].astype(np.float64), avgdl)
    rowids = index.col("rowid")[pool]
    order = np.lexsort((rowids, -scores))[:k]
    return list(zip(rowids[order].tolist(), scores[order].tolist(), strict=True))


def _compare(store: Any, owners: list[str], rng: random.Random) -> int:
    """Every case's hits from the owner's postings and from the pack's; how many hits."""
    cases = [
        (owner, scopes, terms, k)
        for owner in owners
        for scopes in SCOPES
        for terms, k in zip(_queries(rng, 6), (1, 5, 20, 200, 2000, 7), strict=True)
    ]
    hits = 0
    for case in cases:
        found = store.lexical_search(*case)
        assert found == pack_postings_bm25(store, *case), case
        hits += len(found)
    return hits


@pytest.mark.sqlite_only  # the pack's FTS5 index is the reference
@pytest.mark.parametrize(
    ("seed", "pruned", "search", "score_all"),
    [
        (1, bm25_topk.MAX_PRUNED_PHRASES, bm25_topk.PLACE_BY_SEARCH, bm25_topk.SCORE_ALL),
        (2, 0, 0, 0),  # every match scored; counts always found by binary search
        (3, 10, 10**9, 0),  # pruned up to 10 phrases; counts always placed through a map
    ],
    ids=["defaults", "unpruned-searched", "pruned-mapped"],
)
def test_owner_postings_give_the_pack_postings_hits(
    make_client: ClientFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    pruned: int,
    search: int,
    score_all: int,
) -> None:
    monkeypatch.setattr(bm25_topk, "MAX_PRUNED_PHRASES", pruned)
    monkeypatch.setattr(bm25_topk, "PLACE_BY_SEARCH", search)
    monkeypatch.setattr(bm25_topk, "SCORE_ALL", score_all)
    rng = random.Random(seed)
    client = make_client(tmp_path / f"pack-{seed}")
    owners = ["big", *(f"owner-{i}" for i in range(4))]
    for round_ in range(3):  # interleaved writes: an owner's rowids are not one range
        for owner in owners:
            count = 450 if owner == "big" else 20 + 15 * round_
            client.store_many(_generated(rng, count), user_id=owner)
    store = client.engine.store
    assert store.owner_index("big").size > 1024  # past the old threshold
    assert _compare(store, owners, rng) > 2000  # the queries do match
    # appended rows (one store, then a batch) join the postings built before
    client.store("deploy rollback deploy rollback aster", user_id="big")
    assert _compare(store, ["big"], rng) > 0
    client.store_many(_generated(rng, 40), user_id="big")
    assert _compare(store, ["big"], rng) > 0
    # deletes and updates rebuild the owner's index, and its postings with it
    records = client.list(user_id="big", limit=30)
    for record in records[:10]:
        assert client.delete(record.id, user_id="big")
    for record in records[10:20]:
        client.update(record.id, user_id="big", content="kestrel user_id rollback kestrel")
    assert _compare(store, owners, rng) > 2000


def _lexical_work(client: MemoryClient, terms: list[str]) -> tuple[list[list[Any]], list[int]]:
    """Alice's hits for ``terms`` (a first search, which builds her index and postings, then
    two more), and how many SQLite virtual-machine steps each took on the pack's connection."""
    store: Any = client.engine.store
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    found, work = [], []
    for scopes in (None, None, [Scope.PROJECT]):
        steps[0] = 0
        store.conn.set_progress_handler(count, 1)
        try:
            found.append(store.lexical_search("alice", scopes, terms, 50))
        finally:
            store.conn.set_progress_handler(None, 1)
        work.append(steps[0])
    return found, work


@pytest.mark.sqlite_only  # counts SQLite's work on the pack's connection
def test_what_an_owner_reads_does_not_depend_on_other_owners_matches(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    rng = random.Random(11)
    alice = _generated(rng, 1100)  # past the old 1,024-row threshold
    terms = ["aster", "kestrel", "deploy rollback", "incident"]
    results = []
    # bob's memories: as many tokens either way, none or all of them the query's
    for name, words in (
        ("none", "quartz ember harbor tundra"),
        ("all", "aster kestrel deploy rollback"),
    ):
        client = make_client(tmp_path / name)
        client.store_many(alice, user_id="alice")
        for start in range(0, 50_000, 1000):
            client.store_many([f"{words} {i}" for i in range(start, start + 1000)], user_id="bob")
        results.append(_lexical_work(client, terms))
        if name == "all":
            assert len(client.engine.store.lexical_search("bob", None, ["aster"], 10)) == 10
    (found_none, work_none), (found_all, work_all) = results
    assert found_none == found_all and all(found_none)
    assert work_none == work_all


def test_owner_postings_follow_the_owners_writes(make_client: ClientFactory) -> None:
    client = make_client()
    client.store_many(["aster runs", "kestrel"], user_id="alice")
    store = client.engine.store
    assert [s for _, s in store.lexical_search("alice", None, ["lisbon"], 10)] == []
    client.store("lisbon aster", user_id="alice")
    hits = store.lexical_search("alice", None, ["lisbon", "aster"], 10)
    assert len(hits) == 2 and hits[0][1] > hits[1][1]  # the new row matches both terms


def _tokenized_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows each tokenization of documents gets, from now on."""
    calls: list[int] = []
    original = fts5_lexical.DocumentTokenizer.tokenized

    def counted(self: Any, rows: Any) -> Any:
        rows = list(rows)
        calls.append(len(rows))
        return original(self, rows)

    monkeypatch.setattr(fts5_lexical.DocumentTokenizer, "tokenized", counted)
    return calls


@pytest.mark.sqlite_only  # the SQLite pack's saved index
def test_a_reopened_pack_reads_the_saved_postings(
    make_client: ClientFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 64)  # save small owners' indexes too
    rng = random.Random(12)
    path = tmp_path / "pack"
    client = make_client(path)
    client.store_many(_generated(rng, 700), user_id="alice")
    queries = [(s, q, 30) for s in SCOPES for q in _queries(rng, 5)]
    before = [client.engine.store.lexical_search("alice", *q) for q in queries]
    client.close()
    directory = index_file.owner_directory(path / indexes.INDEX_DIR, "alice")
    assert (directory / index_file.LEXICAL).is_file()

    tokenized = _tokenized_rows(monkeypatch)
    client = make_client(path)
    store: Any = client.engine.store
    assert [store.lexical_search("alice", *q) for q in queries] == before
    assert tokenized == []  # read from the saved files, not tokenized again
    client.store_many(_generated(rng, 3), user_id="alice")
    assert store.lexical_search("alice", None, ["aster"], 5)
    assert tokenized == [3]  # only the rows appended since
    assert _compare(store, ["alice"], rng) > 0


@pytest.mark.sqlite_only  # the SQLite pack's saved index
def test_an_index_saved_without_postings_is_saved_again_with_them(
    make_client: ClientFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 64)
    path = tmp_path / "pack"
    client = make_client(path)
    client.store_many(_generated(random.Random(13), 300), user_id="alice")
    before = client.engine.store.lexical_search("alice", None, ["aster", "deploy rollback"], 50)
    client.close()
    directory = index_file.owner_directory(path / indexes.INDEX_DIR, "alice")
    for saved in directory.glob("lexical.*"):  # as an index saved before postings were
        saved.unlink()

    tokenized = _tokenized_rows(monkeypatch)
    client = make_client(path)
    store: Any = client.engine.store
    assert store.lexical_search("alice", None, ["aster", "deploy rollback"], 50) == before
    assert tokenized == [300]
    assert (directory / index_file.LEXICAL).is_file()  # saved again, with the postings
    client.close()
    client = make_client(path)
    assert client.engine.store.lexical_search("alice", None, ["aster"], 5)
    assert tokenized == [300]


@pytest.mark.sqlite_only  # the SQLite pack's postings
def test_a_snapshot_reads_only_its_own_rows(make_client: ClientFactory) -> None:
    client = make_client()
    client.store_many(_generated(random.Random(14), 200), user_id="alice")
    store: Any = client.engine.store
    terms = [("aster",), ("deploy", "rollback")]
    old = store.owner_index("alice")
    with store.read_snapshot():
        before = fts5_lexical.owner_bm25(store.conn, old, old.scope_mask(None), terms, 500)
    client.store_many(["aster deploy rollback"] * 30, user_id="alice")
    assert len(store.lexical_search("alice", None, ["aster"], 500)) > len(before)
    with store.read_snapshot():  # the shared postings now cover rows the snapshot lacks
        again = fts5_lexical.owner_bm25(store.conn, old, old.scope_mask(None), terms, 500)
    assert again == before


@pytest.mark.sqlite_only  # the SQLite pack's saved index
def test_postings_saved_before_document_postings_still_load(
    make_client: ClientFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Postings saved without document postings (the format before them: four numbers per
    segment, no ``lexical.docs``/``freqs``/``doc_offsets``) are loaded, the document postings
    derived from the instances: the same hits, and no row tokenized again."""
    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 64)
    rng = random.Random(15)
    path = tmp_path / "pack"
    client = make_client(path)
    for _ in range(3):  # a few segments
        client.store_many(_generated(rng, 250), user_id="alice")
    queries = [(s, q, 40) for s in SCOPES for q in _queries(rng, 6)]
    before = [client.engine.store.lexical_search("alice", *q) for q in queries]
    client.close()
    directory = index_file.owner_directory(path / indexes.INDEX_DIR, "alice")
    meta = json.loads((directory / index_file.LEXICAL).read_text("utf-8"))
    assert all(len(bounds) == 5 for bounds in meta["segments"])
    meta["segments"] = [bounds[:4] for bounds in meta["segments"]]
    (directory / index_file.LEXICAL).write_text(json.dumps(meta), "utf-8")
    for name in postings_.DOCUMENT_ARRAYS:
        (directory / f"lexical.{name}.npy").unlink()

    tokenized = _tokenized_rows(monkeypatch)
    client = make_client(path)
    store: Any = client.engine.store
    assert [store.lexical_search("alice", *q) for q in queries] == before
    assert tokenized == []
    assert _compare(store, ["alice"], rng) > 0


@pytest.mark.sqlite_only  # counts SQLite's work on the query tokenizer's connection
def test_an_owners_query_terms_cost_the_same_whether_or_not_another_owner_asked_them(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    # The query tokenizer keeps nothing between calls: a term another owner asked before is
    # tokenized again, as much work as the first time (a cache shared by the owners would let
    # one time another's recent queries).
    terms = ["kestrel", "rollback"]  # (terms no other test asks)

    def bobs_tokenizer_steps(alice_first: bool) -> int:
        client = make_client(tmp_path / f"alice-first-{alice_first}")
        client.store_many(["kestrel rollback notes", "other"], user_id="alice")
        client.store_many(["kestrel at dawn", "a rollback"], user_id="bob")
        store: Any = client.engine.store
        store.lexical_search("bob", None, ["dawn"], 10)  # Bob's index and postings
        if alice_first:
            store.lexical_search("alice", None, terms, 10)
        steps = [0]

        def count() -> int:
            steps[0] += 1
            return 0

        tokenizer = store._tokenizer._conn
        tokenizer.set_progress_handler(count, 1)
        try:
            assert store.lexical_search("bob", None, terms, 10)
        finally:
            tokenizer.set_progress_handler(None, 1)
        return steps[0]

    alone = bobs_tokenizer_steps(alice_first=False)
    assert alone > 0
    assert bobs_tokenizer_steps(alice_first=True) == alone
