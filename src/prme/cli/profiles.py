"""The ``profiles`` group: inspect ranking profiles and move the activation pointer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from prme.cli.learn import show_profile
from prme.cli.options import (
    CLIError,
    Group,
    Target,
    change_option,
    pack_command,
    resolve_profile_id,
    scope_set,
    scopes_option,
)
from prme.cli.output import (
    multipliers_text,
    scopes_text,
    table,
)
from prme.errors import (
    NotFoundError,
)
from prme.models.profiles import RankingProfileState


# ------------------------------------------------------------------------------- profiles
@click.group(cls=Group)
def profiles() -> None:
    """Inspect ranking profiles and move the activation pointer."""


def _show_states(states: Sequence[RankingProfileState | None]) -> None:
    rows = [
        (
            s.changed_at.isoformat(),
            s.action,
            s.previous_profile_id or "base",
            s.active_profile_id or "base",
            s.change_id,
        )
        for s in states
        if s is not None
    ]
    if not rows:
        click.echo("no change: no profile was active")
        return
    table(("changed at", "action", "previous", "active", "change id"), rows)


@profiles.command("list")
@click.option("--limit", default=100, show_default=True, help="Page size (1–1000).")
@click.option("--after-id", help="Last profile id of the previous page.")
@pack_command()
def profiles_list(target: Target, limit: int, after_id: str | None) -> None:
    """List the owner's ranking profiles, newest first."""
    with target.open() as memory:
        found = memory.list_ranking_profiles(user_id=target.user_id, limit=limit, after_id=after_id)
    rows = [
        (
            p.profile_id,
            p.created_at.isoformat(),
            scopes_text(p.scopes),
            multipliers_text(p.multipliers),
        )
        for p in found
    ]
    target.show(found, lambda: table(("profile id", "created at", "scopes", "multipliers"), rows))


@profiles.command("show")
@click.argument("profile_id")
@pack_command()
def profiles_show(target: Target, profile_id: str) -> None:
    """Show a profile, whether it is active, and its pointer's latest change."""
    with target.open() as memory:
        profile_id = resolve_profile_id(memory, target.user_id, profile_id)
        status = memory.get_ranking_profile_status(profile_id, user_id=target.user_id)
    if status is None:
        raise NotFoundError("Ranking profile", profile_id)

    def render() -> None:
        show_profile(status.profile)
        click.echo(f"active: {status.active}")
        _show_states([status.latest_change])

    target.show(status, render)


@profiles.command("active")
@scopes_option
@pack_command()
def profiles_active(target: Target, scopes: Sequence[str]) -> None:
    """Show the profile active for the exact scope set (or base scoring)."""
    with target.open() as memory:
        active = memory.get_active_ranking_profile(user_id=target.user_id, scopes=scope_set(scopes))
    if active is None:
        return target.show(None, lambda: click.echo("base scoring (no active profile)"))
    target.show(active, lambda: show_profile(active))


@profiles.command("history")
@scopes_option
@click.option("--limit", default=100, show_default=True, help="Most recent transitions (1–1000).")
@click.option("--after-change-id", help="Last change id of the previous page (older ones next).")
@pack_command()
def profiles_history(
    target: Target, scopes: Sequence[str], limit: int, after_change_id: str | None
) -> None:
    """List the pointer transitions of the exact scope set, newest first."""
    with target.open() as memory:
        states = memory.list_ranking_profile_history(
            user_id=target.user_id,
            scopes=scope_set(scopes),
            limit=limit,
            after_change_id=after_change_id,
        )
    target.show(states, lambda: _show_states(states))


@profiles.command("activate")
@click.argument("profile_id")
@change_option
@pack_command()
def profiles_activate(target: Target, profile_id: str, change_id: str | None) -> None:
    """Activate a profile for its owner and exact scope set."""
    with target.open() as memory:
        state = memory.activate_ranking_profile(
            resolve_profile_id(memory, target.user_id, profile_id),
            user_id=target.user_id,
            change_id=change_id,
        )
    target.show(state, lambda: _show_states([state]))


@profiles.command("deactivate")
@scopes_option
@change_option
@pack_command()
def profiles_deactivate(target: Target, scopes: Sequence[str], change_id: str | None) -> None:
    """Return the exact scope set to base scoring."""
    with target.open() as memory:
        state = memory.deactivate_ranking_profile(
            user_id=target.user_id, scopes=scope_set(scopes), change_id=change_id
        )
    target.show(state, lambda: _show_states([state]))


@profiles.command("rollback")
@click.argument("profile_id", required=False)
@click.option("--to-base", is_flag=True, help="Roll back to base scoring instead of a profile.")
@scopes_option
@change_option
@pack_command()
def profiles_rollback(
    target: Target, profile_id: str | None, to_base: bool, scopes: Sequence[str], change_id: Any
) -> None:
    """Point the scope set back at a profile it had active before (or --to-base)."""
    if (profile_id is None) != to_base:
        raise CLIError("give either PROFILE_ID or --to-base")
    with target.open() as memory:
        if profile_id is not None:
            profile_id = resolve_profile_id(memory, target.user_id, profile_id)
        state = memory.rollback_ranking_profile(
            profile_id, user_id=target.user_id, scopes=scope_set(scopes), change_id=change_id
        )
    target.show(state, lambda: _show_states([state]))
