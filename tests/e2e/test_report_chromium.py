"""The demo's HTML report in a real browser: headless Chromium renders the decisions and plots.

The report is made by ``prme demo --embedder hash`` in a subprocess, opened from disk with
Debian's ``chromium`` (``.ci/run`` installs it when missing; without it the test skips), and
saved as a screenshot under ``tmp_path`` and ``test-artifacts/learning-report.png``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.chromium import CHROMIUM, FLAGS

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
SCREENSHOT = "learning-report.png"

pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK),
    reason="headless Chromium not installed (/usr/bin/chromium); `.ci/run` installs it",
)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``learning.html`` from a real ``prme demo --embedder hash`` run."""
    root = tmp_path_factory.mktemp("report")
    out = root / "learning.html"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRME_")}
    command = [sys.executable, "-m", "prme", "demo", "--path", str(root / "demo-pack")]
    command += ["--embedder", "hash", "--report", str(out)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().splitlines()[-2].endswith(f"report: {out}")
    return out


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One headless Chromium run with its own throwaway profile directory."""
    command = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_chromium_renders_decisions_and_plots(report: Path, tmp_path: Path) -> None:
    done = chromium(tmp_path / "profile-dom", "--dump-dom", report.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    # The decisions of both gates, as rendered badges.
    assert re.search(r'class="decision[^"]*">improved_on_observed_candidates<', dom)
    assert re.search(r'class="decision[^"]*">improved_full_retrieval<', dom)
    assert "Gate 1 — judged candidates" in dom and "Gate 2 — full-retrieval holdout" in dom
    # Plots: inline SVG elements, at least two of them carrying data points.
    svgs = re.findall(r"<svg\b.*?</svg>", dom, flags=re.S)
    with_points = [s for s in svgs if "<circle" in s]
    assert len(svgs) >= 2 and len(with_points) >= 2, (len(svgs), len(with_points))
    scatters = [s for s in svgs if 'aria-label="gate 2 holdout groups"' in s]
    assert scatters and scatters[0].count("<circle") >= 2  # per-group baseline vs candidate
    assert 'aria-label="learned multipliers against neutral"' in dom
    assert "http://" not in dom.replace("http://www.w3.org/", "")  # self-contained

    shot = tmp_path / SCREENSHOT
    done = chromium(
        tmp_path / "profile-shot",
        f"--screenshot={shot}",
        "--window-size=1280,2000",
        report.as_uri(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10 * 1024  # a rendered page, not a blank one
    try:
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copyfile(shot, ARTIFACTS / SCREENSHOT)
    except OSError:
        pass  # a read-only checkout keeps the artifact under tmp_path only
