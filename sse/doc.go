// Package sse streams a conversation's durable event log to clients as
// Server-Sent Events (SPEC §6, §10).
//
// The server side is written here rather than taken from
// github.com/r3labs/sse/v2, whose Server blocks every subscriber of a stream
// on the slowest one and has no heartbeat or write deadlines (see
// docs/sse.md). It has three parts:
//
//   - WriteEvent and WriteComment: the wire format, in one place.
//   - Hub: a non-blocking, in-memory fan-out of committed events to live
//     subscribers; a subscriber that falls behind is cut off, never waited on.
//     The loop's commits publish to it directly. PublishFeed, which nothing
//     wires today, feeds it from the event feed instead: the seam described
//     in docs/architecture.md, "The event feed".
//   - Serve: one stream. It subscribes first, replays the durable log strictly
//     after the client's Last-Event-ID, then forwards live events, with no gap
//     and no duplicate, a heartbeat comment and a deadline on every write.
//
// The client side, Follow, wraps the r3labs client and covers its traps:
// events over 64 KiB, no reconnect after a clean end of stream, a retry loop
// that ignores its context, and truncated events at a broken connection.
package sse
