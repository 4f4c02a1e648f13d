"""Every SQL statement of the SQLite store, by name (the schema is in ``migrations/``)."""

from __future__ import annotations

import functools

TRACKING_COLUMNS = (
    "tracking_id, workspace, kind, remote_id, state, outcome, remote_status, remote, result,"
    " polls, last_polled_at, next_poll_at, last_error, deadline_at, created_at, terminal_at,"
    " labels, correlation_id, callback_url, notify, remote_fingerprint, remote_digest,"
    " deadline_source, work_class, work_started_at, traceparent, tracestate, group_name"
)
DELIVERY_COLUMNS = (
    "d.delivery_id, d.event_seq, e.event_id, d.destination, d.url, d.state, d.attempts,"
    " d.next_attempt_at, d.created_at, e.time, e.payload, d.last_status, d.last_error,"
    " d.delivered_at"
)
EVENT_COLUMNS = "seq, event_id, tracking_id, type, time, payload, sink"
T_COLUMNS = ", ".join(f"t.{c.strip()}" for c in TRACKING_COLUMNS.split(","))  # of trackings t

# -- schema bookkeeping ---------------------------------------------------------------------

CREATE_SCHEMA_VERSION = (
    "CREATE TABLE IF NOT EXISTS schema_version"
    " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
)
SCHEMA_VERSION = "SELECT coalesce(max(version), 0) FROM schema_version"
RECORD_MIGRATION = "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)"
PROBE_WRITE = "UPDATE store_probe SET at = ? WHERE id = 1"

# -- trackings ------------------------------------------------------------------------------

# New trackings, many rows in ONE statement (see POLL_ROWS below for why); the
# ids it returns are the rows that were new, the others' remote ids were known.
INSERT_ROWS = 58  # 17 parameters a row: 986, under the oldest SQLite's limit of 999


@functools.lru_cache(maxsize=INSERT_ROWS)
def insert_tracking_rows(rows: int) -> str:
    values = ",".join(["(?, ?, ?, ?, 'active', 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * rows)
    return (
        "INSERT INTO trackings (tracking_id, workspace, kind, remote_id, state, polls,"
        " next_poll_at, deadline_at, created_at, labels, correlation_id, callback_url, notify,"
        " deadline_source, remote, work_class, traceparent, tracestate, group_name)"
        f" VALUES {values}"
        " ON CONFLICT (workspace, kind, remote_id) DO NOTHING RETURNING tracking_id"
    )


INSERT_LABEL = "INSERT INTO tracking_labels (tracking_id, key, value) VALUES (?, ?, ?)"
TRACKING_BY_REMOTE = (
    f"SELECT {TRACKING_COLUMNS} FROM trackings WHERE workspace = ? AND kind = ? AND remote_id = ?"
)
TRACKING_BY_ID = f"SELECT {TRACKING_COLUMNS} FROM trackings WHERE tracking_id = ?"
# Named: the planner would rather walk trackings_remote for the grouping and read
# every row's state from the table, four times slower.
ACTIVE_COUNTS = (
    "SELECT workspace, count(*) FROM trackings INDEXED BY trackings_active"
    " WHERE state = 'active' GROUP BY workspace"
)
# Parameters: after (tracking_id, '' for the first page), limit (-1: no limit).
# A body that a digest stands for is not read: resuming 100,000 trackings would parse
# and interpret every one of them for nothing.
ACTIVE_TRACKINGS = (
    "SELECT "
    + TRACKING_COLUMNS.replace(" remote,", " CASE WHEN remote_digest IS NULL THEN remote END,")
    + " FROM trackings WHERE state = 'active' AND tracking_id > ?"
    " ORDER BY tracking_id LIMIT ?"
)
# Every active row in one statement, in no particular order: a resume's single pass
# (one snapshot, so it ends). Only what an active tracking can hold: its state,
# outcome, result, terminal time and stored next poll are known or not used.
ACTIVE_ALL = (
    "SELECT tracking_id, workspace, kind, remote_id, remote_status,"
    " CASE WHEN remote_digest IS NULL THEN remote END, polls, last_polled_at, last_error,"
    " deadline_at, created_at, labels, correlation_id, callback_url, notify,"
    " remote_fingerprint, remote_digest, deadline_source, work_class, work_started_at,"
    " traceparent, tracestate, group_name FROM trackings WHERE state = 'active'"
)

# Poll results, many rows in ONE statement: per row the first twelve columns of
# codec.poll_row (NULL class and start: kept); only active rows move, a terminal
# tracking is final. A statement per row hands the GIL back and forth once per row
# between the writer thread and the event loop; under load each hand-back waits for
# the loop's switch interval, which held the writer to a few hundred rows a second.
POLL_ROWS = 83  # 996 parameters: under the oldest SQLite's limit of 999


@functools.lru_cache(maxsize=POLL_ROWS)
def record_poll_rows(rows: int) -> str:
    values = ",".join(["(?,?,?,?,?,?,?,?,?,?,?,?)"] * rows)
    return (
        "UPDATE trackings SET polls = u.column2, last_polled_at = u.column3,"
        " next_poll_at = u.column4, last_error = u.column5,"
        " remote_status = CASE WHEN u.column6 THEN u.column7 ELSE remote_status END,"
        " remote = CASE WHEN u.column6 THEN u.column8 ELSE remote END,"
        " remote_fingerprint = CASE WHEN u.column6 THEN u.column9 ELSE remote_fingerprint END,"
        " remote_digest = CASE WHEN u.column6 THEN u.column10 ELSE remote_digest END,"
        " work_class = coalesce(u.column11, work_class),"
        " work_started_at = coalesce(u.column12, work_started_at)"
        f" FROM (VALUES {values}) AS u"
        " WHERE trackings.tracking_id = u.column1 AND trackings.state = 'active'"
    )


# A function job's deadline derived from the job: deadline_at, deadline_source, tracking_id.
SET_DEADLINE = (
    "UPDATE trackings SET deadline_at = ?, deadline_source = ?"
    " WHERE tracking_id = ? AND state = 'active'"
)

# Parameters as codec.finish_row: tracking_id, outcome, terminal_at, result, polls,
# last_polled_at, last_error, remote_changed, remote_status, remote. Poll fields are
# kept when the finish carries no poll (polls is NULL).
FINISH_TRACKING = (
    "UPDATE trackings SET state = 'terminal', outcome = ?2, terminal_at = ?3,"
    " result = ?4, next_poll_at = NULL,"
    " polls = coalesce(?5, polls),"
    " last_polled_at = coalesce(?6, last_polled_at),"
    " last_error = CASE WHEN ?5 IS NOT NULL THEN ?7"
    "   ELSE coalesce(?7, last_error) END,"
    " remote_status = CASE WHEN ?8 THEN ?9 ELSE remote_status END,"
    " remote = CASE WHEN ?8 THEN ?10 ELSE remote END"
    " WHERE tracking_id = ?1 AND state = 'active' RETURNING group_name"
)


@functools.lru_cache(maxsize=256)
def list_trackings(present: tuple[bool, ...], labels: int, after: bool) -> str:
    """The listing query for the filters ``present`` (state, kind, outcome, workspace, group);
    parameters follow in this order: those filters', (key, value) per label, cursor
    (created_at twice, tracking_id), limit."""
    columns = ("state", "kind", "outcome", "workspace", "group_name")
    where = [f"t.{column} = ?" for column, wanted in zip(columns, present, strict=True) if wanted]
    label = (
        "EXISTS (SELECT 1 FROM tracking_labels l WHERE l.tracking_id = t.tracking_id"
        " AND l.key = ? AND l.value = ?)"
    )
    where += [label] * labels
    if after:
        where.append("(t.created_at < ? OR (t.created_at = ? AND t.tracking_id < ?))")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return (
        f"SELECT {T_COLUMNS} FROM trackings t{clause}"
        " ORDER BY t.created_at DESC, t.tracking_id DESC LIMIT ?"
    )


PRUNABLE_TRACKINGS = (
    "SELECT tracking_id FROM trackings t"
    " WHERE state = 'terminal' AND terminal_at < ?"
    " AND NOT EXISTS (SELECT 1 FROM events e JOIN deliveries d ON d.event_seq = e.seq"
    "   WHERE e.tracking_id = t.tracking_id AND d.state = 'pending')"
    " ORDER BY terminal_at LIMIT ?"
)
# Labels, events and deliveries follow through ON DELETE CASCADE.
DELETE_TRACKING = "DELETE FROM trackings WHERE tracking_id = ?"
# Operational events (no tracking) age out on their own, once settled likewise.
PRUNABLE_SINK_EVENTS = (
    "SELECT seq FROM events e WHERE tracking_id IS NULL AND time < ?"
    " AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = e.seq"
    "   AND d.state = 'pending')"
    " ORDER BY seq LIMIT ?"
)
DELETE_EVENT = "DELETE FROM events WHERE seq = ?"

# -- events ---------------------------------------------------------------------------------

INSERT_EVENT = (
    "INSERT INTO events (event_id, tracking_id, type, time, payload, sink)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
EVENTS_AFTER = f"SELECT {EVENT_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?"
# The AUTOINCREMENT high-water mark survives the deletion of the newest events.
LAST_EVENT_SEQ = "SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'events'"

# -- deliveries -----------------------------------------------------------------------------

INSERT_DELIVERY = (
    "INSERT INTO deliveries (event_seq, destination, url, state, attempts, next_attempt_at,"
    " created_at) VALUES (?, ?, ?, 'pending', 0, ?, ?)"
)
_DELIVERY_FROM = "FROM deliveries d JOIN events e ON e.seq = d.event_seq"
DUE_DELIVERIES = (
    f"SELECT {DELIVERY_COLUMNS} {_DELIVERY_FROM}"
    " WHERE d.destination = ? AND d.state = 'pending' AND d.next_attempt_at <= ?"
    " AND NOT EXISTS (SELECT 1 FROM disabled_sinks s WHERE s.destination = d.destination)"
    " ORDER BY d.next_attempt_at, d.delivery_id LIMIT ?"
)
LEASE_DELIVERY = "UPDATE deliveries SET next_attempt_at = ? WHERE delivery_id = ?"
DELIVERY_BY_ID = f"SELECT {DELIVERY_COLUMNS} {_DELIVERY_FROM} WHERE d.delivery_id = ?"
DELIVERIES_BY_STATE = (
    f"SELECT {DELIVERY_COLUMNS} {_DELIVERY_FROM}"
    " WHERE d.state = ? AND d.delivery_id > ? ORDER BY d.delivery_id LIMIT ?"
)
DELIVERIES_ALL = DELIVERIES_BY_STATE.replace("d.state = ? AND ", "")
# A late success still counts when the delivery was given up meanwhile; attempts counts
# every finished attempt (delivered, retry or dead).
MARK_DELIVERED = (
    "UPDATE deliveries SET state = 'delivered', attempts = attempts + 1, delivered_at = ?,"
    " last_status = ?, last_error = NULL WHERE delivery_id = ? AND state != 'delivered'"
)
MARK_RETRY = (
    "UPDATE deliveries SET attempts = attempts + 1, next_attempt_at = ?, last_status = ?,"
    " last_error = ? WHERE delivery_id = ? AND state = 'pending'"
)
MARK_DEAD = (
    "UPDATE deliveries SET state = 'dead', attempts = attempts + 1, next_attempt_at = ?,"
    " last_status = ?, last_error = ? WHERE delivery_id = ? AND state = 'pending'"
)
REDRIVE_DELIVERY = (
    "UPDATE deliveries SET state = 'pending', next_attempt_at = ?"
    " WHERE delivery_id = ? AND state = 'dead'"
)
# Every event in the ranges to one destination again: its delivery back to pending
# (same event, same id), or a new one where it never had any; never an operational
# event about that destination itself.
REPLAY_DELIVERIES = (
    "INSERT INTO deliveries (event_seq, destination, url, state, attempts, next_attempt_at,"
    " created_at) SELECT seq, ?, NULL, 'pending', 0, ?, ? FROM events"
    " WHERE seq > ? AND seq <= ? AND time >= ? AND time <= ? AND (sink IS NULL OR sink != ?)"
    " ON CONFLICT (event_seq, destination) DO UPDATE SET state = 'pending', attempts = 0,"
    " next_attempt_at = excluded.next_attempt_at, last_status = NULL, last_error = NULL,"
    " delivered_at = NULL"
)
PENDING_COUNTS = (
    "SELECT destination, count(*) FROM deliveries WHERE state = 'pending' GROUP BY destination"
)

# -- sinks ----------------------------------------------------------------------------------

DISABLE_SINK = (
    "INSERT INTO disabled_sinks (destination, since, reason) VALUES (?, ?, ?)"
    " ON CONFLICT (destination) DO NOTHING"
)
ENABLE_SINK = "DELETE FROM disabled_sinks WHERE destination = ?"
DISABLED_SINKS = "SELECT destination, since, reason FROM disabled_sinks ORDER BY destination"

# -- adaptive polling's work classes ---------------------------------------------------------

SAVE_WORK_CLASS = (
    "INSERT INTO work_classes (workspace, kind, work_class, summary, updated_at)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace, kind, work_class)"
    " DO UPDATE SET summary = excluded.summary, updated_at = excluded.updated_at"
)
FORGET_WORK_CLASS = "DELETE FROM work_classes WHERE workspace = ? AND kind = ? AND work_class = ?"
WORK_CLASS = "SELECT summary FROM work_classes WHERE workspace = ? AND kind = ? AND work_class = ?"
WORK_CLASSES = "SELECT workspace, kind, work_class, summary, updated_at FROM work_classes"
