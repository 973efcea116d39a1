"""What the retrieval stages read of the engine's retrieval configuration.

A structural type, so the stages stay independent of ``prme.config`` (which reads the
environment): ``prme.config.RetrievalConfig`` satisfies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class RetrievalSettings(Protocol):
    @property
    def default_limit(self) -> int: ...
    @property
    def token_budget(self) -> int: ...
    @property
    def vector_k(self) -> int: ...
    @property
    def lexical_k(self) -> int: ...
    @property
    def graph_max_candidates(self) -> int: ...
    @property
    def graph_max_hops(self) -> int: ...
    @property
    def unverified_confidence_threshold(self) -> float: ...
    @property
    def epistemic_weights(self) -> Mapping[str, float]: ...
