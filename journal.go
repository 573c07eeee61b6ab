package agentd

// CheckJournalEntry is what every ChildJournal backend checks before it
// records e: EINVALID when TenantID, ToolCallID or Digest is empty or
// Ordinal is below 1.
func CheckJournalEntry(e JournalEntry) error {
	if e.TenantID == "" || e.ToolCallID == "" || e.Digest == "" || e.Ordinal < 1 {
		return Errorf(EINVALID, "a journal entry needs its tenant, tool call id, digest and an ordinal of at least 1")
	}
	return nil
}
