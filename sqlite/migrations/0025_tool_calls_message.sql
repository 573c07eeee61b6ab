-- 0025: the calls of a conversation's messages (MessageToolCalls, the
-- history's read of a step's new message and of the messages whose calls
-- were not all terminal), found by message id instead of read from all of
-- the conversation's calls. The index leads with message_id, so that the
-- conversation's other reads keep tool_calls_conversation and its order;
-- the query names its conversation as +conversation_id, so that the
-- planner does not keep tool_calls_conversation for its order either
-- (TestQueryPlans): the few calls of the messages named are sorted.
CREATE INDEX tool_calls_message ON tool_calls (message_id);
