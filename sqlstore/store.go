package sqlstore

// Store is the roles of the store written once, over a backend: a
// backend's DB embeds it and adds what is its own (opening, migrations,
// events, audit, runs' statements in its dialect, …).
type Store struct {
	*ConversationStore
	*ToolCallStore
	*WebhookStore
	*FeedStore
	*ThreadStore
	*JournalStore
	*LinkStore
	*ScheduleStore
	*GrantStore
	*RunStore
	*EventLog
	*AuditLog
	*InputStore
}

// New returns the store of backend b, whose SQL is d.
func New(b Backend, d *Dialect) *Store {
	conv, grants := &ConversationStore{b: b}, &GrantStore{b: b}
	calls := newToolCallStore(b, d, conv.messageExists, grants)
	return &Store{
		ConversationStore: conv,
		ToolCallStore:     calls,
		RunStore:          newRunStore(b, d, calls),
		WebhookStore:      &WebhookStore{b: b, d: d},
		FeedStore:         &FeedStore{b: b},
		EventLog:          &EventLog{b: b, d: d},
		AuditLog:          &AuditLog{b: b},
		GrantStore:        grants,
		ThreadStore:       &ThreadStore{b: b},
		JournalStore:      &JournalStore{b: b},
		LinkStore:         &LinkStore{b: b},
		ScheduleStore:     &ScheduleStore{b: b},
		InputStore:        &InputStore{b: b},
	}
}

// Prepared is the statements the roles run on every step or state change:
// a backend that prepares statements prepares these.
func (s *Store) Prepared() []string {
	return append(s.ToolCallStore.prepared(), insertGrantQuery, activeGrantsQuery, conversationQuery,
		insertMessageQuery, messagesQuery, messagesAfterQuery, messageExistsQuery,
		activeRunQuery, insertRunQuery, runByIDQuery, updateRunQuery, s.RunStore.updateFrom, recordStepQuery, countParkedQuery,
		eventsQuery, lastSeqQuery, nextSeqQuery, insertEventQuery, feedQueries[0], feedQueries[1], feedQueries[2])
}
