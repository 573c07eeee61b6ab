// Command server is the MCP server of package mcp's tests (and of
// cmd/agentd's): the tools of mcp/internal/testserver, notes written to
// $NOTES_FILE. By default it serves stdio; with -http ADDR it serves
// streamable HTTP on ADDR (":0" picks a port) instead, refusing with 401
// every request whose Authorization header is not "Bearer $MCP_TOKEN"
// (when MCP_TOKEN is set), and prints "listening on http://HOST:PORT" on
// stdout once it accepts connections. With -odd-names it also offers the
// tools of testserver.AddOddNames; with -banner TEXT a stdio server prints TEXT and a
// newline on stdout before it speaks MCP (as some servers print a start-up
// banner); with -linger D a stdio server, once its stdin is closed, waits D,
// then writes "exited after stdin closed" to $NOTES_FILE and exits (as a
// server that cleans up before it exits).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/agentd-dev/agentd/mcp/internal/testserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	odd := flag.Bool("odd-names", false, "also offer tools with names no model may be offered")
	banner := flag.String("banner", "", "print this line on stdout before speaking MCP")
	linger := flag.Duration("linger", 0, "once stdin is closed, wait this long, write a note and exit")
	flag.Parse()
	srv := testserver.New(os.Getenv("NOTES_FILE"))
	if *odd {
		testserver.AddOddNames(srv)
	}
	if *addr == "" {
		if *banner != "" {
			fmt.Println(*banner)
		}
		err := srv.Run(context.Background(), &mcp.StdioTransport{})
		if *linger > 0 {
			time.Sleep(*linger)
			note(os.Getenv("NOTES_FILE"), "exited after stdin closed")
			return
		}
		if err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := serveHTTP(srv, *addr, os.Getenv("MCP_TOKEN")); err != nil {
		log.Fatal(err)
	}
}

// note appends line to file.
func note(file, line string) {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}

func serveHTTP(srv *mcp.Server, addr, token string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	fmt.Printf("listening on http://%s\n", ln.Addr())
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
}
