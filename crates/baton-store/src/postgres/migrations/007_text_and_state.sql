-- Free-text search: the words of each message's payload (`baton_core::search::words`) as
-- a `tsvector` of the 'simple' configuration (no stemming, no stop words), GIN-indexed.
ALTER TABLE messages ADD COLUMN words tsvector NOT NULL DEFAULT ''::tsvector;
CREATE INDEX messages_words ON messages USING gin (words);

-- The project state: the fold of every `state.changed` event (`ProjectState`), kept as
-- JSON in one row a project and advanced by each state event in the transaction that
-- appends it, so reading the state never replays the history.
CREATE TABLE state (
    project BIGINT PRIMARY KEY,
    data    TEXT   NOT NULL
);

-- The default `baton runs` view reads the newest runs back from the end.
CREATE INDEX runs_seq ON runs (project, seq);
