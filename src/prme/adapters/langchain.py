"""A LangChain retriever over a prme pack (``pip install 'prme[langchain]'``).

    from prme import MemoryClient
    from prme.adapters.langchain import PrmeRetriever

    retriever = PrmeRetriever(
        client=MemoryClient("./memories"), user_id="alice", retrieve_options={"limit": 5}
    )
    docs = retriever.invoke("Which database does Aster use?")
    docs[0].metadata["memory_id"], docs[0].metadata["request_id"]   # to judge it later
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from prme.adapters import candidate_metadata, retrieve_for_adapter

__all__ = ["PrmeRetriever"]


class PrmeRetriever(BaseRetriever):
    """Each ``invoke`` is one prme retrieval (with its saved receipt) for a fixed owner.

    Args:
        client: a :class:`prme.MemoryClient`.
        user_id: the owner whose memories are searched.
        retrieve_options: further keywords of ``MemoryClient.retrieve`` (``scope``, ``limit``,
            ``token_budget``, time filters, ...), validated by prme on every call.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: Any
    user_id: str
    retrieve_options: dict[str, Any] = Field(default_factory=dict)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        response = retrieve_for_adapter(self.client, query, self.user_id, self.retrieve_options)
        return [
            Document(
                id=str(candidate.node.id),
                page_content=candidate.node.content,
                metadata=candidate_metadata(response, rank, candidate),
            )
            for rank, candidate in enumerate(response.results, start=1)
        ]
