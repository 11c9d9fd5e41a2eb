-- A sender's open requests (the outbox, resume's waiting list), oldest first, from an
-- index that holds only them: `messages_outbox` holds every request the sender ever sent,
-- and a read of the open ones filtered them all (EXPLAIN ANALYZE on 10,000 requests of one
-- sender, 100 open: 5,263 heap blocks and 42 ms, against 104 blocks and 0.2 ms here).
CREATE INDEX messages_open_requests ON messages (project, from_name, seq)
    WHERE type = 'request' AND request_status != 'archived';
