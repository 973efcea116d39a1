"""The ``prme`` command line: a thin surface over :class:`~prme.client.MemoryClient`.

Every command opens the pack named by ``--path`` (configured from ``PRME_*`` variables), calls
one public client method and renders its result: a table for people, or with ``--json`` the same
``model_dump(mode="json")`` the HTTP API returns. Errors print one line, ``error: <message>``,
and exit with status 1. Owners come from ``--user-id`` or ``PRME_USER_ID``.

One module per command group: :mod:`~prme.cli.serve` (``serve``, ``mcp``),
:mod:`~prme.cli.demo`, :mod:`~prme.cli.memories` (``store``, ``retrieve``, ``receipt``,
``judge``, ``memories …``), :mod:`~prme.cli.learn`, :mod:`~prme.cli.profiles` and
:mod:`~prme.cli.pack` (``init``, ``pack …``, ``db …``); the shared options and errors are in
:mod:`~prme.cli.options`, the tables and progress in :mod:`~prme.cli.output`.
"""

from __future__ import annotations

import click

from prme.cli.demo import demo
from prme.cli.learn import learn
from prme.cli.memories import judge, memories, receipt, retrieve, store
from prme.cli.options import Group
from prme.cli.pack import db, init, pack
from prme.cli.profiles import profiles
from prme.cli.serve import mcp, serve


@click.group(cls=Group)
@click.version_option(package_name="prme")
def main() -> None:
    """prme: a local-first memory engine whose ranking learns safely from judgments."""


COMMANDS = (
    serve,
    mcp,
    demo,
    init,
    store,
    retrieve,
    receipt,
    judge,
    memories,
    learn,
    profiles,
    pack,
    db,
)
for command in COMMANDS:
    main.add_command(command)

__all__ = ["main"]
