-- 0003: connection calls and edit on approve.
--
-- A connection call records its connection, the path template and the
-- grouped arguments {path, query, header, body} the card shows. A decision
-- that edited the arguments records them and their digest next to the
-- digest of the arguments it was asked about.

ALTER TABLE tool_calls ADD COLUMN connection_name TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN path_template TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN params TEXT;

ALTER TABLE decisions ADD COLUMN edited_arguments TEXT;
ALTER TABLE decisions ADD COLUMN edited_arguments_sha256 TEXT NOT NULL DEFAULT '';

-- The provider's stop reason of a run's latest model step.
ALTER TABLE runs ADD COLUMN stop_reason TEXT NOT NULL DEFAULT '';
