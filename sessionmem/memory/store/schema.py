"""All DDL of the per-agent memory index, in one place.

The index is derived from the Markdown workspace and can always be rebuilt. ``SCHEMA_VERSION``
changes whenever a table changes shape; an index with another version is rebuilt from the files.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

# JSON: provider, model, providerKey, sources, scopeHash, chunking, ftsTokenizer, ftsText, vectorDims
META_KEY = "memory_index_meta_v1"
OWNER_KEY = "memory_index_owner"  # the agent that opened the index first (rebuild.claim_owner)

TABLES = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- One row per indexed file. An unchanged (mtime_ns, size) pair means the file is skipped with a stat.
CREATE TABLE IF NOT EXISTS files (
    path     TEXT PRIMARY KEY,              -- workspace-relative with '/', or sessions/<name>.jsonl
    source   TEXT NOT NULL DEFAULT 'memory', -- 'memory' | 'sessions'
    hash     TEXT NOT NULL,                 -- sha256 of the content as indexed
    mtime_ns INTEGER NOT NULL,
    size     INTEGER NOT NULL,
    date     TEXT,                          -- YYYY-MM-DD the file speaks of (name or mtime)
    audience TEXT NOT NULL DEFAULT 'owner'  -- who may see it (sessionmem.privacy): owner, shared, peer:<chat>
);

CREATE TABLE IF NOT EXISTS chunks (
    id         TEXT PRIMARY KEY,            -- sha256(source:path:start:end:hash:model)
    path       TEXT NOT NULL,
    source     TEXT NOT NULL DEFAULT 'memory',
    start_line INTEGER NOT NULL,            -- 1-based, inclusive (JSONL lines for sessions)
    end_line   INTEGER NOT NULL,
    hash       TEXT NOT NULL,               -- sha256 of text
    model      TEXT NOT NULL,               -- embedding model, or 'fts-only'
    text       TEXT NOT NULL,
    embedding  BLOB,                        -- float32 little-endian, L2-normalised; NULL in FTS-only mode
    date       TEXT,                        -- YYYY-MM-DD of the file or of the chunk's first message
    updated_at INTEGER NOT NULL,
    audience   TEXT NOT NULL DEFAULT 'owner' -- its file's audience; searches filter on it in the query
);
CREATE INDEX IF NOT EXISTS idx_chunks_path ON chunks(path);
CREATE INDEX IF NOT EXISTS idx_chunks_source ON chunks(source);
CREATE INDEX IF NOT EXISTS idx_chunks_hash ON chunks(hash);  -- vectors reused by text (sync_pass._lookup)
-- The chunks with a vector, by its byte length and model: a writing sync counts them (calibration.refresh)
-- from here instead of reading the table (100k chunks: 12 ms, not 220). Led by the length, which only
-- that count names, so a query by model alone never takes it for idx_chunks_hash (0.5 ms -> 250 ms).
CREATE INDEX IF NOT EXISTS idx_chunks_vector_lengths ON chunks(length(embedding), model)
    WHERE embedding IS NOT NULL;

CREATE TABLE IF NOT EXISTS embedding_cache (
    provider     TEXT NOT NULL,
    model        TEXT NOT NULL,
    provider_key TEXT NOT NULL,
    hash         TEXT NOT NULL,             -- sha256 of the embedded text
    embedding    BLOB NOT NULL,             -- float32 little-endian
    dims         INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (provider, model, provider_key, hash)
);
CREATE INDEX IF NOT EXISTS idx_embedding_cache_updated_at ON embedding_cache(updated_at);
"""

# Added after version 1 without a version change: an older index gains them (filled with the fail-closed
# 'owner') and rebuilds once, because the meta's "audience" key differs (rebuild.desired_meta).
ADDED_COLUMNS = {
    "files": ("audience", "TEXT NOT NULL DEFAULT 'owner'"),
    "chunks": ("audience", "TEXT NOT NULL DEFAULT 'owner'"),
}
AUDIENCE_VERSION = 1  # the labelling rule of sessionmem.privacy; a change rebuilds every index
AUDIENCE_INDEX = "CREATE INDEX IF NOT EXISTS idx_chunks_audience ON chunks(audience)"

# The FTS column holds ftstext.fts_text(chunk.context + chunk.text); snippets come from chunks.text.
FTS_TABLE = """
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    text,
    id UNINDEXED,
    path UNINDEXED,
    source UNINDEXED,
    model UNINDEXED,
    start_line UNINDEXED,
    end_line UNINDEXED,
    tokenize = '{tokenizer}'
);
"""


# The FTS5 tokenizer behind each ``store.fts.tokenizer`` name. "porter" (the default) stems English
# words on top of unicode61, so "paintings" finds "painted"; bench/README.md has the measurement.
FTS_TOKENIZERS = {"porter": "porter unicode61", "unicode61": "unicode61", "trigram": "trigram"}


def fts_table_sql(tokenizer: str) -> str:
    """The FTS5 table for a ``store.fts.tokenizer`` name (or a raw FTS5 tokenizer spec)."""
    return FTS_TABLE.format(tokenizer=FTS_TOKENIZERS.get(tokenizer, tokenizer))


def vec_table_sql(dims: int) -> str:
    """sqlite-vec table, created lazily once the embedding dimension is known."""
    return (
        "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING vec0("
        f"id TEXT PRIMARY KEY, embedding float[{int(dims)}] distance_metric=cosine)"
    )


# The columns of a ``chunks`` row as the indexer writes it (``IndexStore.insert_chunks``).
CHUNK_COLUMNS = (
    "id", "path", "source", "start_line", "end_line", "hash", "model", "text", "embedding", "date",
    "updated_at", "audience",
)  # fmt: skip

# PostgreSQL (``pg_store``): one schema per agent holding the same tables with the same columns, plus
# ``rowid`` identity columns (the SQL the engine runs on both names them), ``chunks.indexed`` (the text
# the keyword index holds, ``fts_text`` of context and lines) and the keyword side in a narrow table of its
# own, ``chunks_fts``: ``fts`` is a tsvector of the tokens SQLite's FTS5 makes of ``indexed`` (``fts_tokens``:
# both stores see the same tokens, CJK included), ``fts_len`` their count (BM25's document length). Kept
# out of ``chunks`` (whose rows, with a vector, pass 2 kB and are TOASTed), ranking 14k matches took 10 ms
# instead of 56. Vectors are float32 blobs in ``bytea``, served by the in-process matrix.
PG_TABLES = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS files (
    path     TEXT PRIMARY KEY,
    source   TEXT NOT NULL DEFAULT 'memory',
    hash     TEXT NOT NULL,
    mtime_ns BIGINT NOT NULL,
    size     BIGINT NOT NULL,
    date     TEXT,
    audience TEXT NOT NULL DEFAULT 'owner'
);
CREATE TABLE IF NOT EXISTS chunks (
    rowid      BIGINT GENERATED BY DEFAULT AS IDENTITY UNIQUE,
    id         TEXT PRIMARY KEY,
    path       TEXT NOT NULL,
    source     TEXT NOT NULL DEFAULT 'memory',
    start_line INTEGER NOT NULL,
    end_line   INTEGER NOT NULL,
    hash       TEXT NOT NULL,
    model      TEXT NOT NULL,
    text       TEXT NOT NULL,
    embedding  BYTEA,
    date       TEXT,
    updated_at BIGINT NOT NULL,
    audience   TEXT NOT NULL DEFAULT 'owner',
    indexed    TEXT
);
CREATE INDEX IF NOT EXISTS idx_chunks_path ON chunks(path);
CREATE INDEX IF NOT EXISTS idx_chunks_source ON chunks(source);
CREATE INDEX IF NOT EXISTS idx_chunks_audience ON chunks(audience);
CREATE INDEX IF NOT EXISTS idx_chunks_hash ON chunks(hash);
CREATE TABLE IF NOT EXISTS chunks_fts (
    rowid   BIGINT PRIMARY KEY,               -- the chunk's rowid
    fts     TSVECTOR NOT NULL,
    fts_len INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_chunks_fts ON chunks_fts USING gin(fts);
CREATE TABLE IF NOT EXISTS chunks_fts_df (
    lexeme TEXT PRIMARY KEY,                   -- a token of chunks_fts.fts
    df     INTEGER NOT NULL                    -- how many chunks_fts rows hold it (BM25's IDF input)
);
CREATE TABLE IF NOT EXISTS embedding_cache (
    rowid        BIGINT GENERATED BY DEFAULT AS IDENTITY UNIQUE,
    provider     TEXT NOT NULL,
    model        TEXT NOT NULL,
    provider_key TEXT NOT NULL,
    hash         TEXT NOT NULL,
    embedding    BYTEA NOT NULL,
    dims         INTEGER NOT NULL,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (provider, model, provider_key, hash)
);
CREATE INDEX IF NOT EXISTS idx_embedding_cache_updated_at ON embedding_cache(updated_at);
CREATE TABLE IF NOT EXISTS chunk_changes (
    generation BIGINT NOT NULL,                -- the write generation (meta) of the transaction
    id         TEXT NOT NULL                   -- a chunk inserted, updated or deleted then
);
CREATE INDEX IF NOT EXISTS idx_chunk_changes_generation ON chunk_changes(generation);
CREATE TABLE IF NOT EXISTS chunk_counts (
    source   TEXT NOT NULL,
    audience TEXT NOT NULL,
    n        BIGINT NOT NULL,                  -- chunks of this source and audience (0: none any more)
    PRIMARY KEY (source, audience)
);
CREATE TABLE IF NOT EXISTS chunks_fts_totals (
    one    BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    rows   BIGINT NOT NULL,                    -- chunks_fts rows, and the sum of their fts_len (BM25)
    length BIGINT NOT NULL
);
"""
PG_TABLE_NAMES = (
    "meta", "files", "chunks", "chunks_fts", "chunks_fts_df", "embedding_cache", "chunk_changes",
    "chunk_counts", "chunks_fts_totals",
)  # fmt: skip

# The log of changed chunks (``pg_changes``): statement triggers on ``chunks`` write the id of every row a
# statement inserts, updates or deletes to ``chunk_changes``, stamped with the write generation their
# transaction commits with. The first logged statement of a transaction moves the generation itself
# (and holds its row until commit), so a host that wrote without knowing of the log is logged right too.
# ``sessionmem.chunk_log = off`` (a rebuild, which resets the log instead) writes nothing to the log.
# The same triggers keep ``chunk_counts`` (chunks per source and audience) and triggers on ``chunks_fts``
# keep ``chunks_fts_totals``, so a search after a write reads what it needs of the index's shape from a
# few rows rather than counting 100k.
PG_CHANGE_FUNCTIONS = (
    """
CREATE OR REPLACE FUNCTION sessionmem_chunk_generation() RETURNS bigint LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE g bigint := nullif(current_setting('sessionmem.chunk_generation', true), '')::bigint;
BEGIN
    IF g IS NULL THEN
        UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'write_generation'
            RETURNING value::bigint INTO g;
        PERFORM set_config('sessionmem.chunk_generation', g::text, true);
    END IF;
    RETURN g;
END $$""",
    """
CREATE OR REPLACE FUNCTION sessionmem_log_chunks() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO chunk_counts AS c(source, audience, n)
            SELECT source, audience, -count(*) FROM old_rows GROUP BY source, audience
            ON CONFLICT (source, audience) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO chunk_counts AS c(source, audience, n)
            SELECT source, audience, count(*) FROM new_rows GROUP BY source, audience
            ON CONFLICT (source, audience) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    IF coalesce(current_setting('sessionmem.chunk_log', true), '') = 'off' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO chunk_changes(generation, id) SELECT sessionmem_chunk_generation(), id FROM new_rows;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO chunk_changes(generation, id) SELECT sessionmem_chunk_generation(), id FROM old_rows;
    ELSE
        INSERT INTO chunk_changes(generation, id)
            SELECT sessionmem_chunk_generation(), id
            FROM (SELECT id FROM old_rows UNION SELECT id FROM new_rows) changed;
    END IF;
    RETURN NULL;
END $$""",
    """
CREATE OR REPLACE FUNCTION sessionmem_count_fts() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE chunks_fts_totals SET rows = rows + n, length = length + total
            FROM (SELECT count(*) AS n, coalesce(sum(fts_len), 0) AS total FROM new_rows) x WHERE x.n > 0;
    ELSE
        UPDATE chunks_fts_totals SET rows = rows - n, length = length - total
            FROM (SELECT count(*) AS n, coalesce(sum(fts_len), 0) AS total FROM old_rows) x WHERE x.n > 0;
    END IF;
    RETURN NULL;
END $$""",
)
PG_CHANGE_TRIGGERS = {
    "chunks_log_insert": "AFTER INSERT ON chunks REFERENCING NEW TABLE AS new_rows",
    "chunks_log_update": "AFTER UPDATE ON chunks REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "chunks_log_delete": "AFTER DELETE ON chunks REFERENCING OLD TABLE AS old_rows",
}
PG_FTS_TRIGGERS = {  # chunks_fts rows are inserted and deleted, never updated
    "chunks_fts_count_insert": "AFTER INSERT ON chunks_fts REFERENCING NEW TABLE AS new_rows",
    "chunks_fts_count_delete": "AFTER DELETE ON chunks_fts REFERENCING OLD TABLE AS old_rows",
}
