package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// floodServer is an MCP server (the SDK's, over streamable HTTP on
// loopback) that counts its tools/list requests: the first is answered at
// once, each later one sends its number on entered and is answered once
// release is closed. Its tool flood {n} sends notifications/tools/list_changed,
// waits until a tools/list entered, sends n-1 more, then pings the client:
// the client handles a server's messages in order, so when the ping is
// answered the client has taken every notification.
func floodServer(t *testing.T) (u string, lists *atomic.Int32, entered chan int32, release chan struct{}) {
	lists, entered, release = new(atomic.Int32), make(chan int32, 1000), make(chan struct{})
	srv := sdk.NewServer(&sdk.Implementation{Name: "flood", Version: "1"}, nil)
	var send sdk.MethodHandler
	srv.AddSendingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		send = next // the SDK's own sending, to send list_changed at will (the SDK's server debounces its own)
		return next
	})
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "tools/list" {
				if n := lists.Add(1); n > 1 {
					entered <- n
					<-release
				}
			}
			return next(ctx, method, req)
		}
	})
	sdk.AddTool(srv, &sdk.Tool{Name: "flood"}, func(ctx context.Context, req *sdk.CallToolRequest, in struct {
		N int `json:"n"`
	}) (*sdk.CallToolResult, any, error) {
		notify := func() error {
			_, err := send(ctx, "notifications/tools/list_changed",
				&sdk.ServerRequest[*sdk.ToolListChangedParams]{Session: req.Session, Params: &sdk.ToolListChangedParams{}})
			return err
		}
		if err := notify(); err != nil {
			return nil, nil, err
		}
		first := <-entered
		for range in.N - 1 {
			if err := notify(); err != nil {
				return nil, nil, err
			}
		}
		if err := req.Session.Ping(ctx, nil); err != nil {
			return nil, nil, err
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(first)}}}, nil, nil
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return ts.URL, lists, entered, release
}

// However many list_changed notifications come while a relist is in
// flight, one more relist follows it: one tools/list in flight per server.
func TestListChangedCoalesced(t *testing.T) {
	u, lists, entered, release := floodServer(t)
	s, err := startCRM(t, u)
	if err != nil {
		t.Fatal(err)
	}
	if n := lists.Load(); n != 1 {
		t.Fatalf("tools/list after start: %d", n)
	}
	const notifications = 200
	got, err := call(s, context.Background(), "crm__flood", fmt.Sprintf(`{"n": %d}`, notifications))
	if err != nil || got != "2" {
		t.Fatalf("flood = %q, %v", got, err)
	}
	// Every notification was taken; the first relist is in flight.
	if n := lists.Load(); n != 2 {
		t.Errorf("tools/list while the first relist is in flight: %d, want 2", n)
	}
	close(release)
	select {
	case n := <-entered:
		if n != 3 {
			t.Errorf("the relist after the one in flight is tools/list %d, want 3", n)
		}
	case <-time.After(30 * time.Second): // a bound, not a measure: it comes at once
		t.Fatal("no relist followed the one in flight, though notifications came meanwhile")
	}
	s.Close() // waits for the relists
	if n := lists.Load(); n != 3 {
		t.Errorf("%d notifications made %d tools/list, want 3 (start, the relist in flight, one more)", notifications, n)
	}
}
