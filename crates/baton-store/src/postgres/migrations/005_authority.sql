-- Authority: the policy set for a participant, as the JSON of `baton_core::Policy`
-- (NULL: its role's default).
ALTER TABLE participants ADD COLUMN policy TEXT;
