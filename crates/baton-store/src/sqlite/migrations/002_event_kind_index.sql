-- State is a fold over the state events: find them without scanning messages.
CREATE INDEX events_kind ON events (kind, seq);
