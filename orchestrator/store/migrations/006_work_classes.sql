-- What adaptive polling learned per work class (a function key, a build kind): a
-- small summary of durations, so that a restart does not start learning again.
CREATE TABLE work_classes (
    workspace  TEXT NOT NULL,
    kind       TEXT NOT NULL,
    work_class TEXT NOT NULL,
    summary    BLOB NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (workspace, kind, work_class)
) WITHOUT ROWID;
