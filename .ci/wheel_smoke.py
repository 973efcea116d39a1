"""Use an installed prme (a wheel in a fresh virtualenv) as a new user would, from a directory
outside the source tree: the README's Python example, then store → retrieve → pack check →
demo → serve refusing a missing pack, parsing HTTP with httptools, then answering /v1/health.
Run by .ci/wheel-smoke with that virtualenv's Python.

Usage: python wheel_smoke.py README.md
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
PRME = str(VENV_BIN / "prme")


def run(*args: str, timeout: float = 300) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        sys.exit(f"FAILED ({done.returncode}): {' '.join(args)}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def step(name: str) -> None:
    print(f"wheel smoke: {name}", flush=True)


def installed_not_source() -> None:
    from importlib import metadata

    import prme

    location = Path(prme.__file__).resolve()
    if "site-packages" not in location.parts:
        sys.exit(f"prme imported from {location}, not from the installed wheel")
    step(f"prme {metadata.version('prme')} from {location.parent}")


def readme_python_example(readme: Path) -> None:
    """The first ```python block under '## Python', run as written."""
    text = readme.read_text("utf-8")
    section = text[text.index("## Python") :]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    if found is None:
        sys.exit("README has no Python example under '## Python'")
    Path("readme_example.py").write_text(found.group(1), "utf-8")
    out = run(sys.executable, "readme_example.py")
    if "PostgreSQL 16" not in out:
        sys.exit(f"README example printed no stored memory:\n{out}")
    step("README Python example")


def cli_round_trip() -> None:
    pack = "cli-pack"
    base = ("--path", pack, "--user-id", "alice")
    run(PRME, "init", "--path", pack, "--fusion", "weighted")
    run(PRME, "store", "Aster stores its data in PostgreSQL 16.", *base, "--scope", "project")
    run(PRME, "store", "The office café opens at eight.", *base, "--scope", "project")
    answer = json.loads(run(PRME, "retrieve", "Which database does Aster use?", *base, "--json"))
    top = answer["results"][0]["node"]["content"]
    if "PostgreSQL" not in top:
        sys.exit(f"retrieve ranked {top!r} first")
    run(PRME, "pack", "check", "--path", pack)
    if len(json.loads(run(PRME, "memories", "list", *base, "--json"))) != 2:
        sys.exit("prme memories list did not list both memories")
    step("init → store → retrieve → pack check → memories list")


def demo() -> None:
    summary = json.loads(run(PRME, "demo", "--embedder", "hash", "--path", "demo-pack", "--json"))
    decisions = (summary["proposal_decision"], summary["holdout_decision"])
    if decisions != ("improved_on_observed_candidates", "improved_full_retrieval"):
        sys.exit(f"demo gates: {decisions}")
    step("prme demo --embedder hash: both gates passed")


def serve_refuses_a_missing_pack() -> None:
    done = subprocess.run(
        [PRME, "serve", "--path", "no-such-pack", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 1 or "prme init --path no-such-pack" not in done.stderr:
        sys.exit(f"prme serve on a missing pack: exit {done.returncode}\n{done.stderr}")
    if Path("no-such-pack").exists():
        sys.exit("prme serve created the missing pack")
    step("prme serve on a missing pack: refused, nothing created")


def serve() -> None:
    server = subprocess.Popen(
        [PRME, "serve", "--path", "cli-pack", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert server.stderr is not None
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            line = server.stderr.readline()
            if not line and server.poll() is not None:
                sys.exit("prme serve exited before listening")
            found = re.search(r"running on (http://[\d.]+:\d+)", line)
            url = found.group(1) if found else None
        if url is None:
            sys.exit("prme serve did not report its address within 60 s")
        with urllib.request.urlopen(f"{url}/v1/health", timeout=30) as response:
            body = json.loads(response.read())
            if response.status != 200:
                sys.exit(f"/v1/health answered {response.status}: {body}")
        step(f"prme serve: /v1/health {body}")
    finally:
        server.terminate()
        server.wait(timeout=30)


def serve_parses_http_in_c() -> None:
    """The installed server parses HTTP with httptools (a dependency), not h11's Python."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    if AutoHTTPProtocol.__name__ != "HttpToolsProtocol":
        sys.exit(f"uvicorn parses HTTP with {AutoHTTPProtocol.__name__}, not httptools")
    step("prme serve parses HTTP with httptools")


def main() -> None:
    readme = Path(sys.argv[1]).resolve()
    installed_not_source()
    readme_python_example(readme)
    cli_round_trip()
    demo()
    serve_refuses_a_missing_pack()
    serve_parses_http_in_c()
    serve()
    step("ok")


if __name__ == "__main__":
    main()
