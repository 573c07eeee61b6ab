package server

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentd-dev/agentd/internal/tracing"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// This file wires traces (docs/observability.md): the OpenTelemetry SDK
// with the OTLP/HTTP protobuf exporter, configured from the standard
// OTEL_* variables. Only package server imports the SDK (TestImportRules); the
// engine speaks the trace API.

// traceShutdownTimeout bounds the flush of the spans still queued when
// the server stops.
const traceShutdownTimeout = 5 * time.Second

// tracingConfig is what the OTEL_* variables choose.
type tracingConfig struct {
	endpoint string // the traces URL, …/v1/traces
	headers  map[string]string
	service  string
	sampler  sdktrace.Sampler
	content  bool // OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
}

// parseTracing reads the OTEL_* variables. It returns nil, and no error,
// when traces are off: no endpoint is set, OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none.
func parseTracing(getenv func(string) string) (*tracingConfig, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return nil, nil
	}
	endpoint, name := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	if endpoint == "" {
		base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		if base == "" {
			return nil, nil
		}
		endpoint, name = strings.TrimRight(base, "/")+"/v1/traces", "OTEL_EXPORTER_OTLP_ENDPOINT"
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: %q is not an http:// or https:// URL", name, endpoint)
	}
	if e := getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported (use otlp or none)", e)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if p := getenv(v); p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf("%s: %q is not supported (agentd exports OTLP over http/protobuf)", v, p)
		}
	}
	cfg := &tracingConfig{endpoint: endpoint, service: or(getenv("OTEL_SERVICE_NAME"), "agentd"),
		content: strings.EqualFold(getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"), "true")}
	var err error
	if cfg.headers, err = otlpHeaders(getenv); err != nil {
		return nil, err
	}
	if cfg.sampler, err = sampler(getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG")); err != nil {
		return nil, err
	}
	return cfg, nil
}

// otlpHeaders reads OTEL_EXPORTER_OTLP_HEADERS and, over it,
// OTEL_EXPORTER_OTLP_TRACES_HEADERS: key=value pairs separated by commas,
// values URL-encoded. The error never quotes a value (they are secrets).
func otlpHeaders(getenv func(string) string) (map[string]string, error) {
	h := map[string]string{}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for i, pair := range strings.Split(getenv(name), ",") {
			if strings.TrimSpace(pair) == "" {
				continue
			}
			k, v, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			val, err := url.PathUnescape(strings.TrimSpace(v))
			if !ok || k == "" || err != nil {
				return nil, fmt.Errorf("%s: entry %d is not key=value with a URL-encoded value", name, i+1)
			}
			h[k] = val
		}
	}
	return h, nil
}

// sampler is the sampler OTEL_TRACES_SAMPLER names (default
// parentbased_always_on), with OTEL_TRACES_SAMPLER_ARG as the ratio.
func sampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG: %q is not a ratio between 0 and 1", arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER: %q is not supported (use always_on, always_off, traceidratio or their parentbased_ forms)", name)
}

// startTracing returns the tracer provider the OTEL_* variables configure,
// or nil when traces are off (the engine then records nothing and pays
// one nil check per span site). Its shutdown, which flushes the queued
// spans, is added to done.
func startTracing(getenv func(string) string, log zerolog.Logger, done *closers) (trace.TracerProvider, bool, error) {
	cfg, err := parseTracing(getenv)
	if err != nil || cfg == nil {
		return nil, false, err
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(cfg.endpoint), otlptracehttp.WithHeaders(cfg.headers))
	if err != nil {
		return nil, false, fmt.Errorf("OTLP exporter: %w", err)
	}
	// Export failures are logged, never fatal: a trace never fails a run.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn().Err(err).Msg("trace export") }))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(cfg.sampler),
		sdktrace.WithIDGenerator(tracing.IDGenerator{}),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", cfg.service))),
	)
	done.add(func() {
		ctx, cancel := context.WithTimeout(context.Background(), traceShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn().Err(err).Msg("trace export at shutdown")
		}
	})
	u, _ := url.Parse(cfg.endpoint) // parsed by parseTracing
	log.Info().Str("endpoint", u.Redacted()).Str("service", cfg.service).Msg("traces: exporting over OTLP/HTTP")
	return tp, cfg.content, nil
}
