-- sluice scheduler store: the durable job queue and the capacity ledger (SQLite, WAL).
-- Kafka retention is not the queue: a job is safe once it is a row here.
-- Times are wall-clock milliseconds since the epoch.

PRAGMA journal_mode = WAL;
-- FULL: a commit is on disk when it returns (the WAL is synced at every commit). The scheduler
-- commits Kafka offsets right after it, so with NORMAL a power loss could drop jobs whose
-- offsets were already committed. What it costs is in bench/README.md (bench/store).
PRAGMA synchronous = FULL;
PRAGMA foreign_keys = ON;
-- A page cache and memory-mapped reads: the scheduler re-reads each job's row to build its
-- dispatch and result, and without these most of its time went to pread(). The reads go
-- through the map, so the cache holds mostly pages being written: 16 MiB ran the pipeline as
-- fast as 64 MiB did and took 32 MiB less memory, 500 B a queued job at 100,000 queued
-- (bench/README.md, "RSS per queued job, and CPU and latency per job").
PRAGMA cache_size = -16384;
PRAGMA mmap_size = 268435456;
PRAGMA temp_store = MEMORY;
-- The page size stays SQLite's default 4 KiB: larger pages speed up bulk appends (16 KiB: +10 %
-- at 1,000 reservations per commit) but every commit writes each page it touched whole to the
-- WAL, and the scheduler commits once per loop turn, often with a handful of changes (16 KiB:
-- -40 % at 10 reservations per commit). See bench/README.md.
-- Marks the file as sluice's ('slce'): the scheduler refuses a SQLite file of another
-- application. Files made before it was set have 0 and are accepted when they have a jobs table.
PRAGMA application_id = 1936483173;
-- Version of this schema. The scheduler migrates a file of an older version (the migrations are
-- in scheduler/store.c, with how to add one) and refuses one of a newer version.
PRAGMA user_version = 4;

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
    -- CHECKs compare with = rather than IN (...): SQLite builds a temporary table for every
    -- IN list of three or more values on each row written, which cost a third of an insert.
    state            TEXT NOT NULL CHECK (state = 'queued' OR state = 'leased' OR state = 'done'),
    status           TEXT CHECK (status = 'succeeded' OR status = 'failed' OR status = 'rejected'
                                 OR status = 'expired' OR status = 'cancelled'),
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
    algorithm    TEXT NOT NULL,           -- token_bucket | ... (the ledger's algorithms)
    unit         TEXT NOT NULL,           -- requests | tokens
    source       TEXT NOT NULL,           -- config | provider-headers
    capacity     REAL NOT NULL,           -- burst size the ledger allows at once
    rate_per_min REAL NOT NULL,           -- refill per configured minute
    level        REAL NOT NULL,
    updated_ms   INTEGER NOT NULL,
    state        TEXT                     -- the algorithm's window counters (JSON); NULL: none
);

-- A reservation: one attempt of one job, charged in every bucket on its path, all or nothing.
-- Written once per admission decision, so the row is lean: one B-tree (WITHOUT ROWID, keyed by
-- the id) and no secondary index. Its charges travel in the row itself:
--   charges: [["<bucket id>", <amount>, "keep" | "actual_total"], ...]
--   settled: what reconciliation made of each charge, in the same order (null: not settled,
--            e.g. an expired reservation stays charged in full). 'keep' means the provider
--            counted the amount at receipt, so it stays; 'actual_total' charges the real usage.
-- reservation_id begins with created_ms as 12 lowercase hex digits (the store checks it), so
-- ids sort by creation time: new rows append at the end of the B-tree, and "created since T"
-- is a range of the primary key. The job's own fields (tenant, route, class, idempotency key,
-- deadline) are in its jobs row and not copied here; open reservations are counted in
-- counters and found through jobs.reservation_id of leased jobs.
CREATE TABLE IF NOT EXISTS reservations (
    reservation_id  TEXT PRIMARY KEY,
    job_id          TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    deployment      TEXT NOT NULL,
    est_input       INTEGER NOT NULL,     -- what was reserved for input and output
    est_output      INTEGER NOT NULL,
    created_ms      INTEGER NOT NULL,
    expires_ms      INTEGER NOT NULL,     -- the lease's end
    charges         TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state = 'open' OR state = 'reconciled'
                                         OR state = 'expired'),
    settled         TEXT,
    actual_input    INTEGER,
    actual_output   INTEGER,
    actual_cached   INTEGER,
    outcome         TEXT,
    closed_ms       INTEGER
) WITHOUT ROWID;

-- Counts the store keeps exact in the same transactions as the rows they count, so reading
-- one never scans a table. open_reservations: reservations in state 'open' (only the store
-- changes reservations.state, and it moves this count with it).
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,
    n    INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO counters (name, n) VALUES ('open_reservations', 0);

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

-- Changes made at run time through the admin API (bucket limits, tenant weights, guarantees,
-- pauses). They win over the config, survive restarts and reloads, and are applied whenever the
-- scheduler builds its ledger. target: "bucket:<bucket id>", "tenant:<name>" or "key:<id>";
-- field: "limit", "weight", "guarantee", "paused".
CREATE TABLE IF NOT EXISTS overrides (
    target     TEXT NOT NULL,
    field      TEXT NOT NULL,
    value      REAL NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (target, field)
) WITHOUT ROWID;

-- Provider batches (scheduler/pbatch.c): a batch of one tenant's jobs sent to a deployment's
-- batch API, from the moment it is handed to a dispatcher until its results are read. batch_id
-- is sluice's own id, the marker a dispatcher labels the provider's batch with; provider_id is
-- the provider's id once a dispatcher reported it; jobs is the JSON array of its jobs in the
-- order they were sent (Gemini answers by position), each [job id, reservation id of the lease
-- that put it there]: a job leased again elsewhere is no longer this batch's. The jobs' leases and reservations are in
-- jobs and reservations, as for any call in flight. A row is deleted when its results are in.
CREATE TABLE IF NOT EXISTS pbatches (
    batch_id    TEXT PRIMARY KEY,
    deployment  TEXT NOT NULL,
    tenant      TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state = 'creating' OR state = 'running'
                                     OR state = 'collecting'),
    provider_id TEXT NOT NULL DEFAULT '',
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    jobs        TEXT NOT NULL
) WITHOUT ROWID;
