-- Trackings, their labels, the event log and the delivery outbox.
-- Times are unix seconds (REAL); JSON values are orjson bytes (BLOB).

CREATE TABLE trackings (
    tracking_id    TEXT PRIMARY KEY,
    workspace      TEXT NOT NULL,
    kind           TEXT NOT NULL,
    remote_id      TEXT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('active', 'terminal')),
    outcome        TEXT,
    remote_status  TEXT,
    remote         BLOB,
    result         BLOB,
    polls          INTEGER NOT NULL DEFAULT 0,
    last_polled_at REAL,
    next_poll_at   REAL,
    last_error     BLOB,
    deadline_at    REAL NOT NULL,
    created_at     REAL NOT NULL,
    terminal_at    REAL,
    labels         BLOB NOT NULL,
    correlation_id TEXT,
    callback_url   TEXT,
    notify         TEXT NOT NULL
);

-- Idempotent intake.
CREATE UNIQUE INDEX trackings_remote ON trackings (workspace, kind, remote_id);
-- Newest-first listing and its cursor.
CREATE INDEX trackings_created ON trackings (created_at, tracking_id);
-- Resuming after a restart reads only the active rows.
CREATE INDEX trackings_active ON trackings (tracking_id) WHERE state = 'active';
-- Retention walks terminal rows by age.
CREATE INDEX trackings_terminal_at ON trackings (terminal_at) WHERE state = 'terminal';

-- Labels again, one row per pair, so that filtering by labels is an index lookup.
CREATE TABLE tracking_labels (
    tracking_id TEXT NOT NULL REFERENCES trackings (tracking_id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    PRIMARY KEY (tracking_id, key)
) WITHOUT ROWID;
CREATE INDEX tracking_labels_pair ON tracking_labels (key, value);

-- AUTOINCREMENT: a seq is never reused, also after retention deleted the newest rows.
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id    TEXT NOT NULL UNIQUE,
    tracking_id TEXT NOT NULL REFERENCES trackings (tracking_id) ON DELETE CASCADE,
    type        TEXT NOT NULL,
    time        REAL NOT NULL,
    payload     BLOB NOT NULL
);
CREATE INDEX events_tracking ON events (tracking_id);

CREATE TABLE deliveries (
    delivery_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    event_seq       INTEGER NOT NULL REFERENCES events (seq) ON DELETE CASCADE,
    destination     TEXT NOT NULL,
    url             TEXT,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL,
    created_at      REAL NOT NULL,
    last_status     INTEGER,
    last_error      TEXT,
    delivered_at    REAL,
    UNIQUE (event_seq, destination)
);
-- claim_deliveries: due pending rows of one destination, oldest first.
CREATE INDEX deliveries_due ON deliveries (destination, next_attempt_at) WHERE state = 'pending';
CREATE INDEX deliveries_state ON deliveries (state, delivery_id);

-- One row that check_writable() rewrites to prove a write can be committed.
CREATE TABLE store_probe (id INTEGER PRIMARY KEY CHECK (id = 1), at REAL NOT NULL);
INSERT INTO store_probe (id, at) VALUES (1, 0);
