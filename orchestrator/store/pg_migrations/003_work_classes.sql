-- What adaptive polling learned per work class (a function key, a build kind), as
-- SQLite's 006_work_classes: a small summary of durations, so that a restart (or a
-- peer replica) does not start learning again. Last writer wins per row.
CREATE TABLE work_classes (
    workspace  text NOT NULL,
    kind       text NOT NULL,
    work_class text NOT NULL,
    summary    bytea NOT NULL,
    updated_at double precision NOT NULL,
    PRIMARY KEY (workspace, kind, work_class)
);
