package storetest

import (
	"testing"

	"github.com/agentd-dev/agentd"
)

// The suite by role (store.go): one function per role of agentd.Store, so
// a new backend can pass the contract role by role and Run is all of them.
// Each case opens its own store, a full agentd.Store (a case of one role
// sets up its data through the others: a tool call needs a conversation
// and a run); the role's function names which methods its cases pin down.
// Every suite but RunEventLog and RunToolCalls asks only for a way to open
// a store; RunEventLog also reopens one (a feed cursor survives a
// restart), and both steer commits with b.BeforeCommit when it is set
// (group commit, group.go).

// testCase is one case of a role's suite: a subtest of the caller's test,
// on a store of its own.
type testCase struct {
	name string
	fn   func(t *testing.T, s agentd.Store)
}

// runCases runs each case as a subtest of t, on a new store from open.
func runCases(t *testing.T, open func(t *testing.T) agentd.Store, cases []testCase) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, open(t))
		})
	}
}

// Run runs the contract suite against stores of b: every role's.
func Run(t *testing.T, b Backend) {
	RunHealth(t, b.Open)
	RunConversations(t, b.Open)
	RunRuns(t, b.Open)
	RunToolCalls(t, b)
	RunAudit(t, b.Open)
	RunEventLog(t, b)
	RunThreads(t, b.Open)
	RunWebhookOutbox(t, b.Open)
	RunSchedules(t, b.Open)
	RunChildJournal(t, b.Open)
	RunLinks(t, b.Open)
	RunGrants(t, b.Open)
	RunInputs(t, b.Open)
}

// RunHealth tests the Health role: Ping (storetest.go).
func RunHealth(t *testing.T, open func(t *testing.T) agentd.Store) {
	runCases(t, open, []testCase{
		{"Ping", testPing},
	})
}

// RunConversations tests the ConversationStore role: CreateConversation,
// Conversation (with its LastSeq), AddMessage, Messages and MessagesAfter (run.go,
// toolcall.go).
func RunConversations(t *testing.T, open func(t *testing.T) agentd.Store) {
	runCases(t, open, []testCase{
		{"Conversation/RoundTrip", testConversationRoundTrip},
		{"Conversation/Errors", testConversationErrors},
		{"Conversation/LastSeq", testConversationLastSeq},
		{"Messages/Order", testMessagesOrder},
		{"MessagesAfter", testMessagesAfter},
		{"AddMessage/Errors", testAddMessageErrors},
	})
}

// RunRuns tests the RunStore role: StartRun, Run, UpdateRun, CancelRun,
// RunsToDrive and RecordStep (run.go, drive.go).
func RunRuns(t *testing.T, open func(t *testing.T) agentd.Store) {
	runCases(t, open, []testCase{
		{"StartRun/RoundTrip", testStartRunRoundTrip},
		{"StartRun/OneActiveRun", testStartRunOneActive},
		{"StartRun/Errors", testStartRunErrors},
		{"StartRun/Concurrent", testStartRunConcurrent},
		{"Run/NotFound", testRunNotFound},
		{"UpdateRun/Applies", testUpdateRunApplies},
		{"UpdateRun/Conflict", testUpdateRunConflict},
		{"UpdateRun/AnyFrom", testUpdateRunAnyFrom},
		{"UpdateRun/Errors", testUpdateRunErrors},
		{"RunsToDrive", testRunsToDrive},
		{"RunsToDrive/CountsParked", testRunsToDriveCountsParked},
		{"RecordStep/Applies", testRecordStepApplies},
		{"RecordStep/Conflict", testRecordStepConflict},
		{"RecordStep/Ends", testRecordStepEnds},
		{"CancelRun", testCancelRun},
		{"LeaseRun", testLeaseRun},
		{"LeaseRun/Concurrent", testLeaseRunConcurrent},
	})
}

// RunToolCalls tests the ToolCallStore role: CreateToolCalls, the reads of
// calls (ToolCall, ToolCalls, RunToolCalls, MessageToolCalls, ToolCallsAfter, ToolCallsByStatus,
// DueToolCalls, ToolCallsDueBetween), UpdateToolCall and UpdateToolCalls, the pending list
// (PendingToolCalls, ParkedCount) with its tenant scope, and NextDeadline
// (toolcall.go, audit.go, drive.go, scope.go), and conditional transitions
// inside a group commit (group.go).
func RunToolCalls(t *testing.T, b Backend) {
	runCases(t, b.Open, []testCase{
		{"ToolCall/RoundTrip", testToolCallRoundTrip},
		{"ToolCall/NotFound", testToolCallNotFound},
		{"CreateToolCalls/Atomic", testCreateToolCallsAtomic},
		{"CreateToolCalls/Errors", testCreateToolCallsErrors},
		{"ToolCalls/Order", testToolCallsOrder},
		{"RunToolCalls/Order", testRunToolCallsOrder},
		{"MessageToolCalls", testMessageToolCalls},
		{"ToolCallsAfter", testToolCallsAfter},
		{"ToolCallsByStatus", testToolCallsByStatus},
		{"DueToolCalls", testDueToolCalls},
		{"ToolCallsDueBetween", testToolCallsDueBetween},
		{"NextDeadline", testNextDeadline},
		{"UpdateToolCall/Applies", testUpdateToolCallApplies},
		{"UpdateToolCall/Edit", testUpdateToolCallEdit},
		{"UpdateToolCall/Repark", testUpdateToolCallRepark},
		{"UpdateToolCall/Card", testUpdateToolCallCard},
		{"UpdateToolCall/Conflict", testUpdateToolCallConflict},
		{"UpdateToolCall/DecisionsInOrder", testUpdateToolCallDecisionsInOrder},
		{"UpdateToolCall/Errors", testUpdateToolCallErrors},
		{"UpdateToolCall/ConcurrentApprovals", testConcurrentApprovals},
		{"UpdateToolCalls/Applies", testUpdateToolCallsApplies},
		{"UpdateToolCalls/Atomic", testUpdateToolCallsAtomic},
		{"UpdateToolCalls/Concurrent", testUpdateToolCallsConcurrent},
		{"PendingToolCalls", testPendingToolCalls},
		{"PendingToolCalls/Filters", testPendingFilters},
		{"PendingToolCalls/ConversationScoped", testPendingByConversationScoped},
		{"ToolCall/ApprovalRule", testToolCallApprovalRule},
		{"ToolCall/Governance", testToolCallGovernance},
		{"Run/RequestedBy", testRunRequestedBy},
	})
	t.Run("GroupCommit/ConditionalTransitions", func(t *testing.T) { testGroupConditionalTransitions(t, b) })
}

// RunAudit tests the AuditLog role: the entries the store writes with the
// facts they record (decisions, refusals, escalations, a subagent's
// refusal with its event), AppendAudit and Audit's filters and tenant
// scope (audit.go, scope.go).
func RunAudit(t *testing.T, open func(t *testing.T) agentd.Store) {
	runCases(t, open, []testCase{
		{"Audit/WrittenWithFacts", testAuditWrittenWithFacts},
		{"Audit/Filters", testAuditFilters},
		{"Audit/WithEvent", testAuditWithEvent},
		{"Audit/OtherProject", testAuditOtherProject},
		{"Audit/Interleaved", testAuditInterleaved},
	})
}

// RunEventLog tests the EventLog role: AppendEvents, Events and LastSeq
// (events.go), group commit of concurrent writers and of a failed commit
// (group.go), and the feed: positions, EventsAfter, LastPosition and the
// consumers' cursors, which survive reopening the store — the one case
// that uses b.Reopen (feed.go).
func RunEventLog(t *testing.T, b Backend) {
	runCases(t, b.Open, []testCase{
		{"Events/Sequence", testEventsSequence},
		{"Events/AfterAndLimit", testEventsAfterAndLimit},
		{"Events/Atomic", testEventsAtomic},
		{"Events/Errors", testEventsErrors},
		{"Events/LastSeq", testEventsLastSeq},
		{"Events/ConcurrentAppends", testEventsConcurrent},
		{"Feed/Positions", testFeedPositions},
		{"Feed/EventsAfter", testFeedEventsAfter},
		{"Feed/EventsAfterErrors", testFeedEventsAfterErrors},
		{"Feed/LastPosition", testFeedLastPosition},
		{"Feed/ConcurrentAppends", testFeedConcurrent},
		{"Feed/Consumers", testFeedConsumers},
		{"Feed/ConsumerErrors", testFeedConsumerErrors},
	})
	t.Run("Feed/ConsumerSurvivesReopen", func(t *testing.T) { testFeedConsumerReopen(t, b) })
	t.Run("GroupCommit/ConcurrentWriters", func(t *testing.T) { testGroupConcurrentWriters(t, b) })
	t.Run("GroupCommit/FailedCommit", func(t *testing.T) { testGroupFailedCommit(t, b) })
}

// RunThreads tests the ThreadStore role: BindThread and
// ThreadConversation, also under concurrent binders (thread.go).
func RunThreads(t *testing.T, open func(t *testing.T) agentd.Store) {
	runCases(t, open, []testCase{
		{"BindThread", testBindThread},
		{"BindThread/Errors", testBindThreadErrors},
		{"BindThread/Concurrent", testBindThreadConcurrent},
	})
}

// RunWebhookOutbox tests the WebhookOutbox role: enqueueing with the
// consumer's cursor, claims and leases, attempts, the delivery log and
// redelivery, the endpoints' states and the queue depth by tenant
// (webhook.go, scope.go).
func RunWebhookOutbox(t *testing.T, open func(t *testing.T) agentd.Store) {
	runCases(t, open, []testCase{
		{"Webhook/Enqueue", testWebhookEnqueue},
		{"Webhook/Claim", testWebhookClaim},
		{"Webhook/Attempts", testWebhookAttempts},
		{"Webhook/List", testWebhookList},
		{"Webhook/EndpointStates", testWebhookEndpointStates},
		{"Webhook/QueueDepthByTenant", testWebhookQueueDepthByTenant},
	})
}

// RunSchedules tests the ScheduleStore role: ClaimTick, also under
// concurrent claimers (schedule.go).
func RunSchedules(t *testing.T, open func(t *testing.T) agentd.Store) {
	runCases(t, open, []testCase{
		{"ClaimTick", testClaimTick},
		{"ClaimTick/Concurrent", testClaimTickConcurrent},
	})
}

// RunChildJournal tests the ChildJournal role: entries recorded and read
// back, the first entry of a key stays, tenants apart, bad input
// (journal.go).
func RunChildJournal(t *testing.T, open func(t *testing.T) agentd.Store) {
	runCases(t, open, []testCase{
		{"ChildJournal", testChildJournal},
		{"ChildJournal/Tenants", testChildJournalTenants},
	})
}

// RunLinks tests the LinkStore role: LinkSecret, SpendLink and LinkSpent,
// also under concurrent spenders (link.go).
func RunLinks(t *testing.T, open func(t *testing.T) agentd.Store) {
	runCases(t, open, []testCase{
		{"LinkSecret", testLinkSecret},
		{"SpendLink", testSpendLink},
	})
}
