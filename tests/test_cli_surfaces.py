"""``prme memories``, ``prme init`` / ``pack configure`` and missing packs, as real processes."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from support.cli import CLEAN, fails, ok, ok_json, one_error, run, run_json


def test_memories_list_get_update_delete(tmp_path: Path) -> None:
    pack = ["--path", tmp_path / "pack", "--user-id", "alice"]
    first = ok("store", "--create", "Aster deploys on Fridays.", *pack).strip()
    second = ok("store", "Aster uses PostgreSQL.", "--scope", "project", *pack).strip()
    listed = ok_json("memories", "list", *pack)
    assert sorted(m["id"] for m in listed) == sorted([first, second])
    assert [m["id"] for m in ok_json("memories", "list", "--scope", "project", *pack)] == [second]
    page = ok_json("memories", "list", "--limit", "1", *pack)
    rest = ok_json("memories", "list", "--limit", "1", "--after-id", page[0]["id"], *pack)
    assert {page[0]["id"], rest[0]["id"]} == {first, second}
    assert ok_json("memories", "get", first, *pack)["content"] == "Aster deploys on Fridays."
    assert "Aster deploys on Fridays." in ok("memories", "get", first, *pack)

    updated = ok_json("memories", "update", first, "--content", "Aster deploys on Tuesdays.", *pack)
    assert updated["supersedes"] == first and updated["content"] == "Aster deploys on Tuesdays."
    old = ok_json("memories", "get", first, *pack)
    assert old["lifecycle_state"] == "superseded" and old["superseded_by"] == updated["id"]
    assert old["valid_to"] is not None
    assert "superseded by" in fails("memories", "update", first, "--content", "again", *pack)
    assert fails("memories", "update", second, "--confidence", "2", *pack).startswith(
        "error: confidence"
    )
    assert fails("memories", "update", second, *pack).startswith("error: changes")

    # Another owner's id is "not found", exactly like a missing one.
    bob = ["--path", tmp_path / "pack", "--user-id", "bob"]
    assert fails("memories", "get", second, *bob) == f"error: Memory not found: {second}"
    assert fails("memories", "delete", second, *bob) == f"error: Memory not found: {second}"
    assert fails("memories", "get", "nope", *pack).startswith("error: node_id")

    assert ok_json("memories", "delete", second, *pack) == {"deleted": True, "node_id": second}
    assert fails("memories", "get", second, *pack) == f"error: Memory not found: {second}"
    assert fails("memories", "delete", second, *pack) == f"error: Memory not found: {second}"
    assert ok_json("pack", "check", "--path", tmp_path / "pack")["ok"] is True

    # Duplicate detection on store.
    again = ok_json("store", "--dedupe", "aster deploys on  TUESDAYS.", *pack)
    assert again["duplicate"] is True and again["node_id"] == updated["id"]


def test_missing_pack_is_never_created(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    for args in (
        ("pack", "check", "--path", missing),
        ("retrieve", "anything", "--path", missing, "--user-id", "alice"),
        ("memories", "list", "--path", missing, "--user-id", "alice"),
        ("store", "text", "--path", missing, "--user-id", "alice"),
        ("profiles", "list", "--path", missing, "--user-id", "alice"),
    ):
        message = one_error(run(*args))
        assert f"no memory pack at {missing}" in message and "prme init" in message, message
        assert not missing.exists()
    here = tmp_path / "cwd"
    here.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "prme", "retrieve", "q", "--user-id", "alice"],
        env=CLEAN,
        cwd=here,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "no memory pack at ." in done.stderr
    assert list(here.iterdir()) == []


def test_init_records_settings_and_later_commands_need_no_environment(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    settings = run_json("init", "--path", pack, "--fusion", "weighted", "--embedder", "hash")
    assert settings["scoring"]["fusion"] == "weighted"
    assert settings["embedding"]["provider"] == "hash"
    assert "already exists" in one_error(run("init", "--path", pack))
    owner = ["--path", pack, "--user-id", "alice"]
    node = run("store", "Aster uses PostgreSQL.", *owner)
    assert node.returncode == 0, node.stderr
    response = run_json("retrieve", "Which database does Aster use?", *owner)
    assert response["metadata"]["fusion"] == "weighted"
    assert run_json("pack", "settings", "--path", pack)["scoring"]["fusion"] == "weighted"
    # A disagreeing environment is an explicit error naming both values...
    message = one_error(run("retrieve", "q", *owner, PRME_SCORING__FUSION="rrf"))
    assert "scoring.fusion='weighted'" in message and "'rrf'" in message
    message = one_error(run("retrieve", "q", *owner, PRME_EMBEDDING__PROVIDER="minilm"))
    assert "embedding.provider='hash'" in message and "'minilm'" in message
    # ...an agreeing one is fine, and `pack configure` changes a setting as a content write.
    assert run("retrieve", "q", *owner, PRME_SCORING__FUSION="weighted").returncode == 0
    seq = run_json("receipt", response["metadata"]["request_id"], *owner)["pack"]["write_seq"]
    changed = run_json("pack", "configure", "--path", pack, "--fusion", "rrf")
    assert changed["scoring"]["fusion"] == "rrf"
    after = run_json("retrieve", "q", *owner)
    assert after["metadata"]["fusion"] == "rrf"
    later = run_json("receipt", after["metadata"]["request_id"], *owner)["pack"]["write_seq"]
    assert later == seq + 1
    message = one_error(run("pack", "configure", "--path", pack, "--embedder", "minilm"))
    assert message.startswith("error: embedding.provider") and "'hash'" in message
    assert "give fusion, embedder or vector_index" in one_error(
        run("pack", "configure", "--path", pack)
    )
    switched = run_json("pack", "configure", "--path", pack, "--vector-index", "hnsw")
    assert switched["retrieval"]["vector_index"] == "hnsw"
    assert "hnsw" in run("pack", "settings", "--path", pack).stdout
    receipt = run_json("receipt", run_json("retrieve", "q", *owner)["metadata"]["request_id"], *owner)
    assert receipt["execution"]["features"]["vector_search"]["method"] == "usearch-hnsw"


def test_judging_an_rrf_retrieval_warns(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    run_json("init", "--path", pack, "--embedder", "hash")  # rrf: the default fusion
    owner = ["--path", pack, "--user-id", "alice"]
    ids = [run("store", text, *owner).stdout.strip() for text in ("Aster uses X.", "Aster Y.")]
    request = run_json("retrieve", "Aster", *owner)["metadata"]["request_id"]
    labels = ["--label", f"{ids[0]}=true", "--label", f"{ids[1]}=false"]
    record = run_json("judge", "--request-id", request, *labels, *owner)
    assert any("rank fusion" in w for w in record["warnings"])
    table = run("judge", "--request-id", request, *labels, *owner)
    assert (
        table.returncode == 0
        and "warning:" in table.stderr
        and "--fusion weighted" in (table.stderr)
    )


def test_readme_first_steps_run_as_written(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[1] / "README.md").read_text("utf-8")
    section = readme[readme.index("## First steps") : readme.index("## Managing memories")]
    (block,) = re.findall(r"```sh\n(.*?)```", section, re.S)
    outputs = []
    for line in block.strip().splitlines():
        words = shlex.split(line)
        assert words[0] == "prme", line
        done = subprocess.run(
            [sys.executable, "-m", "prme", *words[1:]],
            env=CLEAN,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (line, done.stderr)
        outputs.append(done.stdout)
    assert "PostgreSQL 16" in outputs[2] and "fusion weighted" in outputs[2]
    assert "weighted" in outputs[4]
