"""``python -m prme.mcp``: serve a memory pack over MCP."""

from prme.mcp.server import main

raise SystemExit(main())
