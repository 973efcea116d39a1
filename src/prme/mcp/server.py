"""The MCP server: every memory and learning operation as a tool, over stdio or streamable HTTP.

Each tool binds the owner, calls one public :class:`~prme.client.MemoryClient` method and
returns its result as structured content checked by a published output schema, with the same
JSON as text (``model_dump(mode="json")``, or ``null``; see :mod:`prme.mcp.schemas`). The
learning tools take input checksums, and the server loads the reports it persisted. Expected errors become
tool errors (``isError: true``) carrying :func:`prme.errors.public_message`; anything else is
reported by the SDK as ``Error executing tool <name>`` and logged server-side with its traceback.

Owner binding: over stdio the owner is fixed by configuration (``PRME_MCP__USER_ID`` or
``--user-id``). Over HTTP each bearer key in ``PRME_MCP__USER_KEYS`` binds its user; without keys
the configured ``user_id`` binds, and the server only listens on loopback. A ``user_id``
argument naming anyone else is refused. A server that would bind nobody refuses to start unless
``--multi-owner`` (``PRME_MCP__MULTI_OWNER=true``) says so explicitly; then every call must name
its ``user_id``. A bound server publishes no ``user_id`` parameter at all.

Tool sets: ``--tools core`` (``PRME_MCP__TOOLS=core``) lists only store, retrieve, judge and the
memory tools; ``all`` (the default) adds the receipt, learning and profile tools.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import ipaddress
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import (
    Annotated,
    Any,
    Literal,
    TypeVar,
    cast,
    get_type_hints,
)
from uuid import UUID, uuid4

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from prme.auth import Identity, KeyRing
from prme.client import MemoryClient
from prme.config import MCPConfig, PRMEConfig
from prme.errors import (
    InvalidInputError,
    NotFoundError,
    PackNotFoundError,
    is_expected,
    public_message,
    serve_hint,
)
from prme.mcp.schemas import input_schema, output_schema, structured
from prme.models.base import Sha256Hex
from prme.models.enums import EpistemicType, NodeType, Scope, SourceType
from prme.models.holdout import (
    FullRetrievalEvaluation,
    FullRetrievalEvaluationConfig,
    FullRetrievalTrial,
)
from prme.models.learning import LearningConfig, LearningEvaluation
from prme.models.memory import MemoryRecord, StoreReceipt
from prme.models.profiles import RankingProfile, RankingProfileState, RankingProfileStatus
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import RecordedRelevance, RelevanceRecord
from prme.models.request import MCP_NAMES, SURFACE_PARAMETERS, WIRE_TYPES, surface_default
from prme.models.scoring import RankingMultipliers

Transport = Literal["stdio", "http"]
ReportT = TypeVar("ReportT", LearningEvaluation, FullRetrievalEvaluation)
IDENTITY_REQUIRED = "Authenticated MCP identity required"
LOOPBACK_NAMES = frozenset({"localhost"})
LOOPBACK_ONLY = "without PRME_MCP__USER_KEYS the HTTP transport only listens on loopback"
OWNER_UNBOUND = (
    "no owner is bound: pass --user-id (PRME_MCP__USER_ID), or bearer keys over HTTP "
    "(PRME_MCP__USER_KEYS); --multi-owner (PRME_MCP__MULTI_OWNER=true) serves every owner, "
    "each call naming its user_id"
)

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


class _Owner:
    """Resolves the owner of the current call from the transport's binding."""

    def __init__(self, fixed: str | None, keys: KeyRing | None) -> None:
        self.fixed = fixed
        self.keys = keys

    def __call__(self, requested: str | None) -> str:
        if self.keys is not None and self.keys.enabled:
            token = get_access_token()
            if token is None:
                raise PermissionError(IDENTITY_REQUIRED)
            return Identity(token.client_id).owner(requested)
        return Identity(self.fixed).owner(requested)


class _KeyVerifier:
    """The SDK's token-verifier hook over the configured per-user keys (constant-time compare)."""

    def __init__(self, keys: KeyRing) -> None:
        self.keys = keys

    async def verify_token(self, token: str) -> AccessToken | None:
        user_id = self.keys.match(token)
        if user_id is None:
            return None
        return AccessToken(token=token, client_id=user_id, scopes=[])


@contextmanager
def _tool_errors() -> Iterator[None]:
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


class MemoryTools:
    """The tool handlers: bind the owner, call one MemoryClient method, return its result."""

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
        with _tool_errors():
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
        with _tool_errors():
            items = self.client.list(
                user_id=self.owner(user_id), scope=scope, limit=limit, after_id=cursor
            )
            more = items[-1].id if items and len(items) == limit else None
            return MemoryPage(items=items, next_cursor=more)

    def memory_get(
        self, node_id: Annotated[UUID, Field(description="The memory's id.")], user_id: UserId = None
    ) -> MemoryRecord:
        """One of the owner's memories (an error when missing or another owner's)."""
        with _tool_errors():
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

    def update_sent(self, node_id: UUID, user_id: str | None = None, **changes: Any) -> MemoryRecord:
        """``memory_update`` as called over MCP: ``changes`` holds exactly the arguments the
        caller sent, so an explicit null reaches ``MemoryClient.update`` as None (the store
        default, clearing an optional field) while an omitted one is kept, as HTTP PATCH does."""
        with _tool_errors():
            return self.client.update(node_id, user_id=self.owner(user_id), **changes)

    def memory_delete(
        self, node_id: Annotated[UUID, Field(description="The memory's id.")], user_id: UserId = None
    ) -> Deleted:
        """Delete one of the owner's memories: {deleted: true}, or an error when missing."""
        with _tool_errors():
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
        with _tool_errors():
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

    def memory_get_retrieval_receipt(self, request_id: UUID, user_id: UserId = None) -> RetrievalReceipt | None:
        """Return the owner's saved retrieval receipt for request_id, or null; changes nothing."""
        with _tool_errors():
            return (self.client.get_retrieval_receipt(request_id, user_id=self.owner(user_id)))

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
        with _tool_errors():
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

    def memory_get_relevance(self, feedback_id: UUID, user_id: UserId = None) -> RelevanceRecord | None:
        """Return the owner's relevance judgment with this feedback_id, or null; changes nothing."""
        with _tool_errors():
            return (self.client.get_relevance(feedback_id, user_id=self.owner(user_id)))

    def memory_list_relevance(
        self, user_id: UserId = None, limit: Limit = 100, after_id: UUID | None = None
    ) -> list[RelevanceRecord]:
        """List the owner's relevance judgments ordered by feedback_id (page with after_id); changes nothing."""
        with _tool_errors():
            return (
                self.client.list_relevance(
                    user_id=self.owner(user_id), limit=limit, after_id=after_id
                )
            )

    # ------------------------------------------------------------- learning gate 1
    def memory_evaluate_learning(
        self,
        user_id: UserId = None,
        scopes: Scopes = None,
        surface: Literal["results", "context"] = "results",
        config: LearningConfig | None = None,
        query_groups: Annotated[
            dict[str, str] | None,
            Field(description="Request id → group name, to merge paraphrased queries."),
        ] = None,
        max_records: StrictInt = 10_000,
    ) -> LearningEvaluation:
        """Gate 1: fit ranking multipliers from the owner's judgments and validate them on held-out query groups; appends the attested report and changes no ranking."""
        with _tool_errors():
            return (
                self.client.evaluate_learning(
                    user_id=self.owner(user_id),
                    scopes=scopes,
                    surface=surface,
                    config=config,
                    query_groups=query_groups,
                    max_records=max_records,
                )
            )

    # ------------------------------------------------------------- learning gate 2
    def memory_evaluate_full_retrieval(
        self,
        trials: list[FullRetrievalTrial],
        proposal_input_checksum: Sha256Hex,
        memory_artifact_sha256: Sha256Hex,
        candidate_multipliers: Annotated[
            RankingMultipliers | None,
            Field(description="The multipliers every candidate arm applied; omitted: the proposal's."),
        ] = None,
        user_id: UserId = None,
        scopes: Scopes = None,
        baseline_multipliers: RankingMultipliers | None = None,
        config: FullRetrievalEvaluationConfig | None = None,
    ) -> FullRetrievalEvaluation:
        """Gate 2: evaluate paired baseline/candidate retrievals of a fixed holdout against complete relevance; appends the attested report and changes no ranking."""
        with _tool_errors():
            owner = self.owner(user_id)
            if candidate_multipliers is None:
                proposal = self.client.get_learning_evaluation(
                    proposal_input_checksum, user_id=owner
                )
                if proposal is None:
                    raise InvalidInputError(
                        "candidate_multipliers",
                        f"required: the proposal {proposal_input_checksum} is not in this pack",
                    )
                candidate_multipliers = proposal.multipliers
            return (
                self.client.evaluate_full_retrieval(
                    trials,
                    user_id=owner,
                    scopes=scopes,
                    proposal_input_checksum=proposal_input_checksum,
                    memory_artifact_sha256=memory_artifact_sha256,
                    candidate_multipliers=candidate_multipliers,
                    baseline_multipliers=baseline_multipliers,
                    config=config,
                )
            )

    # ------------------------------------------------- ranking profiles and the pointer
    def memory_create_ranking_profile(
        self,
        proposal_input_checksum: Sha256Hex | None = None,
        holdout_input_checksum: Sha256Hex | None = None,
        proposal: Annotated[
            dict[str, Any] | None,
            Field(description="The whole gate-1 report, only if it is not in this pack."),
        ] = None,
        holdout: Annotated[
            dict[str, Any] | None,
            Field(description="The whole gate-2 report, only if it is not in this pack."),
        ] = None,
        user_id: UserId = None,
        profile_id: Annotated[
            UUID | None, Field(description="A UUID making creation idempotent; new by default.")
        ] = None,
        baseline_profile_id: UUID | None = None,
    ) -> RankingProfile:
        """Create an immutable ranking profile from a passing proposal and holdout (by input_checksum, or whole reports made by another pack); appends the profile and activates nothing."""
        with _tool_errors():
            return self.client.create_ranking_profile(
                proposal,
                holdout,
                user_id=self.owner(user_id),
                profile_id=profile_id,
                baseline_profile_id=baseline_profile_id,
                proposal_input_checksum=proposal_input_checksum,
                holdout_input_checksum=holdout_input_checksum,
            )

    def memory_get_ranking_profile(self, profile_id: UUID, user_id: UserId = None) -> RankingProfileStatus | None:
        """Return {profile, active, latest_change} for the owner's profile, or null; changes nothing."""
        with _tool_errors():
            return (
                self.client.get_ranking_profile_status(profile_id, user_id=self.owner(user_id))
            )

    def memory_list_ranking_profiles(
        self, user_id: UserId = None, limit: Limit = 100, after_id: UUID | None = None
    ) -> list[RankingProfile]:
        """List the owner's ranking profiles with their evidence (page with after_id); changes nothing."""
        with _tool_errors():
            return (
                self.client.list_ranking_profiles(
                    user_id=self.owner(user_id), limit=limit, after_id=after_id
                )
            )

    def memory_get_active_ranking_profile(
        self, user_id: UserId = None, scopes: Scopes = None
    ) -> RankingProfile | None:
        """Return the profile active for the exact scope set, or null; changes nothing."""
        with _tool_errors():
            return (
                self.client.get_active_ranking_profile(user_id=self.owner(user_id), scopes=scopes)
            )

    def memory_list_ranking_profile_history(
        self,
        user_id: UserId = None,
        scopes: Scopes = None,
        limit: Limit = 100,
        after_change_id: Annotated[
            UUID | None,
            Field(description="The change_id of the last transition seen: the next older page."),
        ] = None,
    ) -> list[RankingProfileState]:
        """List the activation, deactivation and rollback transitions of the exact scope set, newest first (page with after_change_id); changes nothing."""
        with _tool_errors():
            return (
                self.client.list_ranking_profile_history(
                    user_id=self.owner(user_id),
                    scopes=scopes,
                    limit=limit,
                    after_change_id=after_change_id,
                )
            )

    def memory_activate_ranking_profile(
        self, profile_id: UUID, user_id: UserId = None, change_id: UUID | None = None
    ) -> RankingProfileState:
        """Activate a ranking profile for its owner and exact scope set; appends one transition that changes later retrievals."""
        with _tool_errors():
            return (
                self.client.activate_ranking_profile(
                    profile_id, user_id=self.owner(user_id), change_id=change_id
                )
            )

    def memory_deactivate_ranking_profile(
        self, user_id: UserId = None, scopes: Scopes = None, change_id: UUID | None = None
    ) -> RankingProfileState | None:
        """Return the exact scope set to base scoring; appends one transition (null and nothing written when no profile is active)."""
        with _tool_errors():
            return (
                self.client.deactivate_ranking_profile(
                    user_id=self.owner(user_id), scopes=scopes, change_id=change_id
                )
            )

    def memory_rollback_ranking_profile(
        self,
        profile_id: Annotated[
            UUID | None,
            Field(description="A profile this scope set had active before; null = base scoring."),
        ] = None,
        user_id: UserId = None,
        scopes: Scopes = None,
        change_id: UUID | None = None,
    ) -> RankingProfileState:
        """Point the exact scope set back at a previously active profile or base scoring; appends one transition that changes later retrievals."""
        with _tool_errors():
            return (
                self.client.rollback_ranking_profile(
                    profile_id, user_id=self.owner(user_id), scopes=scopes, change_id=change_id
                )
            )


# memory_retrieve's argument name → the retrieval parameter it sets.
RETRIEVE_PARAMETERS: dict[str, str] = {mcp: name for name, mcp in MCP_NAMES.items()}


def _retrieve_signature() -> inspect.Signature:
    """memory_retrieve's published signature: the query, the owner, every surface parameter of
    RetrievalRequest (MCP's names and JSON types, prme.models.request) and ``details``."""
    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    own = inspect.signature(MemoryTools.memory_retrieve).parameters
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


setattr(MemoryTools.memory_retrieve, "__signature__", _retrieve_signature())  # noqa: B010

READ_ONLY = ToolAnnotations(read_only_hint=True)
_ANNOTATIONS: dict[str, ToolAnnotations] = {
    "memory_list": READ_ONLY,  # memory management (issue 21 item 1)
    "memory_get": READ_ONLY,
    "memory_delete": ToolAnnotations(destructive_hint=True, idempotent_hint=False),
    "memory_get_retrieval_receipt": READ_ONLY,
    "memory_get_relevance": READ_ONLY,
    "memory_list_relevance": READ_ONLY,
    "memory_get_ranking_profile": READ_ONLY,
    "memory_list_ranking_profiles": READ_ONLY,
    "memory_get_active_ranking_profile": READ_ONLY,
    "memory_list_ranking_profile_history": READ_ONLY,
}


CORE_TOOLS = frozenset(
    {
        "memory_store",
        "memory_retrieve",
        "memory_record_relevance",
        "memory_list",
        "memory_get",
        "memory_delete",
        "memory_update",
    }
)
# Tools whose handler takes exactly the arguments sent (an explicit null differs from an omitted
# argument), and the published parameters that accept null to clear a field.
_SENT_ONLY: dict[str, str] = {"memory_update": "update_sent"}
_CLEARABLE: dict[str, frozenset[str]] = {
    "memory_update": frozenset({"metadata", "event_time", "valid_to"}),
}


def _sent_arguments(self: ArgModelBase) -> dict[str, Any]:
    """The arguments the caller sent, one level deep (omitted ones are absent, not None)."""
    fields = type(self).model_fields
    return {fields[name].alias or name: getattr(self, name) for name in self.model_fields_set}


def _nullable(schema: dict[str, Any], names: frozenset[str]) -> None:
    """Let the parameters ``names`` of a published input schema be null (a null clears)."""
    for name in names:
        prop = schema["properties"][name]
        prop["type"] = [prop["type"], "null"]


def _strict_tool(handlers: MemoryTools, name: str, bound: bool) -> Tool:
    """A tool whose argument model forbids unknown arguments (a typo must not be ignored),
    with a described input schema and a structured output schema."""
    fn = getattr(handlers, name)
    tool = Tool.from_function(fn, structured_output=False, annotations=_ANNOTATIONS.get(name))
    base = tool.fn_metadata.arg_model
    namespace: dict[str, Any] = {"model_config": ConfigDict(extra="forbid")}
    if name in _SENT_ONLY:
        namespace["model_dump_one_level"] = _sent_arguments
    strict = cast("type[ArgModelBase]", type(base.__name__, (base,), namespace))
    tool.fn_metadata.arg_model = strict
    tool.parameters = input_schema(name, strict.model_json_schema(by_alias=True), bound)
    _nullable(tool.parameters, _CLEARABLE.get(name, frozenset()))
    output, wrap = output_schema(get_type_hints(fn)["return"])
    tool.fn_metadata.output_schema = output
    tool.fn = structured(getattr(handlers, _SENT_ONLY.get(name, name)), wrap)
    return tool


TOOL_NAMES: tuple[str, ...] = tuple(
    name for name in vars(MemoryTools) if name.startswith("memory_")
)
TOOL_SETS: dict[str, Callable[[str], bool]] = {
    "core": lambda name: name in CORE_TOOLS,
    "all": lambda name: True,
}


def build_server(
    client: MemoryClient,
    config: MCPConfig,
    *,
    transport: Transport = "stdio",
    issuer_url: str = "http://127.0.0.1",
    tools: str | None = None,
) -> MCPServer[Any]:
    """Build the MCP server over ``client``.

    Args:
        client: the open pack every tool acts on.
        config: ``user_id`` binds the owner (stdio, or HTTP without keys); ``user_keys`` are the
            per-user bearer keys of the HTTP transport.
        transport: ``stdio`` or ``http``; keys only apply to ``http``.
        issuer_url: the server's own base URL (the SDK's auth settings require one).
        tools: ``core`` (store, retrieve, judge and the memory tools) or ``all`` (adds the
            receipt, learning and profile tools); defaults to ``config.tools``.

    Raises:
        InvalidInputError: an empty or shared key in ``config.user_keys``, an unknown tool set.
    """
    tool_set = tools or config.tools
    if tool_set not in TOOL_SETS:
        raise InvalidInputError("tools", f"unknown tool set {tool_set!r}; use {', '.join(TOOL_SETS)}")
    keys = KeyRing(config.user_keys, "mcp.user_keys") if transport == "http" else None
    handlers = MemoryTools(client, _Owner(config.user_id, keys))
    bound = (keys is not None and keys.enabled) or config.user_id is not None
    kwargs: dict[str, Any] = {}
    if keys is not None and keys.enabled:
        kwargs["token_verifier"] = _KeyVerifier(keys)
        kwargs["auth"] = AuthSettings(issuer_url=issuer_url, resource_server_url=None)
    return MCPServer(
        "prme",
        instructions=(
            "Long-term memory with retrieval receipts, relevance judgments and gated ranking "
            "profiles. Store memories, retrieve them, judge results, then learn."
        ),
        tools=[
            _strict_tool(handlers, name, bound)
            for name in TOOL_NAMES
            if TOOL_SETS[tool_set](name)
        ],
        log_level="WARNING",
        **kwargs,
    )


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def owner_problem(config: MCPConfig, transport: Transport) -> str | None:
    """Why a server with ``config`` must not start (it would bind nobody), or None."""
    bound = config.user_id is not None or (transport == "http" and bool(config.user_keys))
    return None if bound or config.multi_owner else OWNER_UNBOUND


def serve(
    client: MemoryClient,
    config: MCPConfig,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
) -> None:
    """Serve ``client`` over stdio, or streamable HTTP at ``http://host:port/mcp``, until stopped.

    Raises:
        InvalidInputError: an empty or shared key in ``config.user_keys``.
        PermissionError: nobody bound (no ``user_id``, no HTTP keys) without
            ``config.multi_owner``; HTTP without ``config.user_keys`` on a non-loopback ``host``.
    """
    problem = owner_problem(config, transport)
    if problem is not None:
        raise PermissionError(problem)
    if transport == "stdio":
        build_server(client, config).run("stdio")
        return
    if not config.user_keys and not _is_loopback(host):
        raise PermissionError(LOOPBACK_ONLY)
    import uvicorn

    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    sock.listen(128)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    server = build_server(client, config, transport="http", issuer_url=f"http://{shown}:{bound}")
    app = server.streamable_http_app(host=host)
    print(f"prme MCP server listening on http://{shown}:{bound}/mcp", file=sys.stderr, flush=True)
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    asyncio.run(uv.serve(sockets=[sock]))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m prme.mcp --path DIR [--create] [--user-id U | --multi-owner] [--transport
    stdio|http --host H --port N]``; a missing pack is refused (exit 1) unless ``--create``."""
    parser = argparse.ArgumentParser(prog="prme-mcp", description="Serve a memory pack over MCP.")
    parser.add_argument("--path", default=".", help="memory pack directory (it must exist)")
    parser.add_argument(
        "--create", action="store_true", help="create the pack if missing (default: refuse)"
    )
    parser.add_argument("--user-id", help="bind every call to this owner (PRME_MCP__USER_ID)")
    parser.add_argument(
        "--multi-owner",
        action="store_true",
        help="bind nobody: every call names its user_id (PRME_MCP__MULTI_OWNER=true)",
    )
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument(
        "--tools",
        choices=tuple(TOOL_SETS),
        help="core: store, retrieve, judge and the memory tools; all (default, PRME_MCP__TOOLS) "
        "adds the receipt, learning and profile tools",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP listen address")
    parser.add_argument("--port", type=int, default=8765, help="HTTP port (0 picks a free one)")
    args = parser.parse_args(argv)

    config = PRMEConfig()
    update: dict[str, Any] = {"user_id": args.user_id} if args.user_id is not None else {}
    if args.multi_owner:
        update["multi_owner"] = True
    if args.tools is not None:
        update["tools"] = args.tools
    config = config.model_copy(update={"mcp": config.mcp.model_copy(update=update)})
    problem = owner_problem(config.mcp, args.transport)
    if problem is not None:
        parser.error(problem)
    if args.transport == "http" and not config.mcp.user_keys and not _is_loopback(args.host):
        parser.error(LOOPBACK_ONLY)
    try:
        opened = MemoryClient(Path(args.path), config=config, create=args.create)
    except PackNotFoundError as exc:
        print(f"error: {serve_hint(exc)}", file=sys.stderr)
        return 1
    with opened as client:
        serve(client, config.mcp, transport=args.transport, host=args.host, port=args.port)
    return 0
