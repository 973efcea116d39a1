"""The memories column spec: each backend's schema declares it, and a batch encodes each node
as it would alone."""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from prme.canonical import canonical_json, sha256_hex
from prme.models.memory import MemoryNode
from prme.services.memories import build_node
from prme.storage.columns import (
    DERIVED_COLUMNS,
    INDEX_COLUMNS,
    MEMORY_COLUMNS,
    NODE_COLUMNS,
    VALUE_COLUMNS,
    node_columns,
)
from prme.timeutil import to_us

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def node_rows(nodes: list[MemoryNode]) -> list[tuple[Any, ...]]:
    """The ``memories`` values of each node, row by row (as a store binds them)."""
    return list(zip(*node_columns(nodes), strict=True))


def test_a_batch_encodes_each_node_as_it_would_alone() -> None:
    ref = uuid.uuid4()
    nodes = [
        build_node("plain", user_id="a", now=NOW),
        build_node(
            "timed",
            user_id="a",
            now=NOW,
            # the same instant in another zone, and distinct times
            event_time=NOW.astimezone(timezone(timedelta(hours=5))),
            valid_from=NOW - timedelta(days=1),
            valid_to=NOW + timedelta(microseconds=1),
            metadata={"condition_state": "active", "z": [1, 2.5]},
            pinned=True,
            ttl_days=3,
        ),
        build_node("later", user_id="b", now=NOW + timedelta(seconds=1)),
    ]
    nodes[0] = nodes[0].model_copy(update={"evidence_refs": ()})
    nodes[2] = nodes[2].model_copy(update={"evidence_refs": (ref,)})
    batch = node_rows(nodes)
    assert batch == [node_rows([n])[0] for n in nodes]
    values = [dict(zip(VALUE_COLUMNS, row, strict=True)) for row in batch]
    assert values[1]["event_time"] == to_us(NOW) == values[0]["created_at"]
    assert values[1]["valid_from"] == to_us(NOW) - 86_400_000_000
    assert values[1]["valid_to"] == to_us(NOW) + 1
    assert values[1]["metadata"] == '{"condition_state":"active","z":[1,2.5]}'
    assert values[1]["condition_state"] == "active" and values[1]["pinned"] is True
    assert values[0]["evidence_refs"] == "[]" and values[0]["event_time"] is None
    assert json.loads(values[2]["evidence_refs"]) == [str(ref)]
    assert values[2]["created_at"] == to_us(NOW) + 1_000_000


def test_built_nodes_equal_their_validated_form() -> None:
    """build_node constructs its node without validating it again: every field equals what
    validating the same values gives, and so does the set of given fields."""
    nodes = [
        build_node("plain", user_id="a", now=NOW),
        build_node(
            "all of it",
            user_id="a",
            now=NOW.astimezone(timezone(timedelta(hours=-3))),
            scope="project",
            node_type="instruction",
            role="tool",
            session_id="s",
            confidence=1,
            metadata={"condition_state": "active"},
            event_time=NOW,
            valid_to=NOW + timedelta(days=1),
            ttl_days=0,
            pinned=True,
        ),
    ]
    for node in nodes:
        validated = MemoryNode.model_validate(dict(node))
        assert dict(node) == dict(validated)
        assert list(dict(node)) == list(MemoryNode.model_fields)
        assert node.model_fields_set == validated.model_fields_set
        assert node.created_at.tzinfo is UTC and node.valid_from.tzinfo is UTC
    assert nodes[1].confidence == 1.0 and isinstance(nodes[1].confidence, float)


def test_the_sqlite_schema_declares_the_column_spec_in_order(tmp_path: Path) -> None:
    from prme.storage.sqlite import DB_FILE, SQLiteStore

    SQLiteStore(tmp_path).close()
    conn = sqlite3.connect(tmp_path / DB_FILE)
    try:
        declared = [row[1] for row in conn.execute("PRAGMA table_info(memories)")]
    finally:
        conn.close()
    assert tuple(declared) == MEMORY_COLUMNS
    assert set(NODE_COLUMNS) | set(DERIVED_COLUMNS) == set(VALUE_COLUMNS)
    assert set(NODE_COLUMNS) == set(MemoryNode.model_fields)
    assert set(INDEX_COLUMNS) <= set(VALUE_COLUMNS)


def test_the_postgres_schema_declares_the_column_spec_in_order(postgres_url: str) -> None:
    import psycopg

    from prme.storage.postgres import PostgresStore, drop_schema

    schema = f"t_columns_{uuid.uuid4().hex[:12]}"
    PostgresStore(postgres_url, schema=schema).close()
    try:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            declared = [
                str(name)
                for (name,) in conn.execute(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_schema = %s AND table_name = 'memories' ORDER BY ordinal_position",
                    (schema,),
                )
            ]
    finally:
        drop_schema(postgres_url, schema)
    # then the lexical columns PostgreSQL derives from the content (a trigger) and from those
    # and the owner (generated: the owner's lexical index keys)
    assert tuple(declared) == (*MEMORY_COLUMNS, "tsv", "doc_len")


def _reference_row(node: MemoryNode) -> tuple[object, ...]:
    """One node's columns from the spec, the plain way (attributes, ``.value``, json)."""
    meta = node.metadata
    return (
        str(node.id),
        node.user_id,
        node.scope.value,
        node.node_type.value,
        node.content,
        sha256_hex(node.content),
        None if meta is None else canonical_json(meta),
        None if meta is None or "condition_state" not in meta else str(meta["condition_state"]),
        node.session_id,
        node.role,
        to_us(node.created_at),
        to_us(node.updated_at),
        None if node.event_time is None else to_us(node.event_time),
        to_us(node.valid_from),
        None if node.valid_to is None else to_us(node.valid_to),
        node.confidence,
        node.salience,
        node.confidence_base,
        node.salience_base,
        node.epistemic_type.value,
        node.source_type.value,
        node.lifecycle_state.value,
        node.decay_profile.value,
        to_us(node.last_reinforced_at),
        node.reinforcement_boost,
        node.pinned,
        json.dumps([str(r) for r in node.evidence_refs]),
        node.ttl_days,
    )


def test_rows_equal_the_column_spec_read_plainly() -> None:
    nodes = [
        build_node("plain", user_id="a", now=NOW),
        build_node(
            'Ünïcode "quoted" \\ text',
            user_id="a",
            now=NOW,
            scope="organisation",
            node_type="instruction",
            role="assistant",
            session_id="s1",
            metadata={"condition_state": 3, "k": "é"},
            event_time=NOW - timedelta(days=400),
            valid_to=NOW + timedelta(days=2),
            salience=0.25,
            ttl_days=0,
            pinned=False,
        ),
    ]
    nodes.append(nodes[0].model_copy(update={"evidence_refs": (uuid.uuid4(), uuid.uuid4())}))
    nodes.append(nodes[1].model_copy(update={"evidence_refs": ()}))
    assert node_rows(nodes) == [_reference_row(n) for n in nodes]
    assert all(type(v) is str for row in node_rows(nodes) for v in (row[2], row[3], row[19]))


def test_a_row_read_back_is_the_validated_node_it_was_written_from(tmp_path: Path) -> None:
    """``row_to_node`` skips validation: what it builds must equal the node validated anew,
    field for field and in field order, and dump to the same canonical JSON."""
    from prme import MemoryClient
    from prme.storage.columns import row_to_node

    client = MemoryClient(tmp_path / "pack")
    client.store(
        "dated", user_id="a", event_time=NOW, ttl_days=3, metadata={"k": [1, "x"]},
        node_type="decision", scope="project", pinned=True, confidence=0.9,
    )  # fmt: skip
    client.store_many(["plain", {"content": "salient", "salience": 1.0}], user_id="a")
    db = sqlite3.connect(tmp_path / "pack" / "pack.sqlite3")
    rows = db.execute(f"SELECT {', '.join(NODE_COLUMNS)} FROM memories ORDER BY rowid").fetchall()
    client.close()
    assert len(rows) == 3
    for row in rows:
        node = row_to_node(row)
        again = MemoryNode.model_validate(node.model_dump())
        assert node == again
        assert list(node.__dict__) == list(MemoryNode.model_fields)
        assert node.model_fields_set == again.model_fields_set
        assert canonical_json(node) == canonical_json(again)
