-- Operational events (a sink disabled or enabled) belong to no tracking: the event
-- log's tracking_id becomes optional, and `sink` names the destination such an event
-- is about (a replay to that sink leaves it out). SQLite cannot drop a NOT NULL in
-- place, so the table is rebuilt; the runner turns foreign keys off around
-- migrations, so dropping the old table cascades nothing to the deliveries.
CREATE TABLE events_new (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id    TEXT NOT NULL UNIQUE,
    tracking_id TEXT REFERENCES trackings (tracking_id) ON DELETE CASCADE,
    sink        TEXT,
    type        TEXT NOT NULL,
    time        REAL NOT NULL,
    payload     BLOB NOT NULL,
    CHECK ((tracking_id IS NULL) != (sink IS NULL))
);
-- The high-water mark first: a seq is never reused, also across this rebuild.
INSERT INTO sqlite_sequence (name, seq) SELECT 'events_new', seq FROM sqlite_sequence WHERE name = 'events';
INSERT INTO events_new (seq, event_id, tracking_id, sink, type, time, payload)
    SELECT seq, event_id, tracking_id, NULL, type, time, payload FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_tracking ON events (tracking_id);

-- Sinks that are disabled (a 410, or no success for events.disable_after_s) until
-- POST /v1/sinks/{name}/enable: a restart keeps them disabled.
CREATE TABLE disabled_sinks (
    destination TEXT PRIMARY KEY,
    since       REAL NOT NULL,
    reason      TEXT NOT NULL
) WITHOUT ROWID;
