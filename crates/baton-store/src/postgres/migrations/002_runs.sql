-- The run ledger's projection: one row per run, the fold of its `run.changed` events
-- (`baton_core::run::fold`), stored whole as JSON in `data`. The other columns are copies
-- of fields that queries filter on.
CREATE TABLE runs (
    project     BIGINT NOT NULL,
    id          TEXT   NOT NULL,
    seq         BIGINT NOT NULL,   -- the event that created the row
    status      TEXT   NOT NULL,
    participant TEXT,
    host        TEXT,
    ended_at    BIGINT,
    data        TEXT   NOT NULL,
    PRIMARY KEY (project, id)
);
CREATE INDEX runs_status ON runs (project, status, seq);
CREATE INDEX runs_participant ON runs (project, participant, status);
CREATE INDEX runs_ended ON runs (project, ended_at);
