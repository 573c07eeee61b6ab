-- 0010: the calls of a conversation's messages (MessageToolCalls), found
-- by message id instead of read from all of the conversation's calls, as
-- SQLite's 0025.
CREATE INDEX tool_calls_message ON tool_calls (message_id);
