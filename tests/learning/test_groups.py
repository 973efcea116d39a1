"""Query normalization, group identities and ids, the hash split (reference §E.6, §E.7, §M.5)."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prme.learning.groups import (
    group_id,
    group_identity,
    group_label,
    is_validation,
    normalize_query,
    split_unit,
)

TELESCOPE_ID = "3eddf1b568fe0d7caa66a6020f02b20a7d01f119a97702d7c7a7ccf851accac0"
EXPLICIT_ID = "720f6579ce34453b7316eb807130ebcf35fffc8db40f97aaf24d484ef871d56d"
QUERY0_ID = "fdfbfea67a22fb5ca88fe5ecfbf8cf798c2392eea069bd62228808ff2a66fba8"


def test_normalize_query_collapses_case_and_whitespace() -> None:
    assert normalize_query("  What  Telescope do I use? ") == "what telescope do i use?"
    assert normalize_query("a\t\nb\u00a0\u3000c") == "a b c"
    assert normalize_query("   ") == ""


def test_normalize_query_applies_nfkc_then_casefold() -> None:
    assert normalize_query("\uff21\uff22") == "ab"  # fullwidth letters
    assert normalize_query("\ufb01le") == "file"  # ligature
    assert normalize_query("Stra\u00dfe") == "strasse"  # casefold, not lower


@given(st.text())
def test_normalize_query_is_idempotent(text: str) -> None:
    once = normalize_query(text)
    assert normalize_query(once) == once


def test_reference_vectors_query_group() -> None:
    identity = group_identity(normalize_query("  What  Telescope do I use? "), None)
    assert identity == ["query", "what telescope do i use?"]
    assert group_id(identity) == TELESCOPE_ID
    assert group_label(identity) == "what telescope do i use?"
    assert split_unit(42, TELESCOPE_ID) == pytest.approx(0.15763, abs=5e-6)
    assert is_validation(42, TELESCOPE_ID, 0.3)


def test_reference_vectors_explicit_group() -> None:
    identity = group_identity("what telescope do i use?", "telescope-model")
    assert identity == ["explicit", "telescope-model"]
    assert group_id(identity) == EXPLICIT_ID
    assert group_label(identity) == "telescope-model"
    assert split_unit(42, EXPLICIT_ID) == pytest.approx(0.293565, abs=5e-7)
    assert is_validation(42, EXPLICIT_ID, 0.3)
    assert not is_validation(42, EXPLICIT_ID, 0.29)


def test_reference_vectors_numbered_query() -> None:
    identity = group_identity(normalize_query("Query 0"), None)
    assert group_id(identity) == QUERY0_ID
    assert split_unit(42, QUERY0_ID) == pytest.approx(0.03953, abs=5e-6)
    assert is_validation(42, QUERY0_ID, 0.3)


def test_group_id_uses_default_json_separators() -> None:
    identity = ["query", "café, ok"]
    expected = hashlib.sha256('["query", "café, ok"]'.encode()).hexdigest()
    assert group_id(identity) == expected
    assert group_id(tuple(identity)) == expected
    compact = json.dumps(identity, ensure_ascii=False, separators=(",", ":"))
    assert group_id(identity) != hashlib.sha256(compact.encode()).hexdigest()


def test_namespaces_cannot_collide() -> None:
    assert group_id(["query", "x"]) != group_id(["explicit", "x"])


def test_split_unit_formula() -> None:
    digest = hashlib.sha256(f"7:{TELESCOPE_ID}".encode()).hexdigest()
    assert split_unit(7, TELESCOPE_ID) == int(digest, 16) / 2**256
    assert split_unit(7, TELESCOPE_ID) != split_unit(42, TELESCOPE_ID)


@given(st.integers(), st.text(min_size=1))
def test_split_unit_in_unit_interval(seed: int, name: str) -> None:
    assert 0.0 <= split_unit(seed, group_id(["explicit", name])) < 1.0


def test_split_is_independent_of_other_groups() -> None:
    ids = [group_id(["query", f"query {i}"]) for i in range(50)]
    alone = {g: is_validation(42, g, 0.3) for g in ids[:10]}
    together = {g: is_validation(42, g, 0.3) for g in ids}
    assert all(together[g] == alone[g] for g in alone)


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_is_validation_rejects_bad_fraction(fraction: float) -> None:
    with pytest.raises(ValueError, match="validation_fraction"):
        is_validation(42, TELESCOPE_ID, fraction)


def test_group_identity_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="nonempty"):
        group_identity("q", "   ")
    with pytest.raises(ValueError, match="normalized_query"):
        group_identity("  Not Normalized", None)


@pytest.mark.parametrize("identity", [["other", "x"], ["query"], ["query", "a", "b"], "qx"])
def test_group_id_rejects_malformed_identity(identity: list[str]) -> None:
    with pytest.raises(ValueError, match="identity"):
        group_id(identity)
    with pytest.raises(ValueError, match="identity"):
        group_label(identity)
