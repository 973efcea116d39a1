"""Canonical JSON and checksums: the single encoding behind every checksum and attestation."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from datetime import UTC, datetime, timedelta, timezone
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prme.canonical import (
    canonical_bytes,
    canonical_json,
    canonical_object,
    checksum,
    hmac_hex,
    sha256_hex,
    to_jsonable,
)
from prme.models.base import Frozen, UTCDateTime
from prme.models.scoring import RankingMultipliers


class Stamp(Frozen):
    at: UTCDateTime
    id: UUID


def test_sorted_keys_compact_separators_utf8() -> None:
    assert canonical_json({"b": 1, "a": [1, 2], "é": "ü"}) == '{"a":[1,2],"b":1,"é":"ü"}'
    assert canonical_bytes({"é": "ü"}) == '{"é":"ü"}'.encode()
    assert canonical_json({"z": {"y": 1, "x": 2}}) == '{"z":{"x":2,"y":1}}'


def test_floats_use_shortest_round_trip_repr() -> None:
    assert canonical_json([0.1, 1.0, 1e-11, 0.1 + 0.2]) == "[0.1,1.0,1e-11,0.30000000000000004]"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_are_rejected(bad: float) -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": bad})


def test_datetimes_are_utc_with_z() -> None:
    local = datetime(2026, 9, 1, 14, 30, tzinfo=timezone(timedelta(hours=2)))
    stamp = Stamp(at=local, id=UUID(int=1))
    assert canonical_json(stamp) == (
        '{"at":"2026-09-01T12:30:00Z","id":"00000000-0000-0000-0000-000000000001"}'
    )
    assert canonical_json(Stamp(at=datetime(2026, 9, 1, 12, 30, tzinfo=UTC), id=UUID(int=1))) == (
        canonical_json(stamp)
    )


def test_models_dump_in_json_mode() -> None:
    assert to_jsonable(RankingMultipliers(lexical=2)) == {
        "semantic": 1.0,
        "lexical": 2.0,
        "graph": 1.0,
        "recency": 1.0,
        "salience": 1.0,
        "confidence": 1.0,
    }
    assert to_jsonable([1, 2]) == [1, 2]


def test_nested_models_are_dumped_too() -> None:
    stamp = Stamp(at=datetime(2026, 9, 1, tzinfo=UTC), id=UUID(int=1))
    nested = {"items": [stamp], "one": stamp}
    dumped = {"items": [stamp.model_dump(mode="json")], "one": stamp.model_dump(mode="json")}
    assert canonical_json(nested) == canonical_json(dumped)
    with pytest.raises(TypeError):
        canonical_json({"x": object()})


def test_checksum_is_sha256_of_canonical_bytes() -> None:
    value = {"b": [1, 2.5], "a": "x"}
    assert checksum(value) == hashlib.sha256(b'{"a":"x","b":[1,2.5]}').hexdigest()
    assert sha256_hex("abc") == sha256_hex(b"abc") == hashlib.sha256(b"abc").hexdigest()


def test_hmac_over_canonical_bytes() -> None:
    secret = b"k" * 32
    expected = hmac.new(secret, b'{"a":1}', hashlib.sha256).hexdigest()
    assert hmac_hex(secret, {"a": 1}) == expected
    assert hmac_hex(b"j" * 32, {"a": 1}) != expected


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_round_trip_is_stable(value: object) -> None:
    text = canonical_json(value)
    assert canonical_json(json.loads(text)) == text
    assert checksum(json.loads(text)) == checksum(value)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_an_object_assembled_from_member_texts_is_its_canonical_text(
    value: dict[str, object],
) -> None:
    members = {key: canonical_json(member) for key, member in value.items()}
    assembled = canonical_object(members)
    assert assembled == canonical_json(value)
    # Already-canonical text passes through unchanged, so hashing it hashes the same bytes.
    assert canonical_json(assembled) == assembled
    assert checksum(assembled) == checksum(value)
