-- The newest entries of each list of the project state, with their counts
-- (`baton_core::state::StateDigest`), written with `state` by every state event: the
-- resume packet reads these few kilobytes, not the whole state. A row of its own, so
-- reading it never walks the whole state's overflow pages.
CREATE TABLE state_digest (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    data TEXT NOT NULL
);
