package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsRoute: /metrics answers without a key (as the probes do),
// in the Prometheus text format; requests are counted by route template,
// so unknown paths and methods add no series of their own.
func TestMetricsRoute(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, _ := newFakeServer(t, roleKeys, api.Config{Registerer: reg, Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})})
	want(t, "healthz", s.do("GET", "/healthz", "", "", nil), http.StatusOK, "")
	want(t, "a tool call", s.do("GET", "/v1/tool-calls/"+someCall, "k-op", "", nil), http.StatusOK, "")
	for _, p := range []string{"/v1/nope", "/v1/nope/2", "/secret-" + strings.Repeat("x", 40)} {
		s.do("GET", p, "", "", nil)
	}
	s.do("BREW", "/healthz", "", "", nil)
	r := s.do("GET", "/metrics", "", "", nil)
	if r.status != http.StatusOK {
		t.Fatalf("/metrics without a key: %d %s", r.status, r.body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(r.body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	reqs := fams["agentd_http_requests_total"]
	if reqs == nil {
		t.Fatalf("no agentd_http_requests_total in\n%s", r.body)
	}
	got := map[string]float64{}
	for _, m := range reqs.GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		got[l["method"]+" "+l["route"]+" "+l["code"]] += m.GetCounter().GetValue()
	}
	for k, n := range map[string]float64{
		"GET /healthz 200":           1,
		"GET /v1/tool-calls/:id 200": 1,
		"other /healthz 405":         1,
		"GET unmatched 404":          3, // unknown paths are not authenticated first

	} {
		if got[k] != n {
			t.Errorf("requests %q = %v, want %v (all: %v)", k, got[k], n, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("series %v, want exactly 4", got)
	}
	if g := fams["agentd_sse_streams_open"]; g == nil || g.GetMetric()[0].GetGauge().GetValue() != 0 {
		t.Errorf("agentd_sse_streams_open = %v, want 0", g)
	}
}
