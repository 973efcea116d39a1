"""Query groups and the deterministic, size-independent train/validation split.

A request's query is normalized (:func:`normalize_query`); requests with the same normalized query
always share a group, and callers may merge paraphrases under an explicit name. A group is named by
its identity, ``["explicit", name]`` or ``["query", normalized]`` (the two namespaces cannot
collide), and hashed into a ``group_id``. Each group's split depends only on the seed and its own
id, so adding feedback never moves an existing group between train and validation.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Sequence

from prme.errors import InvalidInputError

EXPLICIT = "explicit"
QUERY = "query"
_KINDS = (EXPLICIT, QUERY)


def normalize_query(text: str) -> str:
    """The normalized form of a query: ``" ".join(casefold(NFKC(text)).split())``.

    Unicode NFKC first, then ``str.casefold``, then every run of whitespace becomes one space and
    leading/trailing whitespace is dropped.
    """
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def group_identity(normalized_query: str, explicit_name: str | None) -> list[str]:
    """The identity of a query's group: ``["explicit", explicit_name]`` or ``["query", query]``.

    Args:
        normalized_query: the output of :func:`normalize_query` for the request's query.
        explicit_name: the caller-supplied group name for that query, or None. It is used as
            given (not normalized).

    Raises:
        InvalidInputError: ``normalized_query`` is not normalized, or ``explicit_name`` is blank.
    """
    if normalize_query(normalized_query) != normalized_query:
        raise InvalidInputError("normalized_query", "must already be normalized", normalized_query)
    if explicit_name is None:
        return [QUERY, normalized_query]
    if not explicit_name.strip():
        raise InvalidInputError(
            "explicit_name", "Query group identities must be nonempty", explicit_name
        )
    return [EXPLICIT, explicit_name]


def _checked(identity: Sequence[str]) -> list[str]:
    if (
        isinstance(identity, str)
        or len(identity) != 2
        or identity[0] not in _KINDS
        or not isinstance(identity[1], str)
    ):
        raise InvalidInputError(
            "identity", f"must be [kind, name] with kind one of {list(_KINDS)}", identity
        )
    return [identity[0], identity[1]]


def group_id(identity: Sequence[str]) -> str:
    """``sha256(json.dumps(identity, ensure_ascii=False)).hexdigest()``.

    Python's default separators (``", "`` and ``": "``) are part of the formula, so ids match
    the reference implementation.

    Raises:
        InvalidInputError: ``identity`` is not ``[kind, name]`` with kind explicit or query.
    """
    text = json.dumps(_checked(identity), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def group_label(identity: Sequence[str]) -> str:
    """The readable name of a group: the explicit name or the normalized query (``identity[1]``).

    Raises:
        InvalidInputError: ``identity`` is not ``[kind, name]`` with kind explicit or query.
    """
    return _checked(identity)[1]


def split_unit(seed: int, group_id: str) -> float:
    """``u = int(sha256(f"{seed}:{group_id}").hexdigest(), 16) / 2**256``, a value in [0, 1).

    Args:
        seed: the split seed (``LearningConfig.seed``); changing it reshuffles every group.
        group_id: the group's hash from :func:`group_id`.
    """
    digest = hashlib.sha256(f"{seed}:{group_id}".encode()).hexdigest()
    return int(digest, 16) / 2**256


def is_validation(seed: int, group_id: str, validation_fraction: float) -> bool:
    """True iff ``split_unit(seed, group_id) < validation_fraction`` (the group is validation).

    Raises:
        InvalidInputError: ``validation_fraction`` is not strictly between 0 and 1.
    """
    if not 0.0 < validation_fraction < 1.0:
        raise InvalidInputError(
            "validation_fraction", "must be strictly between 0 and 1", validation_fraction
        )
    return split_unit(seed, group_id) < validation_fraction
