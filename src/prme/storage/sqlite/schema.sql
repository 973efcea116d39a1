CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS memories (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    node_type TEXT NOT NULL,
    content TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    metadata TEXT,
    condition_state TEXT,
    session_id TEXT,
    role TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    event_time INTEGER,
    valid_from INTEGER NOT NULL,
    valid_to INTEGER,
    confidence REAL NOT NULL,
    salience REAL NOT NULL,
    confidence_base REAL NOT NULL,
    salience_base REAL NOT NULL,
    epistemic_type TEXT NOT NULL,
    source_type TEXT NOT NULL,
    lifecycle_state TEXT NOT NULL,
    decay_profile TEXT NOT NULL,
    last_reinforced_at INTEGER NOT NULL,
    reinforcement_boost REAL NOT NULL,
    pinned INTEGER NOT NULL,
    evidence_refs TEXT NOT NULL,
    ttl_days INTEGER
);
CREATE INDEX IF NOT EXISTS memories_owner ON memories(user_id, scope);
-- Each owner's content write sequence: bumped in the transaction of every content write to
-- that owner's memories (the frozen-pack check of an owner's holdout); meta.write_seq stays
-- the pack-wide one. An owner without a row has written nothing since packs had this table.
CREATE TABLE IF NOT EXISTS owner_sequences (
    user_id TEXT PRIMARY KEY,
    write_seq INTEGER NOT NULL
) WITHOUT ROWID;
-- Each owner's delete sequence: bumped in the transaction of every delete or update (supersede)
-- of that owner's memories, the writes that change rows an owner index already holds, by the
-- triggers below (so a writer of any version keeps it). It keys the owner's column index, so
-- another owner's deletes never make it stale. An owner without a row has deleted nothing
-- since packs had this table (0).
CREATE TABLE IF NOT EXISTS owner_deletes (
    user_id TEXT PRIMARY KEY,
    delete_seq INTEGER NOT NULL
) WITHOUT ROWID;
-- Which memory each step of an owner's delete sequence changed, and whether it left the
-- owner's rows (a delete, or an update that moved it to another owner) or was changed in place
-- (a supersede): an owner index takes the removed rows out and re-reads the rows changed in
-- place instead of being rebuilt (prme.storage.owner_indexes). Logged by the same triggers; a step without its entry (a
-- writer from before this table) makes the owner's index rebuilt, as before.
CREATE TABLE IF NOT EXISTS owner_changes (
    user_id TEXT NOT NULL,
    delete_seq INTEGER NOT NULL,
    memory_rowid INTEGER NOT NULL,
    removed INTEGER NOT NULL,
    PRIMARY KEY (user_id, delete_seq)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS memories_owner_delete AFTER DELETE ON memories
BEGIN
    INSERT INTO owner_deletes(user_id, delete_seq) VALUES (OLD.user_id, 1)
    ON CONFLICT(user_id) DO UPDATE SET delete_seq = delete_seq + 1; INSERT INTO owner_changes
    SELECT OLD.user_id, delete_seq, OLD.rowid, 1 FROM owner_deletes WHERE user_id = OLD.user_id; END;
CREATE TRIGGER IF NOT EXISTS memories_owner_update AFTER UPDATE ON memories
BEGIN
    INSERT INTO owner_deletes(user_id, delete_seq) VALUES (OLD.user_id, 1)
    ON CONFLICT(user_id) DO UPDATE SET delete_seq = delete_seq + 1; INSERT INTO owner_changes
    SELECT OLD.user_id, delete_seq, OLD.rowid, NEW.user_id IS NOT OLD.user_id FROM owner_deletes
    WHERE user_id = OLD.user_id; END;
CREATE TABLE IF NOT EXISTS vectors (
    rowid INTEGER PRIMARY KEY,
    vec BLOB NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    content, content='memories', content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2'
);
-- Keyed by memory first: every read is by memory (a delete, the digest's join, an owner
-- index's rowid range, export order), and a batch's new links append at the end of the one
-- tree. Packs from before this had the key (user_id, name, memory_rowid) and a second index
-- entities_by_memory; opening one for writing re-keys it (prme.storage.sqlite.upgrades).
CREATE TABLE IF NOT EXISTS entities (
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    memory_rowid INTEGER NOT NULL,
    PRIMARY KEY (memory_rowid, user_id, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS oplog (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    op_id TEXT NOT NULL UNIQUE,
    op_type TEXT NOT NULL,
    user_id TEXT NOT NULL,
    target_id TEXT,
    namespace TEXT,
    created_at INTEGER NOT NULL,
    payload TEXT NOT NULL,
    checksum TEXT NOT NULL
);
-- Covers the stored checksum too: checking judged receipts reads no payload (a row's checksum
-- column sits behind its payload, so reaching it through the table walks overflow pages).
-- It replaces the narrower oplog_target of earlier packs.
DROP INDEX IF EXISTS oplog_target;
CREATE INDEX IF NOT EXISTS oplog_digest ON oplog(op_type, user_id, target_id, checksum);
CREATE INDEX IF NOT EXISTS oplog_namespace ON oplog(op_type, user_id, namespace, created_at, seq);
CREATE TRIGGER IF NOT EXISTS oplog_append_only_update BEFORE UPDATE ON oplog
BEGIN SELECT RAISE(ABORT, 'operations log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS oplog_append_only_delete BEFORE DELETE ON oplog
BEGIN SELECT RAISE(ABORT, 'operations log is append-only'); END;
