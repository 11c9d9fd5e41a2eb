-- Keys: one row per key, the fold of its `key.changed` events (`baton_core::key::fold`),
-- stored whole as JSON in `data`; the token's hash is all that is kept of it.
CREATE TABLE keys (
    project     BIGINT NOT NULL,
    id          TEXT   NOT NULL,
    seq         BIGINT NOT NULL,   -- the event that issued it
    participant TEXT   NOT NULL,
    data        TEXT   NOT NULL,
    PRIMARY KEY (project, id)
);
CREATE INDEX keys_participant ON keys (project, participant);
