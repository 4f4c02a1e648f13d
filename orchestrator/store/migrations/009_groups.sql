-- Groups of trackings: one row of counters per group (never a list of members),
-- named by the caller, global across workspaces. outcome is set, once, in the
-- transaction that appends the group's one event (completed | deadline_exceeded).
CREATE TABLE tracking_groups (
    name TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    expect INTEGER,
    sealed_at REAL,
    deadline_at REAL,
    members INTEGER NOT NULL DEFAULT 0,
    ended INTEGER NOT NULL DEFAULT 0,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    cancelled INTEGER NOT NULL DEFAULT 0,
    deadline_exceeded INTEGER NOT NULL DEFAULT 0,
    not_found INTEGER NOT NULL DEFAULT 0,
    abandoned INTEGER NOT NULL DEFAULT 0,
    first_end_at REAL,
    last_end_at REAL,
    outcome TEXT,
    ended_at REAL,
    traceparent TEXT,
    tracestate TEXT
);
-- The deadline sweep reads only groups still waiting for their event.
CREATE INDEX tracking_groups_deadline ON tracking_groups (deadline_at)
    WHERE outcome IS NULL AND deadline_at IS NOT NULL;
-- The groups not ended yet (their count, and the listing by state).
CREATE INDEX tracking_groups_open ON tracking_groups (name) WHERE outcome IS NULL;
ALTER TABLE trackings ADD COLUMN group_name TEXT;
-- A group's members (listing, and the members a group event names).
CREATE INDEX trackings_group ON trackings (group_name, created_at, tracking_id)
    WHERE group_name IS NOT NULL;
