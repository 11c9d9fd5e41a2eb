-- Keys: one row per key, the fold of its `key.changed` events (`baton_core::key::fold`),
-- stored whole as JSON in `data`; the token's hash is all that is kept of it.
CREATE TABLE keys (
    id          TEXT PRIMARY KEY,
    seq         INTEGER NOT NULL,   -- the event that issued it
    participant TEXT    NOT NULL,
    data        TEXT    NOT NULL
);
CREATE INDEX keys_participant ON keys (participant);
