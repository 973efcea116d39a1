"""``prme serve`` (HTTP) and ``prme mcp`` (MCP over stdio or streamable HTTP)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from prme.cli.options import (
    CLIError,
    create_option,
    path_option,
)
from prme.errors import (
    PackNotFoundError,
    serve_hint,
)


@click.command()
@path_option()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8000, show_default=True, help="TCP port.")
@click.option("--log-level", default="info", show_default=True, help="uvicorn log level.")
@click.option("--postgres", "postgres_url", help="PostgreSQL URL: serve that pack, not --path.")
@create_option
def serve(
    path: Path, host: str, port: int, log_level: str, postgres_url: str | None, create: bool
) -> None:
    """Serve the pack over HTTP (FastAPI; OpenAPI at /docs). The pack must exist (`prme init`)
    unless --create is given."""
    from prme.http.server import serve as serve_http

    try:
        serve_http(path, host, port, log_level=log_level, postgres_url=postgres_url, create=create)
    except PackNotFoundError as exc:
        raise CLIError(serve_hint(exc)) from None


@click.command()
@path_option()
@click.option("--user-id", envvar="PRME_USER_ID", help="Bind every call to this owner.")
@click.option(
    "--multi-owner", is_flag=True, help="Bind nobody: every call names its user_id (explicit)."
)
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    help="MCP transport: stdio or streamable HTTP.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP listen address.")
@click.option("--port", default=8765, show_default=True, help="HTTP port (0: any free one).")
@click.option(
    "--tools",
    type=click.Choice(["core", "all"]),
    default=None,
    help="Tool set: core (store, retrieve, judge, memories) or all (adds learning and profiles).",
)
@create_option
@click.pass_context
def mcp(
    ctx: click.Context,
    /,
    path: Path,
    user_id: str | None,
    multi_owner: bool,
    create: bool,
    **listen: Any,
) -> None:
    """Serve the pack as an MCP server (stdio or streamable HTTP).

    The pack must exist (`prme init`) unless --create is given. It refuses to start when it
    would bind nobody (no --user-id, no HTTP keys) unless --multi-owner is given.
    """
    from prme.mcp.server import main as mcp_main

    argv = ["--path", str(path), *(f"--{k}={v}" for k, v in listen.items() if v is not None)]
    argv += ["--user-id", user_id] if user_id else []
    argv += ["--create"] if create else []
    ctx.exit(mcp_main([*argv, *(["--multi-owner"] if multi_owner else [])]))
