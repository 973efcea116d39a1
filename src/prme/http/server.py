"""Run the HTTP API with uvicorn: ``python -m prme.http.server --path ./memories``.

Without user keys (``PRME_API__USER_KEYS``) anyone who can reach the port may act as any
owner, so the server then refuses to listen anywhere but loopback. A missing pack is an error
(create it with ``prme init``), unless ``--create`` asks to serve a new, empty one.
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Sequence
from pathlib import Path

import uvicorn

from prme.client import MemoryClient
from prme.config import PRMEConfig
from prme.errors import InvalidInputError, PackNotFoundError, serve_hint
from prme.http.app import create_app
from prme.stopping import sigterm_exits

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, config: PRMEConfig) -> None:
    """Refuse a non-loopback ``host`` while no user keys are configured."""
    if not config.api.user_keys and not is_loopback(host):
        raise InvalidInputError(
            "host",
            f"refusing to listen on {host!r} without user keys; set PRME_API__USER_KEYS "
            "or listen on 127.0.0.1",
            host,
        )


def serve(
    path: str | Path,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    config: PRMEConfig | None = None,
    *,
    log_level: str = "info",
    postgres_url: str | None = None,
    create: bool = False,
) -> None:
    """Serve the pack at ``path`` over HTTP until interrupted.

    Args:
        path: the memory pack directory; it must exist unless ``create``.
        host: the interface; anything but loopback requires ``config.api.user_keys``.
        port: the TCP port.
        config: a PRMEConfig; by default read from the environment (``PRME_*``).
        log_level: uvicorn's log level.
        postgres_url: serve the PostgreSQL pack at this URL instead of ``path``.
        create: create a missing pack (recording the configuration's retrieval settings, as
            ``prme init`` does) instead of refusing to start.

    Raises:
        InvalidInputError: a non-loopback ``host`` without user keys, or bad key settings.
        PackNotFoundError: no pack at ``path`` (or an uninitialised PostgreSQL schema) and
            not ``create``; nothing is created.
    """
    settings = config or PRMEConfig()
    check_bind(host, settings)
    opened = MemoryClient(path, config=settings, postgres_url=postgres_url, create=create)
    with opened as client, sigterm_exits():
        app = create_app(client, settings.api)
        uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m prme.http.server", description=__doc__)
    parser.add_argument("--path", default=".", help="memory pack directory (default: .)")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"interface (default: {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port (default: 8000)")
    parser.add_argument("--log-level", default="info", help="uvicorn log level (default: info)")
    parser.add_argument("--postgres", default=None, help="PostgreSQL URL (instead of --path)")
    parser.add_argument(
        "--create", action="store_true", help="create the pack if missing (default: refuse)"
    )
    args = parser.parse_args(argv)
    try:
        serve(
            args.path,
            args.host,
            args.port,
            log_level=args.log_level,
            postgres_url=args.postgres,
            create=args.create,
        )
    except PackNotFoundError as exc:
        parser.exit(1, f"error: {serve_hint(exc)}\n")
    except InvalidInputError as exc:
        parser.exit(2, f"error: {exc}\n")


if __name__ == "__main__":
    main()
