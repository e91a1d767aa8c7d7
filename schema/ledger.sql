-- sluice scheduler store: the durable job queue and the capacity ledger (SQLite, WAL).
-- Kafka retention is not the queue: a job is safe once it is a row here.
-- Times are wall-clock milliseconds since the epoch.

PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA foreign_keys = ON;
-- A large page cache and memory-mapped reads: the scheduler re-reads each job's row to build its
-- dispatch and result, and without these most of its time went to pread().
PRAGMA cache_size = -65536;
PRAGMA mmap_size = 268435456;
PRAGMA temp_store = MEMORY;
-- Version of this schema; the scheduler refuses a database made by another version.
PRAGMA user_version = 2;

CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- One row per job. state: queued -> leased -> (queued again on retry) -> done.
CREATE TABLE IF NOT EXISTS jobs (
    job_id           TEXT PRIMARY KEY,
    idempotency_key  TEXT NOT NULL,
    tenant           TEXT NOT NULL,
    app              TEXT NOT NULL,
    env              TEXT NOT NULL,
    key_id           TEXT NOT NULL,
    route            TEXT NOT NULL,
    class            TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'done')),
    status           TEXT CHECK (status IN ('succeeded', 'failed', 'rejected', 'expired',
                                            'cancelled')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    submitted_ms     INTEGER NOT NULL,
    deadline_ms      INTEGER NOT NULL,
    not_before_ms    INTEGER NOT NULL DEFAULT 0,
    est_input        INTEGER NOT NULL,
    est_output       INTEGER NOT NULL,
    est_total        INTEGER NOT NULL,
    lease_expires_ms INTEGER,
    reservation_id   TEXT,
    deployment       TEXT,
    first_dispatch_ms INTEGER,
    job_json         TEXT NOT NULL,           -- the job message as received
    request_json     TEXT,                    -- its request body, ready to dispatch
    metadata_json    TEXT,                    -- its metadata, copied into the result
    result_json      TEXT,
    updated_ms       INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state) WHERE state <> 'done';

-- Every bucket the ledger knows. level is what is left (negative = debt), as of updated_ms.
CREATE TABLE IF NOT EXISTS buckets (
    bucket_id    TEXT PRIMARY KEY,        -- e.g. "deployment:sim-a:tpm"
    scope        TEXT NOT NULL,           -- hierarchy node, e.g. "deployment:sim-a", "tenant:acme"
    dimension    TEXT NOT NULL,           -- requests | tokens | input_tokens | ...
    algorithm    TEXT NOT NULL,           -- token_bucket (more with the ledger issue)
    unit         TEXT NOT NULL,           -- requests | tokens
    source       TEXT NOT NULL,           -- config | provider-headers
    capacity     REAL NOT NULL,           -- burst size the ledger allows at once
    rate_per_min REAL NOT NULL,           -- refill per configured minute
    level        REAL NOT NULL,
    updated_ms   INTEGER NOT NULL
);

-- A reservation: one attempt of one job, charged in every bucket on its path, all or nothing.
-- Its charges travel in the row itself (one write per admission decision):
--   charges: [["<bucket id>", <amount>, "keep" | "actual_total"], ...]
--   settled: what reconciliation made of each charge, in the same order (null: not settled,
--            e.g. an expired reservation stays charged in full). 'keep' means the provider
--            counted the amount at receipt, so it stays; 'actual_total' charges the real usage.
CREATE TABLE IF NOT EXISTS reservations (
    reservation_id  TEXT PRIMARY KEY,
    job_id          TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    tenant          TEXT NOT NULL,
    route           TEXT NOT NULL,
    class           TEXT NOT NULL,
    deployment      TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    est_input       INTEGER NOT NULL,
    est_output      INTEGER NOT NULL,
    created_ms      INTEGER NOT NULL,
    expires_ms      INTEGER NOT NULL,
    queue_deadline_ms INTEGER NOT NULL,
    charges         TEXT NOT NULL,
    settled         TEXT,
    state           TEXT NOT NULL CHECK (state IN ('open', 'reconciled', 'expired')),
    actual_input    INTEGER,
    actual_output   INTEGER,
    actual_cached   INTEGER,
    outcome         TEXT,
    closed_ms       INTEGER
);
CREATE INDEX IF NOT EXISTS reservations_open ON reservations (state) WHERE state = 'open';

-- Results written in the same transaction as the job's terminal state, produced to Kafka after
-- commit and deleted once the broker acknowledged them: a crash never loses a result.
CREATE TABLE IF NOT EXISTS outbox (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    topic      TEXT NOT NULL,
    msg_key    TEXT NOT NULL,
    value      TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);

-- Estimated vs real tokens per route/class/deployment (running sums), for calibration.
CREATE TABLE IF NOT EXISTS estimate_stats (
    route       TEXT NOT NULL,
    class       TEXT NOT NULL,
    deployment  TEXT NOT NULL,
    n           INTEGER NOT NULL,
    est_input   INTEGER NOT NULL,
    real_input  INTEGER NOT NULL,
    est_output  INTEGER NOT NULL,
    real_output INTEGER NOT NULL,
    PRIMARY KEY (route, class, deployment)
);
