package connections

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// A downstream server that echoes the request (its headers in the body, or
// in an error) does not hand the model the connection's credentials.
func TestCredentialsRedactedFromResults(t *testing.T) {
	echo := func(status int) *recorder {
		return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := json.Marshal(map[string]any{"headers": r.Header})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(b)
		})
	}
	env := map[string]string{"TOKEN": "tok-" + secretValue, "KEY": "key-" + secretValue, "USER": "alice", "PASS": "pw-" + secretValue}
	for _, auth := range []string{
		`{"type":"bearer","token_env":"TOKEN"}`,
		`{"type":"header","name":"x-api-key","value_env":"KEY"}`,
		`{"type":"basic","username_env":"USER","password_env":"PASS"}`,
	} {
		for _, status := range []int{200, 500} {
			api := echo(status)
			c := loadConn(t, `{"base_url":"`+api.URL+`/api","auth":`+auth+`}`, env, nil)
			res, err := NewRequestTool([]*Connection{c}).Execute(context.Background(),
				requestCall("call_1", `{"connection":"api","method":"GET","endpoint":"/echo","intent":"read"}`))
			text := string(res)
			if err != nil {
				text = err.Error()
			}
			if strings.Contains(text, secretValue) || !strings.Contains(text, "[redacted]") {
				t.Errorf("auth %s, status %d: the model would read %s", auth, status, text)
			}
			if status == 200 && (err != nil || !json.Valid(res)) {
				t.Errorf("auth %s: result %s, %v", auth, res, err)
			}
		}
	}
}
