"""A pack's retrieval settings: recorded when the pack is created, used whenever it is opened.

The settings are the configuration sections that decide what retrieval returns: ``embedding``
(the embedder), ``scoring`` (fusion and weights) and ``retrieval`` (candidate counts, limits,
the packing budget). A pack created explicitly (``prme init``, ``prme demo``, ``store
--create``, ``MemoryClient(path, create=True)``) records them; opening it later takes them
from the pack, and a configured value (environment variable or ``config`` argument) that
disagrees is an :class:`~prme.errors.InvalidInputError` naming both values. ``prme pack
configure`` (``MemoryClient.configure_pack``) changes them as a recorded content write.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from prme.config import EmbeddingConfig, PRMEConfig, RetrievalConfig
from prme.errors import InvalidInputError
from prme.models.retrieval import VECTOR_INDEXES
from prme.models.scoring import ScoringWeights, product_default_scoring

SECTIONS: dict[str, type[BaseModel]] = {
    "embedding": EmbeddingConfig,
    "scoring": ScoringWeights,
    "retrieval": RetrievalConfig,
}
# Fields compared whenever their section is configured at all, even left at the class default
# (``ScoringWeights()`` means weighted fusion; ``EmbeddingConfig()`` means minilm).
ALWAYS_COMPARED = {"embedding": ("provider",), "scoring": ("fusion",), "retrieval": ()}
CONFIGURE_HINT = "leave it unset to use the pack's value, or change the pack: prme pack configure"


def settings_of(config: PRMEConfig) -> dict[str, Any]:
    """The settings a pack created with ``config`` records (JSON values)."""
    return {name: getattr(config, name).model_dump(mode="json") for name in SECTIONS}


def scoring_for(fusion: str) -> ScoringWeights:
    """The scoring a pack gets for ``fusion``: the product default under rrf, else the
    weighted formula's defaults (what ``PRME_SCORING__FUSION=weighted`` configures)."""
    if fusion == "rrf":
        return product_default_scoring()
    try:
        return ScoringWeights(fusion=fusion)
    except ValidationError:
        raise InvalidInputError("fusion", "must be 'weighted' or 'rrf'", fusion) from None


def _configured(config: PRMEConfig) -> dict[str, dict[str, Any]]:
    """The fields the caller configured (environment or argument), per section."""
    found: dict[str, dict[str, Any]] = {}
    for name in SECTIONS:
        if name not in config.model_fields_set:
            continue
        section: BaseModel = getattr(config, name)
        values = section.model_dump(mode="json")
        given = set(section.model_fields_set) | set(ALWAYS_COMPARED[name])
        found[name] = {field: values[field] for field in sorted(given)}
    return found


def apply(config: PRMEConfig, stored: dict[str, Any]) -> PRMEConfig:
    """``config`` with the pack's stored settings in place of its retrieval sections.

    Raises:
        InvalidInputError: a configured value differs from the pack's (``field`` is
            ``section.name``; the message gives both values and the environment variable).
    """
    for section, fields in _configured(config).items():
        packed = stored.get(section, {})
        for name, value in fields.items():
            if name in packed and packed[name] != value:
                variable = f"PRME_{section.upper()}__{name.upper()}"
                raise InvalidInputError(
                    f"{section}.{name}",
                    f"this pack was created with {section}.{name}={packed[name]!r}, but "
                    f"{value!r} is configured ({variable} or the config argument); "
                    f"{CONFIGURE_HINT}",
                    value,
                )
    return adopt(config, stored)


def adopt(config: PRMEConfig, stored: dict[str, Any]) -> PRMEConfig:
    """``config`` with the stored settings' sections, unchecked (after a configure)."""
    update = {
        name: model.model_validate(stored[name]) for name, model in SECTIONS.items() if name in stored
    }
    return config.model_copy(update=update)


def changed(
    stored: dict[str, Any],
    *,
    fusion: str | None,
    embedder: str | None,
    vector_index: str | None = None,
) -> dict[str, Any]:
    """The settings after ``prme pack configure`` (a None argument: unchanged).

    Raises:
        InvalidInputError: ``fusion`` or ``vector_index`` is not one of its values.
    """
    new = {name: dict(values) for name, values in stored.items()}
    if fusion is not None:
        new["scoring"] = scoring_for(fusion).model_dump(mode="json")
    if embedder is not None:
        new["embedding"] = EmbeddingConfig(provider=embedder).model_dump(mode="json")
    if vector_index is not None:
        retrieval = {**new.get("retrieval", {}), "vector_index": vector_index}
        try:
            new["retrieval"] = RetrievalConfig.model_validate(retrieval).model_dump(mode="json")
        except ValidationError:
            valid = " or ".join(repr(name) for name in VECTOR_INDEXES)
            raise InvalidInputError("vector_index", f"must be {valid}", vector_index) from None
    return new
