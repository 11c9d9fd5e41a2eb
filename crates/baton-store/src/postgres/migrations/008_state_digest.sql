-- The newest entries of each list of a project's state, with their counts
-- (`baton_core::state::StateDigest`), written with `state` by every state event: the
-- resume packet reads these few kilobytes, not the whole state.
CREATE TABLE state_digest (
    project BIGINT PRIMARY KEY,
    data    TEXT   NOT NULL
);
