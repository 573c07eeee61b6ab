// Command ctxcall is a command tool's helper in cmd/agentd's tests: for
// each pair of arguments PATH BODY it POSTs BODY to $AGENTD_CONTEXT_URL
// PATH with Authorization: Bearer $AGENTD_CONTEXT_TOKEN, and it prints a
// JSON array of {"code": the HTTP status, "body": the answer}. With
// CTXCALL_SAVE set it first writes the URL and the token to that file
// (the test replays them after the call ended).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	url, token := os.Getenv("AGENTD_CONTEXT_URL"), os.Getenv("AGENTD_CONTEXT_TOKEN")
	if url == "" || token == "" {
		fmt.Fprintln(os.Stderr, "ctxcall: AGENTD_CONTEXT_URL or AGENTD_CONTEXT_TOKEN is not set")
		os.Exit(2)
	}
	if save := os.Getenv("CTXCALL_SAVE"); save != "" {
		if err := os.WriteFile(save, []byte(url+"\n"+token+"\n"), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "ctxcall:", err)
			os.Exit(2)
		}
	}
	type answer struct {
		Code int             `json:"code"`
		Body json.RawMessage `json:"body"`
	}
	var out []answer
	args := os.Args[1:]
	for i := 0; i+1 < len(args); i += 2 {
		req, err := http.NewRequest(http.MethodPost, url+args[i], bytes.NewBufferString(args[i+1]))
		if err != nil {
			fmt.Fprintln(os.Stderr, "ctxcall:", err)
			os.Exit(2)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ctxcall:", err)
			os.Exit(2)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !json.Valid(body) {
			body, _ = json.Marshal(string(body))
		}
		out = append(out, answer{resp.StatusCode, body})
	}
	b, _ := json.Marshal(out)
	os.Stdout.Write(b)
}
