"""The shared pieces of every command: the one-line error, the group that turns
unexpected exceptions into it, the ``--path``/``--user-id``/``--json`` target and the options
and input parsers several command groups use."""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from prme.cli.output import (
    emit_json,
)
from prme.client import MemoryClient
from prme.errors import (
    NotFoundError,
    PRMEError,
    http_status_for,
    public_message,
)
from prme.models.enums import Scope

F = TypeVar("F", bound=Callable[..., Any])
SCOPES = click.Choice([s.value for s in Scope], case_sensitive=False)
SURFACES = click.Choice(["results", "context"])


# ---------------------------------------------------------------- errors and the root group
class CLIError(click.ClickException):
    """A failed command: printed as one line ``error: <message>``, exit status 1."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def one_line(exc: BaseException) -> str:
    """The error's message on one line, worded as the HTTP and MCP surfaces word it."""
    if isinstance(exc, PRMEError | OSError) or http_status_for(exc) < 500:
        text = str(exc)
    else:
        text = f"{public_message(exc)} ({type(exc).__name__}: {exc})"
    return " ".join(text.split()) or type(exc).__name__


class Group(click.Group):
    """Turns every unexpected exception of a subcommand into a one-line CLIError."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            raise CLIError(one_line(exc)) from exc


# ---------------------------------------------------------------------------- shared options
@dataclass(frozen=True)
class Target:
    """The pack, owner and output mode every pack command receives (``--path``, ``--user-id``,
    ``--json``)."""

    path: Path
    user_id: str
    as_json: bool

    def open(self, *, frozen: bool = False, create: bool | None = False) -> MemoryClient:
        """Open the pack; by default a missing one is an error (only ``prme init``, ``demo``,
        ``store --create``, ``serve --create``, ``mcp --create`` and ``pack import`` create
        packs)."""
        return MemoryClient(self.path, frozen=frozen, create=create)

    def show(self, value: Any, render: Callable[[], None]) -> None:
        """Print ``value`` as JSON with ``--json``, otherwise call ``render`` (a table)."""
        if self.as_json:
            emit_json(value)
        else:
            render()


def path_option(default: str = ".") -> Callable[[F], F]:
    kind = click.Path(file_okay=False, path_type=Path)
    return click.option(
        "--path", default=default, show_default=True, type=kind, help="Memory pack directory."
    )


def user_option(default: str | None = None) -> Callable[[F], F]:
    help = "Owner of the memories and judgments (env PRME_USER_ID)."
    if default is None:  # required: no default at all (click treats None as a value)
        return click.option("--user-id", envvar="PRME_USER_ID", required=True, help=help)
    return click.option(
        "--user-id", envvar="PRME_USER_ID", default=default, show_default=True, help=help
    )


json_option = click.option("--json", "as_json", is_flag=True, help="Print the HTTP API's JSON.")
scopes_option = click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=SCOPES,
    help="Scope set; repeat for several; none: unfiltered.",
)
create_option = click.option(
    "--create", is_flag=True, help="Create the pack if missing (settings from the environment)."
)
change_option = click.option("--change-id", help="A stable UUID making a retried change safe.")
surface_option = click.option(
    "--surface", type=SURFACES, default="results", show_default=True, help="Judged surface."
)


def pack_command(*, user: bool = True) -> Callable[[F], F]:
    """Adds ``--path``, ``--user-id`` and ``--json`` and passes them as one ``target``."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, path: Path, as_json: bool, user_id: str = "", **kwargs: Any) -> Any:
            return fn(*args, target=Target(path, user_id, as_json), **kwargs)

        options = [path_option(), *([user_option()] if user else []), json_option]
        return functools.reduce(lambda f, option: option(f), reversed(options), wrapper)  # type: ignore[return-value]

    return decorate


if TYPE_CHECKING:
    _DateTimeParam = click.ParamType[datetime, Any]
else:  # click < 8.3 has no generic ParamType
    _DateTimeParam = click.ParamType


class AwareDateTime(_DateTimeParam):
    """An ISO-8601 timestamp with a timezone (``2026-09-14T00:00:00Z``)."""

    name = "timestamp"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            parsed = datetime.fromisoformat(str(value))
        except ValueError:
            raise CLIError(f"{value!r} is not an ISO-8601 timestamp") from None
        if parsed.tzinfo is None:
            raise CLIError(f"{value!r} needs a timezone, e.g. 2026-09-14T00:00:00Z")
        return parsed


def scope_set(scopes: Sequence[str]) -> list[str] | None:
    return list(scopes) or None


PROFILE_PREFIX = re.compile(r"^[0-9a-f]{8,32}$")


def resolve_profile_id(memory: MemoryClient, user_id: str, given: str) -> str:
    """A full profile UUID, or the one profile of the owner whose id starts with ``given`` (at
    least 8 hex digits, as the demo and tables print them); several matches are an error."""
    text = given.strip().lower()
    try:
        return str(uuid.UUID(text))
    except ValueError:
        pass
    if not PROFILE_PREFIX.match(text.replace("-", "")):
        raise CLIError(f"profile_id: {given!r} is neither a UUID nor a prefix of 8+ hex digits")
    prefix = text.replace("-", "")
    matches: list[str] = []
    after: str | None = None
    while True:
        page = memory.list_ranking_profiles(user_id=user_id, limit=1000, after_id=after)
        matches += [str(p.profile_id) for p in page if p.profile_id.hex.startswith(prefix)]
        if len(page) < 1000:
            break
        after = str(page[-1].profile_id)
    if not matches:
        raise NotFoundError("Ranking profile", given)
    if len(matches) > 1:
        raise CLIError(
            f"profile_id: {given!r} matches {len(matches)} profiles: {', '.join(matches)}"
        )
    return matches[0]


def read_json(source: IO[str], what: str) -> Any:
    try:
        return json.load(source)
    except json.JSONDecodeError as exc:
        raise CLIError(f"{what}: not valid JSON ({exc.msg} at line {exc.lineno})") from None


def read_jsonl(source: IO[str], what: str) -> list[Any]:
    items: list[Any] = []
    for number, line in enumerate(source, start=1):
        if line.strip():
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise CLIError(f"{what} line {number}: not valid JSON ({exc.msg})") from None
    return items
