-- The PostgreSQL store: trackings with their leases, labels, the event log, the
-- delivery outbox and the live replicas. Times are unix seconds (double precision);
-- JSON values are orjson bytes (bytea), as in the SQLite store.

CREATE TABLE trackings (
    tracking_id        text PRIMARY KEY,
    workspace          text NOT NULL,
    kind               text NOT NULL,
    remote_id          text NOT NULL,
    state              text NOT NULL CHECK (state IN ('active', 'terminal')),
    outcome            text,
    remote_status      text,
    remote             bytea,
    result             bytea,
    polls              integer NOT NULL DEFAULT 0,
    last_polled_at     double precision,
    next_poll_at       double precision,
    last_error         bytea,
    deadline_at        double precision NOT NULL,
    created_at         double precision NOT NULL,
    terminal_at        double precision,
    labels             bytea NOT NULL,
    correlation_id     text,
    callback_url       text,
    notify             text NOT NULL,
    remote_fingerprint text,
    remote_digest      bytea,
    -- The lease: who polls this tracking, until when (the database's clock), and the
    -- fencing token every poll and terminal write of that holder must carry.
    lease_owner        text,
    lease_until        double precision NOT NULL DEFAULT 0,
    lease_token        bigint
);

CREATE UNIQUE INDEX trackings_remote ON trackings (workspace, kind, remote_id);
CREATE INDEX trackings_created ON trackings (created_at, tracking_id);
CREATE INDEX trackings_active ON trackings (tracking_id, workspace) WHERE state = 'active';
-- Claims look for active rows whose lease has run out.
CREATE INDEX trackings_claimable ON trackings (lease_until) WHERE state = 'active';
CREATE INDEX trackings_terminal_at ON trackings (terminal_at) WHERE state = 'terminal';

-- Fencing tokens: every lease granted gets a new one, so a token names one grant.
CREATE SEQUENCE lease_tokens;

CREATE TABLE tracking_labels (
    tracking_id text NOT NULL REFERENCES trackings (tracking_id) ON DELETE CASCADE,
    key         text NOT NULL,
    value       text NOT NULL,
    PRIMARY KEY (tracking_id, key)
);
CREATE INDEX tracking_labels_pair ON tracking_labels (key, value);

-- seq comes from an identity (never reused); it is taken under a transaction-level
-- advisory lock, so seq order is commit order across replicas (see _pg_writes.py).
CREATE TABLE events (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    text NOT NULL UNIQUE,
    tracking_id text NOT NULL REFERENCES trackings (tracking_id) ON DELETE CASCADE,
    type        text NOT NULL,
    time        double precision NOT NULL,
    payload     bytea NOT NULL,
    terminal    boolean NOT NULL DEFAULT false
);
CREATE INDEX events_tracking ON events (tracking_id);
-- Exactly one terminal event per tracking, whatever any replica believes.
CREATE UNIQUE INDEX events_one_terminal ON events (tracking_id) WHERE terminal;

-- The highest seq committed, kept beside the log: retention may delete the newest
-- events, and a sequence's last value may belong to a transaction not committed yet.
CREATE TABLE event_seq_high (id integer PRIMARY KEY CHECK (id = 1), seq bigint NOT NULL);
INSERT INTO event_seq_high (id, seq) VALUES (1, 0);

CREATE TABLE deliveries (
    delivery_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_seq       bigint NOT NULL REFERENCES events (seq) ON DELETE CASCADE,
    destination     text NOT NULL,
    url             text,
    state           text NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at double precision NOT NULL,
    created_at      double precision NOT NULL,
    last_status     integer,
    last_error      text,
    delivered_at    double precision,
    UNIQUE (event_seq, destination)
);
CREATE INDEX deliveries_due ON deliveries (destination, next_attempt_at) WHERE state = 'pending';
CREATE INDEX deliveries_state ON deliveries (state, delivery_id);

CREATE TABLE store_probe (id integer PRIMARY KEY CHECK (id = 1), at double precision NOT NULL);
INSERT INTO store_probe (id, at) VALUES (1, 0);

-- Live replicas: each one's last heartbeat (the database's clock).
CREATE TABLE replicas (
    replica_id text PRIMARY KEY,
    started_at double precision NOT NULL,
    seen_at    double precision NOT NULL,
    leases     integer NOT NULL DEFAULT 0
);
