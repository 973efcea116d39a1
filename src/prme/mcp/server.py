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

The handlers are in :mod:`prme.mcp.tools` (memories, retrieval, judgments) and
:mod:`prme.mcp.learning_tools` (gates and profiles), the owner binding in :mod:`prme.mcp.binding`;
this module publishes them as strict tools and serves them.

Tool sets: ``--tools core`` (``PRME_MCP__TOOLS=core``) lists only store, retrieve, judge and the
memory tools; ``all`` (the default) adds the receipt, learning and profile tools.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import (
    Any,
    cast,
    get_type_hints,
)

from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp_types import ToolAnnotations
from pydantic import ConfigDict

from prme.auth import KeyRing
from prme.client import MemoryClient
from prme.config import MCPConfig, PRMEConfig
from prme.errors import (
    InvalidInputError,
    PackNotFoundError,
    serve_hint,
)
from prme.mcp.binding import (
    LOOPBACK_ONLY,
    KeyVerifier,
    Owner,
    Transport,
    is_loopback,
    owner_problem,
)
from prme.mcp.learning_tools import MemoryTools
from prme.mcp.schemas import input_schema, output_schema, structured
from prme.mcp.tools import RecordTools
from prme.stopping import sigterm_exits

READ_ONLY = ToolAnnotations(read_only_hint=True)
_ANNOTATIONS: dict[str, ToolAnnotations] = {
    "memory_list": READ_ONLY,  # memory management (issue 21 item 1)
    "memory_get": READ_ONLY,
    "memory_delete": ToolAnnotations(destructive_hint=True, idempotent_hint=False),
    "memory_get_retrieval_receipt": READ_ONLY,
    # writes no memory, only the index derived from them; calling it again changes nothing
    "memory_build_index": ToolAnnotations(destructive_hint=False, idempotent_hint=True),
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


# Every tool in definition order: the record tools, then the learning and profile tools.
TOOL_NAMES: tuple[str, ...] = tuple(
    name
    for group in (RecordTools, MemoryTools)
    for name in vars(group)
    if name.startswith("memory_")
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
        raise InvalidInputError(
            "tools", f"unknown tool set {tool_set!r}; use {', '.join(TOOL_SETS)}"
        )
    keys = KeyRing(config.user_keys, "mcp.user_keys") if transport == "http" else None
    handlers = MemoryTools(client, Owner(config.user_id, keys))
    bound = (keys is not None and keys.enabled) or config.user_id is not None
    kwargs: dict[str, Any] = {}
    if keys is not None and keys.enabled:
        kwargs["token_verifier"] = KeyVerifier(keys)
        kwargs["auth"] = AuthSettings(issuer_url=issuer_url, resource_server_url=None)
    return MCPServer(
        "prme",
        instructions=(
            "Long-term memory with retrieval receipts, relevance judgments and gated ranking "
            "profiles. Store memories, retrieve them, judge results, then learn."
        ),
        tools=[
            _strict_tool(handlers, name, bound) for name in TOOL_NAMES if TOOL_SETS[tool_set](name)
        ],
        log_level="WARNING",
        **kwargs,
    )


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
        # its stop is the end of stdin (a client closes it first); a SIGTERM would wait on the
        # thread blocked reading stdin, so it keeps its default (the pack is crash-safe)
        build_server(client, config).run("stdio")
        return
    if not config.user_keys and not is_loopback(host):
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
    with sigterm_exits():
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
    if args.transport == "http" and not config.mcp.user_keys and not is_loopback(args.host):
        parser.error(LOOPBACK_ONLY)
    try:
        opened = MemoryClient(Path(args.path), config=config, create=args.create)
    except PackNotFoundError as exc:
        print(f"error: {serve_hint(exc)}", file=sys.stderr)
        return 1
    with opened as client:
        serve(client, config.mcp, transport=args.transport, host=args.host, port=args.port)
    return 0


__all__ = [
    "CORE_TOOLS",
    "TOOL_NAMES",
    "TOOL_SETS",
    "MemoryTools",
    "build_server",
    "main",
    "owner_problem",
    "serve",
]
