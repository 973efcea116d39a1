"""The ``prme`` command line as users run it: a real ``python -m prme`` process per command.

Each command runs once on its happy path and once on an error: exit status 1 with exactly one
line ``error: ...`` on stderr, or click's usage error (exit status 2). The learning and profile
commands work on a copy of the judged golden pack (``support.golden``), so the
gates pass on real evidence. Several commands share one test to amortize interpreter startup.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import subprocess
import sys
import uuid
from pathlib import Path

from support.cli import CLEAN, ENV, fails, ok, ok_json, one_error, prme, run, run_json, usage_error
from support.golden import HOLDOUT_TIME, OWNER, Golden, fresh_pack

PROJECT = ["--scope", "project"]


def test_store_retrieve_receipt_and_judge(tmp_path: Path) -> None:
    pack = ["--path", tmp_path / "pack", "--user-id", "alice"]
    first = ok("store", "Aster keeps its data in PostgreSQL 16.", "--scope", "project", *pack, "--create")
    first = first.strip()
    assert str(uuid.UUID(first)) == first
    lines = '"Aster used MySQL until 2024."\n{"content": "Aster deploys on Fridays."}\n'
    more = ok_json("store", "--jsonl", "-", "--scope", "project", *pack, input=lines)
    assert len(more) == 2 and first not in more
    assert "TEXT or --jsonl" in fails("store", *pack)
    assert fails("store", "--jsonl", "-", *pack, input="{oops\n").startswith(
        "error: --jsonl line 1: not valid JSON"
    )

    response = ok_json("retrieve", "Which database does Aster use?", *PROJECT, *pack)
    request_id = response["metadata"]["request_id"]
    returned = [r["node"]["id"] for r in response["results"]]
    assert first in returned and set(returned) <= {first, *more}
    assert response["metadata"]["receipt_persisted"] is True
    assert "--user-id" in usage_error("retrieve", "q", "--path", tmp_path / "pack")

    receipt = ok_json("receipt", request_id, *pack)
    assert (receipt["request_id"], receipt["query"]) == (
        request_id,
        "Which database does Aster use?",
    )
    assert [c["node_id"] for c in receipt["candidates"]][: len(returned)] == returned
    missing = str(uuid.uuid4())
    assert fails("receipt", missing, *pack) == f"error: Retrieval receipt not found: {missing}"

    judged = ok("judge", "--request-id", request_id, "--label", f"{first}=true", *pack)
    assert judged.strip().endswith(f": 1 labels on {request_id}")
    bad = fails("judge", "--request-id", request_id, "--label", f"{first}=maybe", *pack)
    assert "expected NODE=true or NODE=false" in bad

    # One judged request is far too few: the table (not only --json) says how many more.
    table = ok("learn", "evaluate", *PROJECT, *pack)
    assert "insufficient_data" in table and "missing groups" in table
    assert "training_queries" in table.split("missing groups", 1)[1]


def test_progress_needs_only_stderr_to_be_a_terminal(tmp_path: Path) -> None:
    # Regression: progress was shown only when stdout was a terminal too, so
    # `prme store --jsonl big.jsonl > ids.txt` stayed silent.
    lines = "".join(json.dumps(f"memory number {i}") + "\n" for i in range(50))
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "prme", "store", "--jsonl", "-", "--create", "--path", tmp_path / "p"],
            env={**ENV, "PRME_USER_ID": "alice"},
            input=lines.encode(),
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=60,
            check=False,
        )
    finally:
        os.close(follower)
    shown = b""
    with contextlib.suppress(OSError):  # EIO once the terminal's other end is closed
        while chunk := os.read(leader, 4096):
            shown += chunk
    os.close(leader)
    assert done.returncode == 0
    assert len(done.stdout.decode().split()) == 50  # the ids, and nothing else, on stdout
    assert b"storing" in shown


def test_learning_profiles_and_pack_commands(gold: Golden, tmp_path: Path) -> None:
    live = fresh_pack(gold.memories, tmp_path / "live")
    frozen = fresh_pack(gold.memories, tmp_path / "frozen")
    pack = ["--path", live, "--user-id", OWNER]

    # pack digest and pack check: a copy has the same content digest; both read a pack.
    digest = ok("pack", "digest", "--path", live).strip()
    assert ok_json("pack", "digest", "--path", frozen) == {"pack_digest": digest}
    assert ok_json("pack", "check", "--path", live)["ok"] is True
    (tmp_path / "file").write_text("not a pack")
    assert "is a file" in usage_error("pack", "digest", "--path", tmp_path / "file")
    assert "is a file" in usage_error("pack", "check", "--path", tmp_path / "file")

    # Gate 1 on the judged pack: the same report the library made, returned again.
    proposal = ok_json("learn", "evaluate", *PROJECT, *pack)
    assert proposal["decision"] == "improved_on_observed_candidates"
    assert proposal["input_checksum"] == gold.proposal.input_checksum
    (tmp_path / "bad.json").write_text("{not json")
    assert "--config: not valid JSON" in fails(
        "learn", "evaluate", "--config", tmp_path / "bad.json", *pack
    )

    # Gate 2 in the frozen copy, from the holdout queries as JSONL.
    (tmp_path / "proposal.json").write_text(json.dumps(proposal))
    queries = [
        {"group_id": group, "query": text, "relevant_ids": relevant}
        for group, text, relevant in gold.holdout_queries()
    ]
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    holdout_args = ["learn", "holdout", "--proposal", tmp_path / "proposal.json", *PROJECT]
    holdout = ok_json(
        *holdout_args,
        "--queries",
        tmp_path / "queries.jsonl",
        "--reference-time",
        HOLDOUT_TIME.isoformat(),
        "--artifact-sha256",
        digest,
        "--frozen",
        "--path",
        frozen,
        "--user-id",
        OWNER,
    )
    assert holdout["decision"] == "improved_full_retrieval"
    assert holdout["ndcg_gain"] == gold.holdout.ndcg_gain
    assert holdout["pack_digest"] == digest
    assert "give either --queries FILE or --trials FILE" in fails(*holdout_args, *pack)

    # learn create: a profile from the two reports; a mismatched pair is refused.
    (tmp_path / "holdout.json").write_text(json.dumps(holdout))
    (tmp_path / "weak.json").write_text(gold.weak_proposal.model_dump_json())
    reports = ["--proposal", tmp_path / "proposal.json", "--holdout", tmp_path / "holdout.json"]
    profile = ok_json("learn", "create", *reports, *pack)
    profile_id = profile["profile_id"]
    assert profile["proposal"]["input_checksum"] == proposal["input_checksum"]
    mismatched = ["--proposal", tmp_path / "weak.json", "--holdout", tmp_path / "holdout.json"]
    assert "holdout.proposal_input_checksum" in fails("learn", "create", *mismatched, *pack)

    # profiles list / show / active before activation.
    assert [p["profile_id"] for p in ok_json("profiles", "list", *pack)] == [profile_id]
    assert "error: limit" in fails("profiles", "list", "--limit", "0", *pack)
    shown = ok_json("profiles", "show", profile_id, *pack)
    assert (shown["profile"]["profile_id"], shown["active"]) == (profile_id, False)
    assert fails("profiles", "show", "not-a-uuid", *pack).startswith("error: profile_id")
    # A unique prefix of 8+ hex digits names a profile (the demo prints 8); a shared one is an
    # error listing the matches.
    assert ok_json("profiles", "show", profile_id[:8], *pack)["profile"]["profile_id"] == profile_id
    twin = profile_id[:9] + ("0" if profile_id[9] != "0" else "1") + profile_id[10:]
    ok_json("learn", "create", *reports, "--profile-id", twin, *pack)
    ambiguous = fails("profiles", "show", profile_id[:8], *pack)
    assert "matches 2 profiles" in ambiguous and twin in ambiguous and profile_id in ambiguous
    assert ok_json("profiles", "show", profile_id[:11], *pack)["profile"]["profile_id"] == profile_id
    absent = ("0" if profile_id[0] != "0" else "1") + profile_id[1:8]
    assert "not found" in fails("profiles", "show", absent, *pack)
    assert ok_json("profiles", "active", *PROJECT, *pack) is None
    assert "base scoring" in ok("profiles", "active", *PROJECT, *pack)
    assert "'galaxy'" in usage_error("profiles", "active", "--scope", "galaxy", *pack)

    # activate → applied on retrieval → deactivate → rollback.
    missing = str(uuid.uuid4())
    state = ok_json("profiles", "activate", profile_id[:11], *pack)
    assert (state["action"], state["active_profile_id"]) == ("activate", profile_id)
    assert "not found" in fails("profiles", "activate", missing, *pack)
    assert ok_json("profiles", "active", "--scope", "PROJECT", *pack)["profile_id"] == profile_id
    query = gold.holdout_queries()[0][1]
    applied = ok_json("retrieve", query, *PROJECT, *pack)["metadata"]
    assert (applied["ranking_profile_status"], applied["ranking_profile_id"]) == (
        "applied",
        profile_id,
    )
    state = ok_json("profiles", "deactivate", *PROJECT, *pack)
    assert (state["action"], state["active_profile_id"]) == ("deactivate", None)
    assert "change_id" in fails("profiles", "deactivate", "--change-id", "nope", *PROJECT, *pack)
    state = ok_json("profiles", "rollback", profile_id, *PROJECT, *pack)
    assert (state["action"], state["active_profile_id"]) == ("rollback", profile_id)
    assert "--to-base" in fails("profiles", "rollback", *PROJECT, *pack)
    history = ok_json("profiles", "history", *PROJECT, *pack)
    assert [s["action"] for s in history] == ["rollback", "deactivate", "activate"]
    assert "rollback" in ok("profiles", "history", *PROJECT, *pack)
    assert "error: limit" in fails("profiles", "history", "--limit", "0", *PROJECT, *pack)

    # learn report: a self-contained HTML file naming the profile.
    out = tmp_path / "report.html"
    assert ok("learn", "report", profile_id, "--out", out, *pack).strip() == str(out)
    html = out.read_text("utf-8")
    assert profile_id in html and html.count("<svg") >= 2
    missing_report = fails("learn", "report", missing, "--out", tmp_path / "x.html", *pack)
    assert missing_report == f"error: Ranking profile not found: {missing}"
    assert not (tmp_path / "x.html").exists()


def test_version_and_unknown_command() -> None:
    assert ok("--version").startswith("prme, version ")
    assert "No such command 'nope'" in usage_error("nope")
    listed = ok("--help")
    for command in ("demo", "judge", "learn", "pack", "profiles", "receipt", "retrieve", "store"):
        assert f"  {command} " in listed


def test_pack_export_import_round_trip(tmp_path: Path) -> None:
    source, target, dump = tmp_path / "source", tmp_path / "target", tmp_path / "pack.jsonl"
    ok("store", "--create", "--path", source, "--user-id", OWNER, "Aster stores its data in PostgreSQL.")
    ok("retrieve", "--path", source, "--user-id", OWNER, "Which database does Aster use?")
    ok("pack", "export", "--path", source, dump)
    ok("pack", "import", "--path", target, dump)
    digest = ok("pack", "digest", "--path", source).strip()
    assert ok("pack", "digest", "--path", target).strip() == digest
    assert ok_json("pack", "check", "--path", target, "--json")["ok"] is True
    assert fails("pack", "import", "--path", target, dump)  # a pack that is not empty
    # `-` is stdout / stdin (the export's summary goes to stderr, not into the data).
    piped = prme("pack", "export", "--path", source, "-")
    assert piped.returncode == 0 and json.loads(piped.stderr)["counts"]["memory"] == 1
    assert piped.stdout == dump.read_text("utf-8")
    assert not (Path.cwd() / "-").exists()
    ok("pack", "import", "--path", tmp_path / "from-stdin", "-", input=piped.stdout)
    assert ok("pack", "digest", "--path", tmp_path / "from-stdin").strip() == digest


def test_pack_index_builds_a_bulk_loaded_owners_index_ahead_of_retrieval(tmp_path: Path) -> None:
    """A pack created with the approximate vector index (the environment at ``prme init``
    records it) and bulk loaded: ``prme pack index`` builds the owner's segments and says so."""
    hnsw = {
        "PRME_EMBEDDING__PROVIDER": "hash",
        "PRME_RETRIEVAL__VECTOR_INDEX": "hnsw",
        "PRME_RETRIEVAL__VECTOR_INDEX_MIN_ROWS": "64",
    }
    pack = ["--path", tmp_path / "pack"]
    assert run("init", *pack, **hnsw).returncode == 0
    words = ("aster", "postgres", "latency", "review", "lisbon", "deploy", "friday", "cache")
    texts = [" ".join(words[(i * 7 + j * 3) % 8] for j in range(5)) + f" {i}" for i in range(200)]
    lines = "".join(json.dumps({"content": t}) + "\n" for t in texts)
    command = [sys.executable, "-m", "prme", "store", "--jsonl", "-", *map(str, pack)]
    stored = subprocess.run(
        [*command, "--user-id", "alice"],
        env=CLEAN,
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stored.returncode == 0, stored.stderr
    report = run_json("pack", "index", *pack, "--user-id", "alice")
    assert report["rows"] == 200 and report["vector_search"] == "hnsw"
    # the graphs searched lag a chunk: under two chunks of rows are scanned exactly
    assert report["hnsw_segments"] == 1 and report["exact_rows"] == 200 - 128
    # the graphs searched once a chunk more is stored are built too: 2 + 1 chunks
    assert len(list((tmp_path / "pack" / "index").glob("*.usearch"))) == 2
    shown = run("pack", "index", *pack, "--user-id", "alice")
    assert shown.returncode == 0 and "vector_search" in shown.stdout and "hnsw" in shown.stdout
    assert "user_id" in one_error(run("pack", "index", *pack, "--user-id", " "))
