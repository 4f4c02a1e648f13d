-- As SQLite's 009_groups: one row of counters per group, members carry its name.
CREATE TABLE tracking_groups (
    name text PRIMARY KEY,
    created_at double precision NOT NULL,
    expect integer,
    sealed_at double precision,
    deadline_at double precision,
    members integer NOT NULL DEFAULT 0,
    ended integer NOT NULL DEFAULT 0,
    succeeded integer NOT NULL DEFAULT 0,
    failed integer NOT NULL DEFAULT 0,
    cancelled integer NOT NULL DEFAULT 0,
    deadline_exceeded integer NOT NULL DEFAULT 0,
    not_found integer NOT NULL DEFAULT 0,
    abandoned integer NOT NULL DEFAULT 0,
    first_end_at double precision,
    last_end_at double precision,
    outcome text,
    ended_at double precision,
    traceparent text,
    tracestate text
);
CREATE INDEX tracking_groups_deadline ON tracking_groups (deadline_at)
    WHERE outcome IS NULL AND deadline_at IS NOT NULL;
CREATE INDEX tracking_groups_open ON tracking_groups (name) WHERE outcome IS NULL;
ALTER TABLE trackings ADD COLUMN group_name text;
CREATE INDEX trackings_group ON trackings (group_name, created_at, tracking_id)
    WHERE group_name IS NOT NULL;
