"""The MCP server over a memory pack (stdio and streamable HTTP)."""

from prme.mcp.server import TOOL_NAMES, MemoryTools, build_server, main, serve

__all__ = ["TOOL_NAMES", "MemoryTools", "build_server", "main", "serve"]
