"""An owner's entity links as CSR adjacency arrays: each name's positions in one sorted int64
array, and each position's names, so a query's graph expansion slices arrays."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from prme.index.arrays import group_of_each, offsets_of, renumbered


@dataclass(frozen=True)
class EntityGraph:
    """The entity links of positions ``[0, size)`` as CSR arrays, both ways:
    ``positions[offsets[i]:offsets[i + 1]]`` are the positions (ascending) linked to
    ``names[i]``, and ``name_ids[position_offsets[p]:position_offsets[p + 1]]`` the names
    (by number) of position ``p``."""

    names: tuple[str, ...]
    offsets: npt.NDArray[np.int64]
    positions: npt.NDArray[np.int64]
    position_offsets: npt.NDArray[np.int64]
    name_ids: npt.NDArray[np.int64]
    numbers: dict[str, int] = field(compare=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        if not self.numbers and self.names:
            self.numbers.update({name: i for i, name in enumerate(self.names)})

    @property
    def size(self) -> int:
        return len(self.position_offsets) - 1

    @staticmethod
    def empty() -> EntityGraph:
        zero = np.zeros(1, np.int64)
        return EntityGraph((), zero, np.zeros(0, np.int64), zero, np.zeros(0, np.int64))

    def links(self, name: str) -> npt.NDArray[np.int64]:
        row = self.numbers.get(name)
        if row is None:
            return np.zeros(0, np.int64)
        return self.positions[self.offsets[row] : self.offsets[row + 1]]

    def names_of(self, position: int) -> list[str]:
        ids = self.name_ids[self.position_offsets[position] : self.position_offsets[position + 1]]
        return [self.names[i] for i in ids.tolist()]

    def merged(self, fresh: Sequence[Sequence[str]]) -> EntityGraph:
        """This graph plus the names of the positions after it (``fresh[i]`` for position
        ``size + i``)."""
        numbers = dict(self.numbers)
        names = list(self.names)
        for name in sorted({n for ns in fresh for n in ns} - numbers.keys()):
            numbers[name] = len(names)
            names.append(name)
        counts = np.fromiter((len(ns) for ns in fresh), np.int64, len(fresh))
        new_ids = np.fromiter((numbers[n] for ns in fresh for n in ns), np.int64)
        name_ids = np.concatenate([self.name_ids, new_ids])
        position_offsets = np.concatenate(
            [self.position_offsets, self.position_offsets[-1] + np.cumsum(counts)]
        ).astype(np.int64)
        link_positions = group_of_each(position_offsets)
        order = np.lexsort((link_positions, name_ids))
        offsets = offsets_of(name_ids, len(names))
        return EntityGraph(
            tuple(names), offsets, link_positions[order], position_offsets, name_ids, numbers
        )

    def without(self, removed: npt.NDArray[np.int64]) -> EntityGraph:
        """This graph without the links of the ``removed`` positions (ascending), the later
        positions moved down over them (a name left without links keeps its number)."""
        gone = removed[removed < self.size]
        if not gone.size:
            return self
        kept = self.size - gone.size
        if int(gone[0]) == kept:  # only the newest positions: the others do not move
            keep = self.positions < kept
            return EntityGraph(
                self.names,
                np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))[self.offsets],
                self.positions[keep],
                self.position_offsets[: kept + 1],
                self.name_ids[: self.position_offsets[kept]],
                self.numbers,
            )
        per_position = np.diff(self.position_offsets)
        kept_positions = np.ones(self.size, dtype=np.bool_)
        kept_positions[gone] = False
        position_offsets = np.zeros(kept + 1, np.int64)
        np.cumsum(per_position[kept_positions], out=position_offsets[1:])
        keep, moved = renumbered(self.positions, gone)
        kept_before = np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))
        return EntityGraph(
            self.names,
            kept_before[self.offsets],
            moved,
            position_offsets,
            self.name_ids[np.repeat(kept_positions, per_position)],
            self.numbers,
        )


def expand(
    links: Callable[[str], npt.NDArray[np.int64]],
    names_at: Callable[[int], list[str]],
    names: Sequence[str],
    mask: npt.NDArray[np.bool_] | None,
    max_hops: int,
    limit: int,
) -> dict[int, int]:
    """Entity-graph expansion from the seed ``names``: position → hop (1..max_hops), over the
    positions ``links(name)`` gives and the names ``names_at(position)`` gives, within ``mask``
    (None: every position).

    A name linked to more than ``limit`` memories (a hub, such as a speaker's name in a
    conversation) cannot discriminate and is skipped. Each hop ranks the memories it reaches
    by how many of the hop's names they mention (then by position), takes the best ones up
    to ``limit`` in all, and the next hop expands from their entities.
    """
    found: dict[int, int] = {}
    seen = set(names)
    frontier = sorted(seen)
    for hop in range(1, max_hops + 1):
        if not frontier or len(found) >= limit:
            break
        lists = []
        for name in frontier:
            positions = links(name)
            if mask is None and len(positions) > limit:
                continue  # a hub (no mask can shrink it)
            if mask is not None:
                positions = positions[mask[positions]]
            if 0 < len(positions) <= limit:
                lists.append(positions)
        if not lists:
            break
        hits, counts = np.unique(np.concatenate(lists), return_counts=True)
        if found:
            fresh = ~np.isin(hits, np.fromiter(found, np.int64, len(found)))
            hits, counts = hits[fresh], counts[fresh]
        order = np.lexsort((hits, -counts))
        taken = hits[order][: limit - len(found)].tolist()
        for position in taken:
            found[position] = hop
        next_names = {n for p in taken for n in names_at(p)} - seen
        seen |= next_names
        frontier = sorted(next_names)
    return found
