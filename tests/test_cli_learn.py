"""``prme learn create`` (prme/cli/learn.py): each report from its JSON file or by the input
checksum of the owner's report stored in the pack, as ``POST /v1/learning/profiles`` takes it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from conftest import make_config
from support.golden import OWNER, Golden, fresh_pack

from prme import MemoryClient
from prme.cli import main

ENV = {"PRME_EMBEDDING__PROVIDER": "hash", "PRME_SCORING__FUSION": "weighted"}


def invoke(args: Sequence[object]) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], env=ENV)


def created(args: Sequence[object]) -> Any:
    result = invoke([*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def refused(args: Sequence[object]) -> str:
    """Exit status 1 and one line ``error: …`` on stderr, nothing on stdout."""
    result = invoke(args)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    return result.stderr.strip()


def profiles_of(path: Path, owner: str) -> list[str]:
    with MemoryClient(path, config=make_config(), create=False) as memory:
        return [str(p.profile_id) for p in memory.list_ranking_profiles(user_id=owner)]


def test_learn_create_takes_stored_reports_by_input_checksum(gold: Golden, tmp_path: Path) -> None:
    path = fresh_pack(gold.root / "frozen", tmp_path / "pack")  # holds both reports
    proposal, holdout = gold.proposal.input_checksum, gold.holdout.input_checksum
    pack = ["--path", path, "--user-id", OWNER]
    stored_holdout = ["--holdout-input-checksum", holdout]
    by_checksum = created(
        ["learn", "create", "--proposal-input-checksum", proposal, *stored_holdout, *pack]
    )
    with MemoryClient(path, config=make_config(), create=False) as memory:
        stored = memory.get_ranking_profile(by_checksum["profile_id"], user_id=OWNER)
    assert stored is not None and by_checksum == stored.model_dump(mode="json")
    assert (stored.proposal, stored.holdout) == (gold.proposal, gold.holdout)
    (tmp_path / "proposal.json").write_text(gold.proposal.model_dump_json())
    mixed = created(
        ["learn", "create", "--proposal", tmp_path / "proposal.json", *stored_holdout, *pack]
    )
    assert mixed["multipliers"] == by_checksum["multipliers"]
    assert mixed["profile_id"] != by_checksum["profile_id"]
    assert set(profiles_of(path, OWNER)) == {mixed["profile_id"], by_checksum["profile_id"]}


def test_learn_create_names_the_option_of_a_bad_checksum_and_writes_nothing(
    gold: Golden, tmp_path: Path
) -> None:
    path = fresh_pack(gold.root / "frozen", tmp_path / "pack")
    proposal, holdout = gold.proposal.input_checksum, gold.holdout.input_checksum
    (tmp_path / "proposal.json").write_text(gold.proposal.model_dump_json())
    (tmp_path / "holdout.json").write_text(gold.holdout.model_dump_json())
    by_checksum = ["--proposal-input-checksum", proposal, "--holdout-input-checksum", holdout]
    unknown = "0" * 64
    file = ["--proposal", tmp_path / "proposal.json"]
    alice, bob = ["--path", path, "--user-id", OWNER], ["--path", path, "--user-id", "bob"]
    cases: list[tuple[list[object], str]] = [
        (
            ["--proposal-input-checksum", unknown, "--holdout-input-checksum", holdout, *alice],
            f"error: --proposal-input-checksum: Proposal report not found: {unknown}",
        ),
        (
            [*file, "--holdout-input-checksum", unknown, *alice],
            f"error: --holdout-input-checksum: Holdout report not found: {unknown}",
        ),
        # Another owner's reports look exactly like missing ones.
        (
            [*by_checksum, *bob],
            f"error: --proposal-input-checksum: Proposal report not found: {proposal}",
        ),
        (
            [*file, "--holdout-input-checksum", holdout, *bob],
            f"error: --holdout-input-checksum: Holdout report not found: {holdout}",
        ),
        (
            ["--proposal-input-checksum", proposal.upper(), *by_checksum[2:], *alice],
            "error: --proposal-input-checksum: must be a SHA-256 hex digest",
        ),
        (
            [*by_checksum, *file, *alice],
            "error: give either --proposal FILE or --proposal-input-checksum SHA256",
        ),
        (
            ["--proposal-input-checksum", proposal, *alice],
            "error: give either --holdout FILE or --holdout-input-checksum SHA256",
        ),
        (
            ["--holdout", tmp_path / "holdout.json", *alice],
            "error: give either --proposal FILE or --proposal-input-checksum SHA256",
        ),
    ]
    for args, expected in cases:
        assert refused(["learn", "create", *args]) == expected, args
    assert profiles_of(path, OWNER) == []
    assert profiles_of(path, "bob") == []
    made = created(["learn", "create", *by_checksum, *alice])
    assert profiles_of(path, OWNER) == [made["profile_id"]]


def test_a_report_file_that_contradicts_itself_is_refused_and_writes_nothing(
    gold: Golden, tmp_path: Path
) -> None:
    """A report file is verified as it is read (its decision follows from its own metrics)."""
    path = fresh_pack(gold.root / "frozen", tmp_path / "pack")
    tampered = {**gold.proposal.model_dump(mode="json"), "decision": "no_improvement"}
    (tmp_path / "proposal.json").write_text(json.dumps(tampered))
    (tmp_path / "queries.jsonl").write_text("")
    pack = ["--path", path, "--user-id", OWNER]
    message = "Value error, Learning evaluation decision does not match its metrics"
    holdout = ["--holdout-input-checksum", gold.holdout.input_checksum]
    file = ["--proposal", tmp_path / "proposal.json"]
    assert refused(["learn", "create", *file, *holdout, *pack]) == f"error: proposal: {message}"
    queries = ["--queries", tmp_path / "queries.jsonl"]
    assert refused(["learn", "holdout", *file, *queries, *pack]) == f"error: --proposal: {message}"
    assert profiles_of(path, OWNER) == []
