-- A participant's inbox and owed list are ordered by their messages' kind and seq: kept on
-- each delivery (neither ever changes), so the list's ids come from one index and only
-- the envelopes shown are read, not a random page of `messages` for every message owed.
ALTER TABLE deliveries ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN request INTEGER NOT NULL DEFAULT 0;
UPDATE deliveries SET seq = m.seq, request = (m.type = 'request')
    FROM messages m WHERE m.id = deliveries.message_id;
DROP INDEX deliveries_by_participant;
CREATE INDEX deliveries_owed ON deliveries (participant, status, request, seq, message_id);
-- A message's recipients and their status, without reading the delivery rows.
CREATE INDEX deliveries_of_message ON deliveries (message_id, participant, status);
-- A sender's open requests (the outbox, resume's waiting list), oldest first.
CREATE INDEX messages_open_requests ON messages (from_name, seq)
    WHERE type = 'request' AND request_status != 'archived';
-- How many replies each message has, counted as each reply is projected: an envelope
-- reads it from the message's row instead of looking the message up among the replies.
ALTER TABLE messages ADD COLUMN replies INTEGER NOT NULL DEFAULT 0;
UPDATE messages SET replies = r.n
    FROM (SELECT reply_to, count(*) AS n FROM messages WHERE reply_to IS NOT NULL
          GROUP BY reply_to) r
    WHERE messages.id = r.reply_to;
