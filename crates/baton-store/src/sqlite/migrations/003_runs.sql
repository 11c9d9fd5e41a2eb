-- The run ledger's projection: one row per run, the fold of its `run.changed` events
-- (`baton_core::run::fold`), stored whole as JSON in `data`. The other columns are copies
-- of fields that queries filter on.
CREATE TABLE runs (
    id          TEXT PRIMARY KEY,
    seq         INTEGER NOT NULL,   -- the event that created the row
    status      TEXT    NOT NULL,
    participant TEXT,
    host        TEXT,
    ended_at    INTEGER,
    data        TEXT    NOT NULL
);
CREATE INDEX runs_status ON runs (status, seq);
CREATE INDEX runs_participant ON runs (participant, status);
CREATE INDEX runs_ended ON runs (ended_at);
