package server

import (
	"github.com/rs/zerolog"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Traces are off, and free, unless an endpoint is set; off wins.
func TestTracingOffWithoutEndpoint(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"},
	} {
		cfg, err := parseTracing(envOf(env))
		if cfg != nil || err != nil {
			t.Errorf("%v: traces on (%+v, %v)", env, cfg, err)
		}
		var done closers
		if tp, _, err := startTracing(envOf(env), zerolog.Nop(), &done); tp != nil || err != nil || len(done) != 0 {
			t.Errorf("%v: startTracing gave %v, %v", env, tp, err)
		}
	}
}

func TestTracingConfig(t *testing.T) {
	cfg, err := parseTracing(envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
		"OTEL_EXPORTER_OTLP_HEADERS": "x-honeycomb-team=abc%3D%3D, x-dataset = agentd ", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-dataset=traces",
		"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.endpoint != "http://collector:4318/v1/traces" || cfg.service != "agentd" || !cfg.content ||
		cfg.headers["x-honeycomb-team"] != "abc==" || cfg.headers["x-dataset"] != "traces" || len(cfg.headers) != 2 {
		t.Errorf("config %+v", cfg)
	}
	if d := cfg.sampler.Description(); !strings.HasPrefix(d, "ParentBased{root:AlwaysOnSampler") {
		t.Errorf("default sampler %s", d)
	}
	cfg, err = parseTracing(envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://ignored:4318",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example/otlp/traces", "OTEL_SERVICE_NAME": "billing-agent",
		"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.endpoint != "https://traces.example/otlp/traces" || cfg.service != "billing-agent" ||
		!strings.Contains(cfg.sampler.Description(), "TraceIDRatioBased{0.25}") {
		t.Errorf("config %+v, sampler %s", cfg, cfg.sampler.Description())
	}
}

// Bad settings stop the server with an error naming the variable, never
// quoting a header's value.
func TestTracingBadInput(t *testing.T) {
	ep := "http://127.0.0.1:4318"
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://x/v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_HEADERS": "authorization:Bearer-s3cret"}, "OTEL_EXPORTER_OTLP_HEADERS: entry 1"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_HEADERS": "a=b,authorization=s3cret%zz"}, "OTEL_EXPORTER_OTLP_HEADERS: entry 2"},
	} {
		_, err := parseTracing(envOf(c.env))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%v: error %v, want one naming %s", c.env, err, c.want)
		}
	}
}
