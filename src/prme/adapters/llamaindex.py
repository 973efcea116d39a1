"""A LlamaIndex retriever over a prme pack (``pip install 'prme[llamaindex]'``).

    from prme import MemoryClient
    from prme.adapters.llamaindex import PrmeRetriever

    retriever = PrmeRetriever(
        MemoryClient("./memories"), user_id="alice", retrieve_options={"limit": 5}
    )
    hits = retriever.retrieve("Which database does Aster use?")
    hits[0].node.metadata["memory_id"], hits[0].score
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from prme.adapters import candidate_metadata, retrieve_for_adapter

__all__ = ["PrmeRetriever"]


class PrmeRetriever(BaseRetriever):
    """Each ``retrieve`` is one prme retrieval (with its saved receipt) for a fixed owner.

    Args:
        client: a :class:`prme.MemoryClient`.
        user_id: the owner whose memories are searched.
        retrieve_options: further keywords of ``MemoryClient.retrieve`` (``scope``, ``limit``,
            ``token_budget``, time filters, ...), validated by prme on every call.
        callback_manager: LlamaIndex callbacks.
    """

    def __init__(
        self,
        client: Any,
        *,
        user_id: str,
        retrieve_options: Mapping[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager)
        self.client = client
        self.user_id = user_id
        self.retrieve_options = dict(retrieve_options or {})

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        response = retrieve_for_adapter(
            self.client, query_bundle.query_str, self.user_id, self.retrieve_options
        )
        return [
            NodeWithScore(
                node=TextNode(
                    id_=str(candidate.node.id),
                    text=candidate.node.content,
                    metadata=candidate_metadata(response, rank, candidate),
                ),
                score=candidate.composite_score,
            )
            for rank, candidate in enumerate(response.results, start=1)
        ]
