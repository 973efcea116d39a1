"""Scope normalization, scope-set keys and pointer namespaces (reference §A.3, §A.4, §M.6)."""

from __future__ import annotations

import pytest

from prme.errors import InvalidInputError
from prme.models.enums import Scope
from prme.models.scope import normalize_scope, normalize_scope_key, scope_namespace, scope_set_key


def test_none_means_unfiltered() -> None:
    assert normalize_scope(None) is None
    assert scope_set_key(None) is None
    assert normalize_scope_key(None) is None


def test_single_name_or_enum() -> None:
    assert normalize_scope("project") == [Scope.PROJECT]
    assert normalize_scope(Scope.ORGANISATION) == [Scope.ORGANISATION]


def test_sequence_keeps_order_and_duplicates() -> None:
    scopes = ["project", Scope.PERSONAL, "project"]
    assert normalize_scope(scopes) == [Scope.PROJECT, Scope.PERSONAL, Scope.PROJECT]
    assert normalize_scope(("agent",)) == [Scope.AGENT]
    assert scopes == ["project", Scope.PERSONAL, "project"]  # the caller's list is not touched


def test_scope_set_key_is_unique_and_sorted_by_value() -> None:
    every = list(Scope)
    assert scope_set_key(every) == (
        Scope.AGENT,
        Scope.ORGANISATION,
        Scope.PERSONAL,
        Scope.PROJECT,
        Scope.SANDBOX,
        Scope.SYSTEM,
    )
    assert scope_set_key(["project", "project"]) == scope_set_key(["project"]) == (Scope.PROJECT,)
    assert scope_set_key(["project", "personal"]) == (Scope.PERSONAL, Scope.PROJECT)
    assert normalize_scope_key(["project", "personal", "project"]) == (
        Scope.PERSONAL,
        Scope.PROJECT,
    )
    assert scope_set_key(["project"]) != scope_set_key(["personal", "project"])


def test_namespace_vectors_m6() -> None:
    assert scope_namespace(None) == (
        "ranking:74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"
    )
    assert scope_namespace((Scope.PROJECT,)) == (
        "ranking:9fc03879b893ecbb812b7c92b2abc975913cd52f36648db8ca93f46275a71f38"
    )
    assert scope_namespace((Scope.PERSONAL, Scope.PROJECT)) == (
        "ranking:7bb2735c50c0e7a16a4a9adf0c13a14ee6805d17839e281a2985147c5673f563"
    )
    assert scope_namespace(normalize_scope_key(["project", "personal"])) == scope_namespace(
        (Scope.PERSONAL, Scope.PROJECT)
    )


@pytest.mark.parametrize("bad", ["organization", "Project", "", "all"])
def test_invalid_names(bad: str) -> None:
    with pytest.raises(InvalidInputError, match="scope contains an invalid scope name") as info:
        normalize_scope(bad)
    assert info.value.field == "scope"
    with pytest.raises(InvalidInputError, match="scope contains an invalid scope name"):
        normalize_scope(["project", bad])


def test_empty_sequence_is_an_error() -> None:
    empties: list[list[str] | tuple[str, ...]] = [[], ()]
    for empty in empties:
        with pytest.raises(
            InvalidInputError, match="scope must not be empty; use None for an unfiltered request"
        ):
            normalize_scope(empty)


@pytest.mark.parametrize("bad", [b"project", bytearray(b"project"), 3, 1.5, {"project": 1}])
def test_other_types_are_errors(bad: object) -> None:
    with pytest.raises(InvalidInputError) as info:
        normalize_scope(bad)  # type: ignore[arg-type]
    assert info.value.field == "scope"


def test_non_string_element_is_an_error() -> None:
    with pytest.raises(InvalidInputError, match="invalid scope name"):
        normalize_scope(["project", 3])  # type: ignore[list-item]


def test_field_name_is_reported() -> None:
    with pytest.raises(InvalidInputError) as info:
        normalize_scope_key([], "scopes")
    assert info.value.field == "scopes"
