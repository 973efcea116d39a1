"""An owner index saved beside the pack, so a reopened pack does not rebuild it from rows.

The files are a cache of what the database holds: the column arrays, the float32 vector matrix
(memory-mapped when loaded, so only the rows a search touches become resident), the memory ids,
content checksums and evidence, and the entity graph's CSR arrays. ``meta.json`` is written last
and stamps what the files were made from: the pack, the owner, the owner's own delete sequence
(moved by every delete and supersede of the owner's memories, the only writes that change rows
an index already holds; another owner's never make it stale), the dimension, and how many rows
up to which rowid. A stamp of the pack-wide delete sequence (``delete_seq``, saved before the
owner's sequence existed) is not read: that index is rebuilt. The store loads the files only
when the stamp matches the database (the owner's row count up to that rowid included), then
appends the rows written since, as it does for an index kept in memory; anything else (a
missing, partial, stale or unreadable directory) is ignored and the index is rebuilt from the
rows.

A SQLite pack's index also keeps the owner's lexical postings (:mod:`prme.index.postings`):
``lexical.json`` (the stamp they were made for and their segments' bounds) and their arrays
(``lexical.*.npy``), memory-mapped when loaded (postings saved before the document postings
existed have those derived from their instances on loading); without them (a PostgreSQL
pack's index, or one saved before) the postings are derived from the rows again.

An owner whose vectors are sparse also keeps their postings (:mod:`prme.index.sparse_vectors`)
when they are built at the save: ``sparse.json`` (the stamp and the blocks' bounds) and the
blocks' arrays (``sparse.<i>.*.npy`` by dimension, ``sparse.<i>.row_*.npy`` by row),
memory-mapped when loaded. Without them the postings are built again in the background, and
the vectors scanned in full meanwhile; an index of sparse vectors saved without them, or
without the arrays by row, counts as unsaved, so it is saved again with them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from prme.index import strings
from prme.index.ann import segment_key
from prme.index.entity_graph import EntityGraph
from prme.index.lexical import shared_postings
from prme.index.owner_index import NUMERIC_COLUMNS, SEGMENT_LOG, OwnerIndex
from prme.index.postings import ARRAYS, DOCUMENT_ARRAYS, OFFSET_DTYPES, OwnerPostings
from prme.index.sparse_vectors import Block, RowEntries, complete, shared_blocks
from prme.index.stacked_rows import StackedRows
from prme.index.strings import StringColumn

FORMAT = 2  # 2: every array its own .npy (memory-mapped), strings as blob + offsets
META = "meta.json"
STRING_COLUMNS = ("ids", "content_sha256", "evidence")
GRAPH_ARRAYS = ("offsets", "positions", "position_offsets", "name_ids")
SEGMENTS = "segments.json"  # the ANN segment files the saved index uses (their keys)
LEXICAL = "lexical.json"  # the lexical postings' stamp and segments (SQLite packs)
SPARSE = "sparse.json"  # the sparse vectors' postings: their stamp and blocks


@dataclass(frozen=True)
class IndexStamp:
    """What a saved owner index was made from."""

    pack_id: str
    user_id: str
    delete_seq: int  # the owner's delete sequence (stored as ``owner_delete_seq``)
    dimension: int
    size: int
    max_rowid: int

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "pack_id": self.pack_id,
            "user_id": self.user_id,
            "owner_delete_seq": self.delete_seq,
            "dimension": self.dimension,
            "size": self.size,
            "max_rowid": self.max_rowid,
        }

    @classmethod
    def from_json(cls, values: dict[str, Any]) -> IndexStamp:
        """The stamp :meth:`as_json` wrote (the caller checks its ``format``).

        Raises:
            KeyError, TypeError, ValueError: a field is missing or malformed.
        """
        return cls(
            pack_id=str(values["pack_id"]),
            user_id=str(values["user_id"]),
            delete_seq=int(values["owner_delete_seq"]),
            dimension=int(values["dimension"]),
            size=int(values["size"]),
            max_rowid=int(values["max_rowid"]),
        )


def owner_directory(root: Path, user_id: str) -> Path:
    """Where the owner's index is saved under ``root`` (the name never reveals the owner)."""
    return root / f"owner-{hashlib.sha256(user_id.encode()).hexdigest()[:32]}"


def read_stamp(directory: Path) -> IndexStamp | None:
    try:
        meta = json.loads((directory / META).read_text("utf-8"))
        if meta.get("format") != FORMAT:
            return None
        return IndexStamp.from_json(meta)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _unwrapped(mapped: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """A plain ndarray over the same mapped pages: ``np.memmap`` costs a Python-level
    ``__getitem__`` and ``__array_finalize__`` on every index, a few hundred per retrieve."""
    return mapped.view(np.ndarray)


def _mapped(path: Path, *dtypes: type[np.generic] | np.dtype[Any]) -> npt.NDArray[Any]:
    """A saved array of one of ``dtypes``, memory-mapped (read-only; an index that grows
    copies it first)."""
    try:
        array: npt.NDArray[Any] = _unwrapped(np.load(path, mmap_mode="r"))
    except ValueError:  # an empty array cannot be mapped
        array = np.load(path)
    if array.dtype not in [np.dtype(d) for d in dtypes] or array.ndim != 1:
        raise ValueError(f"{path.name}: unexpected {array.dtype} {array.shape}")
    return array


def segment_keys(index: OwnerIndex, ranges: list[tuple[int, int]]) -> set[str]:
    """The file keys of ``index``'s ANN segments over ``ranges`` (none without a policy)."""
    if index.ann is None:
        return set()
    return {segment_key(index.ann, index.dimension, index.ids, a, b) for a, b in ranges}


def _listed_segments(directory: Path) -> set[str]:
    """The segment keys a saved index listed, and those logged as built for it since."""
    try:
        listed = json.loads((directory / SEGMENTS).read_text("utf-8"))
    except (OSError, ValueError):
        listed = []
    try:
        logged = (directory / SEGMENT_LOG).read_text("utf-8").split()
    except OSError:
        logged = []
    keys = {str(k) for k in listed} if isinstance(listed, list) else set()
    return keys | set(logged)


def prune_segments(ann_dir: Path | None, keys: set[str]) -> None:
    """Delete the segment files of ``keys`` (a process that still maps one keeps its pages)."""
    if ann_dir is None:
        return
    for key in sorted(keys):
        if len(key) == 40 and all(c in "0123456789abcdef" for c in key):  # segment_key's form
            (ann_dir / f"{key}.usearch").unlink(missing_ok=True)


def save(
    index: OwnerIndex, directory: Path, stamp: IndexStamp, postings: OwnerPostings | None = None
) -> None:
    """Write ``index`` (its first ``stamp.size`` rows), and ``postings`` when they cover as
    many, to ``directory``, replacing what is there; ``meta.json`` comes last, so a partial
    write is never loaded.

    The owner's ANN segment files that no longer serve it are deleted: those the previous
    save listed, or this index built, that the index at ``stamp.size`` does not keep
    (after a delete every later position moves; as the owner grows, smaller segments are
    replaced by larger ones). Only this owner's files are ever listed, so no other owner's
    segments are touched."""
    size = stamp.size
    current = segment_keys(index, index.kept_graphs(size))
    superseded = (_listed_segments(directory) | segment_keys(index, list(index.segments))) - current
    graph = index.graph
    if graph.size < size:
        graph = graph.merged(index.fresh_names[: size - graph.size])
    partial = directory.with_name(f"{directory.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        _save_rows(partial / "vectors.npy", index.vectors.blocks(0, size), index.dimension)
        for name, _ in NUMERIC_COLUMNS:
            np.save(partial / f"column.{name}.npy", index.col(name))
        for name in STRING_COLUMNS:
            blob, offsets = strings.encode(getattr(index, name), size)
            np.save(partial / f"{name}.blob.npy", blob)
            np.save(partial / f"{name}.offsets.npy", offsets)
        (partial / "names.json").write_text(json.dumps(list(graph.names)), "utf-8")
        for name in GRAPH_ARRAYS:
            np.save(partial / f"graph.{name}.npy", getattr(graph, name))
        (partial / SEGMENTS).write_text(json.dumps(sorted(current)), "utf-8")
        if postings is not None and postings.size == size:
            _save_postings(partial, postings, stamp)
        _save_sparse(partial, index, stamp)
        (partial / META).write_text(json.dumps(stamp.as_json()), "utf-8")
        old = directory.with_name(f"{directory.name}.{os.getpid()}.{threading.get_ident()}.old")
        if directory.exists():
            os.replace(directory, old)
        os.replace(partial, directory)
        shutil.rmtree(old, ignore_errors=True)
        index.index_dir = directory
        prune_segments(index.ann_dir, superseded)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _save_rows(path: Path, blocks: list[npt.NDArray[np.float32]], dimension: int) -> None:
    """``np.save`` of the rows of ``blocks`` one after another (the same bytes), without
    assembling them in memory first."""
    rows = sum(len(block) for block in blocks)
    header = {"descr": "<f4", "fortran_order": False, "shape": (rows, dimension)}
    with path.open("wb") as out:
        np.lib.format.write_array_header_1_0(out, header)
        for block in blocks:
            np.ascontiguousarray(block, dtype="<f4").tofile(out)


def load(directory: Path, stamp: IndexStamp, **settings: Any) -> OwnerIndex | None:
    """The saved index when its stamp is ``stamp`` (None otherwise, or when unreadable), with
    the lexical postings saved beside it (:func:`load_postings`) shared by it. ``settings`` are
    the :class:`OwnerIndex` fields the store sets (``ann``, ``ann_dir``)."""
    if read_stamp(directory) != stamp:
        return None
    size = stamp.size
    try:
        vectors = _unwrapped(np.load(directory / "vectors.npy", mmap_mode="r"))
        columns = {
            name: _mapped(directory / f"column.{name}.npy", dtype)
            for name, dtype in NUMERIC_COLUMNS
        }
        texts = {
            name: StringColumn(
                _mapped(directory / f"{name}.blob.npy", np.uint8),
                _mapped(directory / f"{name}.offsets.npy", np.int64),
            )
            for name in STRING_COLUMNS
        }
        names = tuple(str(n) for n in json.loads((directory / "names.json").read_text("utf-8")))
        arrays = {name: _mapped(directory / f"graph.{name}.npy", np.int64) for name in GRAPH_ARRAYS}
        graph = EntityGraph(
            names,
            arrays["offsets"],
            arrays["positions"],
            arrays["position_offsets"],
            arrays["name_ids"],
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    shapes_ok = (
        vectors.shape == (size, stamp.dimension)
        and vectors.dtype == np.float32
        and all(len(c) == size for c in columns.values())
        and all(len(t) == size for t in texts.values())
        and graph.size == size
    )
    if not shapes_ok or (size and int(columns["rowid"][-1]) != stamp.max_rowid):
        return None
    index = OwnerIndex(
        stamp.dimension,
        size=size,
        columns=columns,
        vectors=StackedRows.of(vectors),
        ids=texts["ids"],
        content_sha256=texts["content_sha256"],
        evidence=texts["evidence"],
        graph=graph,
        max_rowid=stamp.max_rowid,
        delete_seq=stamp.delete_seq,
        index_dir=directory,
        **settings,
    )
    postings = load_postings(directory, stamp)
    if postings is not None:
        shared_postings(index).postings = postings
    blocks = _load_sparse(directory, stamp)
    shared = shared_blocks(index.derived_values)
    if blocks:
        shared.loaded(blocks)
    # saved without its lexical postings, or its sparse vectors' postings or their rows (saved
    # before they were, or unreadable): it counts as unsaved, so it is saved again with them
    # and the next process does not derive them from every row again
    sparse_kept = all(b.by_row is not None for b in blocks) if blocks else not shared.is_sparse(
        index.vectors, size
    )
    index.saved_size = size if postings is not None and sparse_kept else 0
    return index


def _save_postings(directory: Path, postings: OwnerPostings, stamp: IndexStamp) -> None:
    bounds, arrays = postings.arrays()
    for name, array in arrays.items():
        np.save(directory / f"lexical.{name}.npy", array)
    meta = {"stamp": stamp.as_json(), "segments": bounds}
    (directory / LEXICAL).write_text(json.dumps(meta), "utf-8")


def load_postings(directory: Path, stamp: IndexStamp) -> OwnerPostings | None:
    """The lexical postings saved with the index of ``stamp`` (None when there are none, or
    they were saved for another stamp, or are unreadable)."""
    try:
        meta = json.loads((directory / LEXICAL).read_text("utf-8"))
        if meta.get("stamp") != stamp.as_json():
            return None
        arrays = {
            name: _mapped(
                directory / f"lexical.{name}.npy",
                *(OFFSET_DTYPES if name in ("offsets", "freqs") else (dtype,)),
            )
            for name, dtype in ARRAYS.items()
            # (postings saved before the document postings have them derived on loading)
            if name not in DOCUMENT_ARRAYS or (directory / f"lexical.{name}.npy").exists()
        }
        return OwnerPostings.from_arrays(stamp.size, meta["segments"], arrays)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _save_sparse(directory: Path, index: OwnerIndex, stamp: IndexStamp) -> None:
    """Save the sparse vectors' postings of ``stamp.size`` rows, built first where they are
    not yet (none when the vectors are not sparse)."""
    complete(index.derived_values, index.vectors, stamp.size)
    blocks = shared_blocks(index.derived_values).layout(stamp.size)
    if not blocks:
        return
    for i, block in enumerate(blocks):
        for name in ("offsets", "rows", "values"):
            np.save(_sparse_file(directory, i, name), getattr(block, name))
        if block.by_row is not None:
            for name in ("offsets", "dims", "values"):
                np.save(_sparse_file(directory, i, f"row_{name}"), getattr(block.by_row, name))
    bounds = [[b.start, b.end, b.max_norm] for b in blocks]
    (directory / SPARSE).write_text(json.dumps({"stamp": stamp.as_json(), "blocks": bounds}))


def _sparse_file(directory: Path, i: int, name: str) -> Path:
    """The file of array ``name`` of the sparse postings' block ``i``."""
    return directory / f"sparse.{i}.{name}.npy"


def _load_row_entries(directory: Path, i: int, rows: int, entries: int) -> RowEntries | None:
    """Block ``i``'s entries by row, of ``rows`` rows and ``entries`` entries (None in an
    index saved before they were kept); a ValueError when they do not fit the block."""
    if not _sparse_file(directory, i, "row_offsets").exists():
        return None
    offsets = _mapped(_sparse_file(directory, i, "row_offsets"), np.int64)
    dims = _mapped(_sparse_file(directory, i, "row_dims"), np.uint16, np.int32)
    values = _mapped(_sparse_file(directory, i, "row_values"), np.float32)
    if len(offsets) != rows + 1 or not len(dims) == len(values) == offsets[-1] == entries:
        raise ValueError(f"sparse.{i}: its entries by row do not fit the block")
    return RowEntries(offsets, dims, values)


def _load_sparse(directory: Path, stamp: IndexStamp) -> list[Block]:
    """The sparse vectors' postings saved with the index of ``stamp`` (none when there are
    none, they were saved for another stamp, or are unreadable)."""
    try:
        meta = json.loads((directory / SPARSE).read_text("utf-8"))
        if meta.get("stamp") != stamp.as_json():
            return []
        blocks = []
        for i, (start, end, max_norm) in enumerate(meta["blocks"]):
            offsets = _mapped(_sparse_file(directory, i, "offsets"), np.int64)
            rows = _mapped(_sparse_file(directory, i, "rows"), np.int32)
            values = _mapped(_sparse_file(directory, i, "values"), np.float32)
            if len(offsets) != stamp.dimension + 1 or not len(rows) == len(values) == offsets[-1]:
                return []
            by_row = _load_row_entries(directory, i, int(end) - int(start), int(offsets[-1]))
            blocks.append(
                Block(int(start), int(end), offsets, rows, values, float(max_norm), by_row)
            )
    except (OSError, ValueError, KeyError, TypeError):
        return []
    contiguous = [b.start for b in blocks] == [0, *[b.end for b in blocks[:-1]]]
    return blocks if contiguous and blocks and blocks[-1].end <= stamp.size else []
