"""Check a built sdist and wheel against the source tree: the wheel must hold every file under
src/prme (modules and the data the code opens at run time: schema, tokenizer, licence, marker),
and nothing outside the package; the sdist must hold the same files.

Usage: python check_dist.py DIST_DIR   (run from the repository root)
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from pathlib import Path


def source_files() -> set[str]:
    root = Path("src")
    return {
        p.relative_to(root).as_posix()
        for p in (root / "prme").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def main() -> None:
    dist = Path(sys.argv[1])
    (wheel,) = dist.glob("prme-*.whl")
    (sdist,) = dist.glob("prme-*.tar.gz")
    expected = source_files()
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    in_wheel = {n for n in names if n.startswith("prme/")}
    strays = {n for n in names - in_wheel if ".dist-info/" not in n}
    with tarfile.open(sdist) as t:
        in_sdist = {
            n.split("/src/", 1)[1] for n in t.getnames() if "/src/prme/" in n and t.getmember(n).isfile()
        }
    problems = [
        *(f"missing from the wheel: {n}" for n in sorted(expected - in_wheel)),
        *(f"in the wheel but not in src: {n}" for n in sorted(in_wheel - expected)),
        *(f"outside the package in the wheel: {n}" for n in sorted(strays)),
        *(f"missing from the sdist: src/{n}" for n in sorted(expected - in_sdist)),
    ]
    if problems:
        sys.exit("\n".join(problems))
    print(f"check_dist: {wheel.name} and {sdist.name} hold all {len(expected)} package files")


if __name__ == "__main__":
    main()
