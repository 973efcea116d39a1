"""Retrievers for agent frameworks, as optional extras: ``prme[langchain]`` gives
:class:`prme.adapters.langchain.PrmeRetriever`, ``prme[llamaindex]`` gives
:class:`prme.adapters.llamaindex.PrmeRetriever`.

Both return one item per retrieved memory, best first, whose metadata carries what a caller
needs to judge it afterwards (``record_relevance`` takes the ``request_id`` and memory ids).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prme.models.retrieval import RetrievalCandidate, RetrievalResponse

__all__ = ["candidate_metadata", "retrieve_for_adapter"]


def candidate_metadata(
    response: RetrievalResponse, rank: int, candidate: RetrievalCandidate
) -> dict[str, Any]:
    """The metadata both adapters attach to a retrieved memory (plain JSON values)."""
    node = candidate.node
    return {
        "memory_id": str(node.id),
        "request_id": str(response.metadata.request_id),
        "rank": rank,
        "score": candidate.composite_score,
        "in_context": candidate.in_context,
        "scope": node.scope.value,
        "node_type": node.node_type.value,
        "ranking_profile_status": response.metadata.ranking_profile_status,
    }


def retrieve_for_adapter(
    client: Any, query: str, user_id: str, options: Mapping[str, Any]
) -> RetrievalResponse:
    """``client.retrieve`` with the adapter's fixed owner and options (one call, one receipt)."""
    response = client.retrieve(query, user_id=user_id, **options)
    if not isinstance(response, RetrievalResponse):
        raise TypeError("client must be a prme MemoryClient (retrieve returned no response)")
    return response
