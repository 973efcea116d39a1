"""The MCP tools over memories, retrieval and relevance judgments (:class:`RecordTools`), with
the argument annotations and result models every tool group shares.

Each handler binds the owner, calls one public :class:`~prme.client.MemoryClient` method and
returns its result; :mod:`prme.mcp.learning_tools` adds the learning and profile tools."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import (
    Annotated,
    Any,
    Literal,
    cast,
)
from uuid import UUID, uuid4

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field, StrictBool, StrictInt

from prme.client import MemoryClient
from prme.errors import (
    NotFoundError,
    is_expected,
    public_message,
)
from prme.models.enums import EpistemicType, NodeType, Scope, SourceType
from prme.models.memory import MemoryRecord, StoreReceipt
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import RecordedRelevance, RelevanceRecord
from prme.models.request import MCP_NAMES, SURFACE_PARAMETERS, WIRE_TYPES, surface_default
from prme.models.retrieval import OwnerIndexReport

UserId = Annotated[
    str | None,
    Field(description="The owner; omit it when the server binds the owner (stdio or bearer key)."),
]
Scopes = Annotated[
    list[Scope] | None,
    Field(description="The exact scope set (a non-empty list); omit for the unfiltered set."),
]
Limit = Annotated[StrictInt, Field(description="Page size, 1 to 1000.")]
OptionalInt = StrictInt | None


@contextmanager
def tool_errors() -> Iterator[None]:
    """Expected errors (4xx, and temporary 503s) become tool errors with their public message;
    others stay crashes."""
    try:
        yield
    except Exception as exc:
        if is_expected(exc):
            raise ToolError(public_message(exc)) from exc
        raise


class RetrievedMemory(BaseModel):
    # One result in its compact form; in_context: packed into the context within the budget.
    id: UUID
    text: str
    score: float
    in_context: bool


class MemoryPage(BaseModel):
    """One page of the owner's memories by id; pass next_cursor back for the next page."""

    items: list[MemoryRecord]
    next_cursor: UUID | None = Field(description="The last id of a full page, else null.")


class Deleted(BaseModel):
    """The memory was deleted."""

    deleted: bool
    node_id: UUID


class Retrieved(BaseModel):
    """Ranked results (best first); judge them with request_id."""

    request_id: UUID
    receipt_persisted: bool
    results: list[RetrievedMemory]
    details: dict[str, Any] | None = Field(
        default=None, description="The full response, with details=true."
    )


class RecordTools:
    """The memory, retrieval and relevance tool handlers: bind the owner, call one MemoryClient
    method, return its result."""

    def __init__(self, client: MemoryClient, owner: Callable[[str | None], str]) -> None:
        self.client = client
        self.owner = owner

    # ------------------------------------------------------------------- memories
    def memory_store(
        self,
        content: str,
        user_id: UserId = None,
        scope: Scope = Scope.PERSONAL,
        node_type: NodeType = NodeType.NOTE,
        session_id: str | None = None,
        role: str = "user",
        metadata: dict[str, Any] | None = None,
        confidence: float | None = None,
        epistemic_type: EpistemicType | None = None,
        source_type: SourceType | None = None,
        event_time: datetime | None = None,
        valid_from: datetime | None = None,
        valid_to: datetime | None = None,
        salience: float | None = None,
        pinned: StrictBool = False,
        ttl_days: OptionalInt = None,
    ) -> StoreReceipt:
        """Store one memory for the owner and return {event_id, node_id, processing_status}; writes a new memory to the pack."""
        with tool_errors():
            return StoreReceipt.model_validate(
                self.client.store_with_receipt(
                    content,
                    user_id=self.owner(user_id),
                    scope=scope,
                    node_type=node_type,
                    session_id=session_id,
                    role=role,
                    metadata=metadata,
                    confidence=confidence,
                    epistemic_type=epistemic_type,
                    source_type=source_type,
                    event_time=event_time,
                    valid_from=valid_from,
                    valid_to=valid_to,
                    salience=salience,
                    pinned=pinned,
                    ttl_days=ttl_days,
                )
            )

    # ==== memory management: list / get / update / delete (issue 21 item 1) ============
    def memory_list(
        self,
        user_id: UserId = None,
        scope: Annotated[
            list[Scope] | None, Field(description="Only these scopes; omit for every scope.")
        ] = None,
        limit: Limit = 100,
        cursor: Annotated[
            UUID | None, Field(description="next_cursor of the previous page; omit at first.")
        ] = None,
    ) -> MemoryPage:
        """The owner's memories by id, a page at a time: {items, next_cursor}."""
        with tool_errors():
            items = self.client.list(
                user_id=self.owner(user_id), scope=scope, limit=limit, after_id=cursor
            )
            more = items[-1].id if items and len(items) == limit else None
            return MemoryPage(items=items, next_cursor=more)

    def memory_get(
        self,
        node_id: Annotated[UUID, Field(description="The memory's id.")],
        user_id: UserId = None,
    ) -> MemoryRecord:
        """One of the owner's memories (an error when missing or another owner's)."""
        with tool_errors():
            found = self.client.get(node_id, user_id=self.owner(user_id))
            if found is None:
                raise NotFoundError("Memory", node_id)
            return found

    def memory_update(
        self,
        node_id: Annotated[UUID, Field(description="The memory to supersede (latest version).")],
        user_id: UserId = None,
        content: Annotated[str | None, Field(description="The new text; omit to keep.")] = None,
        scope: Annotated[Scope | None, Field(description="A new scope; omit to keep.")] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="New metadata; null clears.")
        ] = None,
        confidence: Annotated[float | None, Field(description="New confidence in [0, 1].")] = None,
        salience: Annotated[float | None, Field(description="New salience in [0, 1].")] = None,
        pinned: Annotated[StrictBool | None, Field(description="Pin or unpin it.")] = None,
        event_time: Annotated[
            datetime | None, Field(description="When it happened; null clears.")
        ] = None,
        valid_to: Annotated[
            datetime | None, Field(description="When it stops being true; null clears.")
        ] = None,
    ) -> MemoryRecord:
        """Supersede a memory with a new version (the old one stays, valid until now) and
        return it; omitted fields are kept, null clears one (as HTTP PATCH)."""
        given = {
            "content": content,
            "scope": scope,
            "metadata": metadata,
            "confidence": confidence,
            "salience": salience,
            "pinned": pinned,
            "event_time": event_time,
            "valid_to": valid_to,
        }
        # Called directly, None cannot say "clear": only the tool call (update_sent) can.
        changes = {name: value for name, value in given.items() if value is not None}
        return self.update_sent(node_id, user_id, **changes)

    def update_sent(
        self, node_id: UUID, user_id: str | None = None, **changes: Any
    ) -> MemoryRecord:
        """``memory_update`` as called over MCP: ``changes`` holds exactly the arguments the
        caller sent, so an explicit null reaches ``MemoryClient.update`` as None (the store
        default, clearing an optional field) while an omitted one is kept, as HTTP PATCH does."""
        with tool_errors():
            return self.client.update(node_id, user_id=self.owner(user_id), **changes)

    def memory_delete(
        self,
        node_id: Annotated[UUID, Field(description="The memory's id.")],
        user_id: UserId = None,
    ) -> Deleted:
        """Delete one of the owner's memories: {deleted: true}, or an error when missing."""
        with tool_errors():
            if not self.client.delete(node_id, user_id=self.owner(user_id)):
                raise NotFoundError("Memory", node_id)
            return Deleted(deleted=True, node_id=node_id)

    # ==== end of memory management =====================================================

    # ------------------------------------------------------------------ retrieval
    def memory_retrieve(
        self,
        query: str,
        user_id: UserId = None,
        details: StrictBool = False,
        **parameters: Any,
    ) -> Retrieved:
        """Retrieve the owner's memories ranked for a query with the active ranking profile; appends a retrieval receipt and changes no memory."""
        # The published arguments are RetrievalRequest's (see _retrieve_signature).
        with tool_errors():
            given = {RETRIEVE_PARAMETERS.get(name, name): v for name, v in parameters.items()}
            response = self.client.retrieve(query, user_id=self.owner(user_id), **given)
        return Retrieved(
            request_id=response.metadata.request_id,
            receipt_persisted=response.metadata.receipt_persisted,
            results=[
                RetrievedMemory(
                    id=r.node.id,
                    text=r.node.content,
                    score=r.composite_score,
                    in_context=r.in_context,
                )
                for r in response.results
            ],
            details=response.model_dump(mode="json") if details else None,
        )

    def memory_build_index(self, user_id: UserId = None) -> OwnerIndexReport:
        """Build and save the owner's index now (after a bulk store) instead of in its next retrieval; changes no memory."""
        with tool_errors():
            return self.client.build_index(user_id=self.owner(user_id))

    def memory_get_retrieval_receipt(
        self, request_id: UUID, user_id: UserId = None
    ) -> RetrievalReceipt | None:
        """Return the owner's saved retrieval receipt for request_id, or null; changes nothing."""
        with tool_errors():
            return self.client.get_retrieval_receipt(request_id, user_id=self.owner(user_id))

    # ----------------------------------------------------------- relevance judgments
    def memory_record_relevance(
        self,
        request_id: UUID,
        labels: Annotated[
            dict[str, StrictBool],
            Field(description="Node id of a returned candidate → true (relevant) or false."),
        ],
        feedback_id: Annotated[
            UUID,
            Field(
                default_factory=uuid4,
                description="Reuse only to retry the same write (idempotent); new by default.",
            ),
        ],
        surface: Literal["results", "context"] = "results",
        method: Literal["explicit_user", "structured_evaluation"] = "explicit_user",
        user_id: UserId = None,
    ) -> RecordedRelevance:
        """Record explicit relevance labels on candidates of one of the owner's saved retrievals; appends one judgment (an identical retry returns the original)."""
        with tool_errors():
            submission = {
                "feedback_id": feedback_id,
                "request_id": request_id,
                "labels": labels,  # keys are parsed, and duplicate spellings refused, by the model
                "surface": surface,
                "method": method,
            }
            record = self.client.record_relevance(submission, user_id=self.owner(user_id))
        # One output schema (RecordedRelevance): a plain record is one without warnings, and is
        # returned as stored, so a retry, get and list return the same object.
        return cast("RecordedRelevance", record)

    def memory_get_relevance(
        self, feedback_id: UUID, user_id: UserId = None
    ) -> RelevanceRecord | None:
        """Return the owner's relevance judgment with this feedback_id, or null; changes nothing."""
        with tool_errors():
            return self.client.get_relevance(feedback_id, user_id=self.owner(user_id))

    def memory_list_relevance(
        self, user_id: UserId = None, limit: Limit = 100, after_id: UUID | None = None
    ) -> list[RelevanceRecord]:
        """List the owner's relevance judgments ordered by feedback_id (page with after_id); changes nothing."""
        with tool_errors():
            return self.client.list_relevance(
                user_id=self.owner(user_id), limit=limit, after_id=after_id
            )


RETRIEVE_PARAMETERS: dict[str, str] = {mcp: name for name, mcp in MCP_NAMES.items()}


def _retrieve_signature() -> inspect.Signature:
    """memory_retrieve's published signature: the query, the owner, every surface parameter of
    RetrievalRequest (MCP's names and JSON types, prme.models.request) and ``details``."""
    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    own = inspect.signature(RecordTools.memory_retrieve).parameters
    generated = [
        inspect.Parameter(
            MCP_NAMES.get(name, name),
            keyword,
            default=surface_default(name),
            annotation=WIRE_TYPES[name],
        )
        for name in SURFACE_PARAMETERS
        if name not in ("query", "user_id")
    ]
    return inspect.Signature(
        [
            own["self"],
            inspect.Parameter("query", keyword, annotation=str),
            inspect.Parameter("user_id", keyword, default=None, annotation=UserId),
            *generated,
            inspect.Parameter("details", keyword, default=False, annotation=StrictBool),
        ],
        return_annotation=Retrieved,
    )


setattr(RecordTools.memory_retrieve, "__signature__", _retrieve_signature())  # noqa: B010
