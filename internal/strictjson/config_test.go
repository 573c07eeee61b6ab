package strictjson

import (
	"strings"
	"testing"
)

func TestDecodeStrict(t *testing.T) {
	type conf struct {
		Name string `json:"name"`
		N    int    `json:"n"`
	}
	for _, tc := range []struct{ in, prefix, want string }{
		{`{"name":"a","n":1}`, "", ""},
		{``, "", "empty file"},
		{`{"name":"a","extra":1}`, "", `"extra"`},
		{`{"n":"x"}`, "", `field "n"`},
		{"{\n  \"name\": \"a\",\n  oops\n}", "", "line 3"},
		{`{"n":1} {}`, "", "after"},
		{`[1]`, "model.script", `field "model.script"`},
	} {
		var c conf
		err := DecodeStrict([]byte(tc.in), &c, tc.prefix)
		if tc.want == "" {
			if err != nil || c.Name != "a" || c.N != 1 {
				t.Errorf("%q: %v %+v", tc.in, err, c)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to mention %q", tc.in, err, tc.want)
		}
	}
	if Join("", "a") != "a" || Join("a", "b") != "a.b" {
		t.Errorf("Join: %q %q", Join("", "a"), Join("a", "b"))
	}
}
