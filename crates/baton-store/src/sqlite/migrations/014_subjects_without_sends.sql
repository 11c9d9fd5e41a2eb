-- A message's own event leaves the index of subjects. A send wrote four of its
-- thirteen pages into `events_subject` (message ids, new at every send, land anywhere in
-- it); a message's `message.sent` event is already found by its row in `messages`, which
-- is keyed by the event's seq and indexed by id. Every other kind stays: deliveries,
-- orders, negotiations, effects and state are read back by subject. The reads by subject
-- name the index's condition, so that the planner can use it.
DROP INDEX events_subject;
CREATE INDEX events_subject ON events (subject, seq) WHERE kind != 'message.sent';
