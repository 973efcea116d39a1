"""The LangChain and LlamaIndex retrievers, driven through the real libraries' own entry points
(``invoke`` / ``ainvoke``, ``retrieve`` / ``aretrieve``, a LlamaIndex query engine)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from prme import InvalidInputError, MemoryClient, RelevanceSubmission, Scope

FACTS = [
    ("Aster keeps its database in PostgreSQL 16.", Scope.PROJECT),
    ("Aster deploys on Kubernetes every Friday.", Scope.PROJECT),
    ("Bob prefers green tea in the morning.", Scope.PERSONAL),
]
QUERY = "Which database does Aster use?"
AT = datetime(2026, 10, 1, tzinfo=UTC)  # one request clock, so repeated retrievals score alike


@pytest.fixture
def memory(make_client: Callable[..., MemoryClient]) -> MemoryClient:
    client = make_client()
    for text, scope in FACTS:
        client.store(text, user_id="alice", scope=scope)
    client.store("Mallory's database is secret.", user_id="mallory", scope=Scope.PROJECT)
    return client


def expected(memory: MemoryClient, **options: object) -> list[tuple[str, str, float]]:
    response = memory.retrieve(QUERY, user_id="alice", **options)  # type: ignore[arg-type]
    return [(str(r.node.id), r.node.content, r.composite_score) for r in response.results]


def test_langchain_retriever_returns_judgeable_documents(memory: MemoryClient) -> None:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from prme.adapters.langchain import PrmeRetriever

    retriever = PrmeRetriever(
        client=memory, user_id="alice", retrieve_options={"scope": "project", "limit": 2, "reference_time": AT}
    )
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke(QUERY)
    assert all(isinstance(d, Document) for d in docs)
    assert [(d.id, d.page_content, d.metadata["score"]) for d in docs] == expected(
        memory, scope="project", limit=2, reference_time=AT
    )
    assert "PostgreSQL" in docs[0].page_content
    assert [d.metadata["rank"] for d in docs] == [1, 2]
    assert {d.metadata["scope"] for d in docs} == {"project"}
    request_id = docs[0].metadata["request_id"]
    assert {d.metadata["request_id"] for d in docs} == {request_id}
    # The metadata is enough to judge the retrieval it came from.
    labels = {d.metadata["memory_id"]: i == 0 for i, d in enumerate(docs)}
    result = memory.record_relevance(
        RelevanceSubmission(request_id=request_id, labels=labels), user_id="alice"
    )
    assert result is not None
    # The async entry point runs the same retrieval.
    again = asyncio.run(retriever.ainvoke(QUERY))
    assert [d.page_content for d in again] == [d.page_content for d in docs]
    assert again[0].metadata["request_id"] != request_id


def test_langchain_retriever_sees_only_its_owner(memory: MemoryClient) -> None:
    from prme.adapters.langchain import PrmeRetriever

    docs = PrmeRetriever(client=memory, user_id="alice").invoke("Mallory secret database")
    assert all("Mallory" not in d.page_content for d in docs)


def test_langchain_bad_option_is_prmes_typed_error(memory: MemoryClient) -> None:
    from prme.adapters.langchain import PrmeRetriever

    retriever = PrmeRetriever(client=memory, user_id="alice", retrieve_options={"limit": -1})
    with pytest.raises(InvalidInputError, match="limit"):
        retriever.invoke(QUERY)


def test_llamaindex_retriever_returns_scored_nodes(memory: MemoryClient) -> None:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore

    from prme.adapters.llamaindex import PrmeRetriever

    retriever = PrmeRetriever(memory, user_id="alice", retrieve_options={"limit": 3, "reference_time": AT})
    assert isinstance(retriever, BaseRetriever)
    hits = retriever.retrieve(QUERY)
    assert all(isinstance(h, NodeWithScore) for h in hits)
    assert [(h.node.node_id, h.node.get_content(), h.score) for h in hits] == expected(
        memory, limit=3, reference_time=AT
    )
    assert hits[0].node.metadata["memory_id"] == hits[0].node.node_id
    assert len({h.node.metadata["request_id"] for h in hits}) == 1
    again = asyncio.run(retriever.aretrieve(QUERY))
    assert [h.node.get_content() for h in again] == [h.node.get_content() for h in hits]


def test_llamaindex_query_engine_uses_the_retriever(memory: MemoryClient) -> None:
    from llama_index.core.llms.mock import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.response_synthesizers.no_text import NoText

    from prme.adapters.llamaindex import PrmeRetriever

    retriever = PrmeRetriever(memory, user_id="alice", retrieve_options={"scope": "project"})
    # No LLM: the "no_text" synthesizer returns the retrieved nodes as the response's sources.
    synthesizer = NoText(llm=MockLLM())
    engine = RetrieverQueryEngine(retriever=retriever, response_synthesizer=synthesizer)
    response = engine.query(QUERY)
    sources = [n.node.get_content() for n in response.source_nodes]
    assert "PostgreSQL" in sources[0]
    assert all("tea" not in s for s in sources)


def test_readme_adapter_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (Path(__file__).parents[1] / "README.md").read_text("utf-8")
    section = readme[readme.index("## Framework adapters") : readme.index("## PostgreSQL")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRME_EMBEDDING__PROVIDER", "hash")
    for block in blocks:  # in order: the first stores what the second retrieves
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "README.md", "exec"), {})
        assert "PostgreSQL 16" in out.getvalue()
