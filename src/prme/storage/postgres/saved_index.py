"""The owners' column indexes of a PostgreSQL pack, saved in the pack itself, so that a new
process loads an owner's index instead of rebuilding it from the rows.

The format is the SQLite pack's saved index (:mod:`prme.index.index_file`): the same files,
written by :func:`index_file.save` into the store's private working directory and then stored in
``owner_index_parts`` as parts of at most :data:`PART_BYTES`, with the owner's HNSW segment
files (:mod:`prme.index.ann`) as ``ann/<key>.usearch``. ``owner_indexes`` holds one manifest per
owner: the stamp (what the files were made from: pack, owner, the owner's delete sequence,
dimension, and how many rows up to which rowid) and each file's size and SHA-256, attested with
the pack's secret (HMAC), all replaced in one transaction. An index is saved when :func:`due`,
by the store's saving thread (:mod:`prme.storage.postgres.index_saves`), not in the retrieve
that found it due.

Loading checks, in order: the attestation, the stamp against the database exactly as the SQLite
pack checks its files (the same pack, owner, owner's delete sequence and dimension, and the
owner's row count up to the stamp's rowid; every delete and supersede of the owner's memories
moves the owner's delete sequence, the only writes that change rows an index already holds; a
stamp of an earlier delete sequence is read when each step since is logged (``owner_changes``):
the rows removed since are not counted, then taken out, and the superseded ones re-read; a
manifest stamped with the pack-wide ``delete_seq`` of earlier versions is not read), then each
file's size and SHA-256 as it is streamed into the working directory, then
:func:`index_file.load`'s own shape checks. Anything else (missing, stale, another owner's,
tampered or partial) is never served: the index is rebuilt from the rows, and saved again. Rows
written after the save are appended to the loaded index as to an index kept in memory.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import psycopg

from prme.index import index_file
from prme.index.ann import AnnPolicy
from prme.index.owner_index import SEGMENT_LOG, OwnerIndex
from prme.index.postings import OwnerPostings
from prme.storage.owner_indexes import rows_removed_since
from prme.storage.postgres import changes
from prme.storage.postgres.migrations import Conn

FORMAT = 1
PART_BYTES = 16 << 20  # one stored part (a bytea value) of a file
ANN = "ann"  # the working directory's segment files, and their names' prefix in the pack
ATTESTED = "attestation"  # in a local copy: the attestation of the manifest it was made from

Attest = Callable[[Any], str]
Trace = Callable[[str], None]


def _run(trace: Trace, conn: Conn, sql: str, params: tuple[Any, ...]) -> psycopg.Cursor[Any]:
    trace(sql)
    return conn.execute(sql, params, binary=True)  # bytea as raw bytes, not hex text


def _manifest(
    trace: Trace, conn: Conn, user_id: str, attest: Attest
) -> tuple[index_file.IndexStamp, dict[str, tuple[int, str]], str] | None:
    """The owner's saved stamp, files (name → (bytes, SHA-256)) and attestation, when the
    attestation holds."""
    row = _run(
        trace,
        conn,
        "SELECT manifest, attestation FROM owner_indexes WHERE user_id = %s",
        (user_id,),
    ).fetchone()
    if row is None:
        return None
    try:
        manifest = json.loads(row[0])
        if not hmac.compare_digest(attest(manifest), str(row[1])):
            return None
        if manifest.get("format") != FORMAT:
            return None
        stamp = index_file.IndexStamp.from_json(manifest["stamp"])
        files = {str(n): (int(v[0]), str(v[1])) for n, v in manifest["files"].items()}
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
    return stamp, files, str(row[1])


def _attested(directory: Path) -> str | None:
    """The attestation of the manifest a local copy was made from (None: no complete copy)."""
    try:
        return (directory / ATTESTED).read_text("utf-8")
    except OSError:
        return None


def _download(
    trace: Trace, conn: Conn, user_id: str, name: str, expected: tuple[int, str], path: Path
) -> bool:
    """Stream one stored file to ``path`` (atomically), checking its size and SHA-256."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.partial")
    digest, size, part = hashlib.sha256(), 0, 0
    try:
        with partial.open("wb") as out:
            while size < expected[0] or part == 0:
                row = _run(
                    trace,
                    conn,
                    "SELECT data FROM owner_index_parts WHERE user_id = %s AND name = %s"
                    " AND part = %s",
                    (user_id, name, part),
                ).fetchone()
                if row is None or not row[0]:
                    break
                data = row[0]
                digest.update(data)
                out.write(data)
                size += len(data)
                part += 1
        if (size, digest.hexdigest()) != expected:
            return False
        os.replace(partial, path)
        return True
    finally:
        partial.unlink(missing_ok=True)


def load(
    trace: Trace,
    conn: Conn,
    root: Path,
    key: tuple[str, str, int, int],
    ann: AnnPolicy | None,
    attest: Attest,
) -> OwnerIndex | None:
    """The owner's saved index, when it matches the database (see the module's docstring);
    ``key`` is ``(pack_id, user_id, owner's delete_seq, dimension)``, ``conn`` in the caller's read
    snapshot, ``root`` the store's working directory. Saved at an earlier delete sequence, it
    is read when every step since is logged (the rows removed since are not counted), and
    caught up with them."""
    found = _manifest(trace, conn, key[1], attest)
    if found is None:
        return None
    stamp, files, attestation = found
    pack_id, user_id, delete_seq, dimension = key
    if (stamp.pack_id, stamp.user_id, stamp.dimension) != (pack_id, user_id, dimension):
        return None
    steps = changes.logged_steps(trace, conn, user_id)
    removed = rows_removed_since(steps, stamp.delete_seq, delete_seq, stamp.max_rowid)
    if removed is None:
        return None
    row = _run(
        trace,
        conn,
        "SELECT COUNT(*) FROM memories WHERE user_id = %s AND rowid <= %s"
        " AND NOT rowid = ANY(%s)",
        (user_id, stamp.max_rowid, removed),
    ).fetchone()
    if row is None or int(row[0]) != stamp.size - len(removed):
        return None
    directory = index_file.owner_directory(root, user_id)
    if _attested(directory) != attestation and not _fetch(
        trace, conn, user_id, files, directory, attestation
    ):
        return None
    ann_dir = root / ANN
    index = index_file.load(directory, stamp, ann=ann, ann_dir=ann_dir)
    if index is None:
        return None
    if index.ann is not None:  # the segments this policy keeps at this size, if saved
        ann_dir.mkdir(exist_ok=True)
        for segment in index_file.segment_keys(index, index.kept_graphs(stamp.size)):
            name = f"{ANN}/{segment}.usearch"
            path = ann_dir / f"{segment}.usearch"
            if name in files and not path.exists():
                with suppress(OSError):  # a segment that fails its check is rebuilt
                    _download(trace, conn, user_id, name, files[name], path)
    if stamp.delete_seq == delete_seq:
        return index
    return changes.caught_up(trace, conn, index, user_id, delete_seq)


def _fetch(
    trace: Trace,
    conn: Conn,
    user_id: str,
    files: dict[str, tuple[int, str]],
    directory: Path,
    attestation: str,
) -> bool:
    """Download the saved index files into ``directory`` (replaced whole), each checked."""
    partial = directory.with_name(f"{directory.name}.{os.getpid()}.{threading.get_ident()}.dl")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        for name, expected in files.items():
            if name.startswith(f"{ANN}/"):
                continue
            if "/" in name or not _download(trace, conn, user_id, name, expected, partial / name):
                return False
        (partial / ATTESTED).write_text(attestation, "utf-8")
        # a loaded index maps its files: the directory replaced here stays readable to them
        old = directory.with_name(f"{directory.name}.{os.getpid()}.{threading.get_ident()}.old")
        if directory.exists():
            os.replace(directory, old)
        os.replace(partial, directory)
        shutil.rmtree(old, ignore_errors=True)
        return True
    except OSError:
        return False
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _upload(trace: Trace, conn: Conn, user_id: str, name: str, path: Path) -> tuple[int, str]:
    digest, size, part = hashlib.sha256(), 0, 0
    with path.open("rb") as source:
        while data := source.read(PART_BYTES):
            digest.update(data)
            _run(
                trace,
                conn,
                "INSERT INTO owner_index_parts(user_id, name, part, data) VALUES (%s, %s, %s, %b)",
                (user_id, name, part, data),
            )
            size += len(data)
            part += 1
    return size, digest.hexdigest()


def save(
    trace: Trace,
    conn: Conn,
    root: Path,
    stamp: index_file.IndexStamp,
    index: OwnerIndex,
    attest: Attest,
    postings: OwnerPostings | None = None,
) -> bool:
    """Save ``index`` (built up to ``stamp``) for its owner, with its lexical ``postings`` when
    they cover it, replacing what was saved, in ``conn``'s transaction (the caller holds the
    owner's save lock). The segments the policy keeps at this size are built first, so a
    new process loads them too; a segment saved before with the same key (its rows and the
    policy) is kept, not uploaded again."""
    user_id = stamp.user_id
    ranges = index.complete_segments()  # the stamp's size is the index's
    directory = index_file.owner_directory(root, user_id)
    index_file.save(index, directory, stamp, postings)
    previous = _manifest(trace, conn, user_id, attest)
    kept = previous[1] if previous is not None else {}
    segments = {
        f"{ANN}/{key}.usearch": root / ANN / f"{key}.usearch"
        for key in index_file.segment_keys(index, ranges)
    }
    local = {
        p.name: p for p in sorted(directory.iterdir()) if p.name not in (SEGMENT_LOG, ATTESTED)
    }
    local |= {name: path for name, path in segments.items() if path.is_file()}
    reuse = {
        name: kept[name]
        for name, path in local.items()
        if name.startswith(f"{ANN}/") and name in kept and kept[name][0] == path.stat().st_size
    }
    _run(
        trace,
        conn,
        "DELETE FROM owner_index_parts WHERE user_id = %s AND NOT (name = ANY(%s))",
        (user_id, sorted(reuse)),
    )
    files = dict(reuse)
    for name, path in local.items():
        if name not in reuse:
            files[name] = _upload(trace, conn, user_id, name, path)
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "stamp": stamp.as_json(),
        "files": {name: list(value) for name, value in sorted(files.items())},
    }
    attestation = attest(manifest)
    _run(
        trace,
        conn,
        "INSERT INTO owner_indexes(user_id, manifest, attestation) VALUES (%s, %s, %s)"
        " ON CONFLICT (user_id) DO UPDATE SET manifest = EXCLUDED.manifest,"
        " attestation = EXCLUDED.attestation",
        (user_id, json.dumps(manifest, sort_keys=True), attestation),
    )
    # this copy is the saved one (if the transaction fails, the pack's attestation differs)
    (directory / ATTESTED).write_text(attestation, "utf-8")
    return True
