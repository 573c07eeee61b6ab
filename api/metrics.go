package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// httpMetrics are the API's collectors (docs/metrics.md). Labels are
// bounded: the route is the registered template ("unmatched" for any
// other path), the method one of the standard ones or "other".
type httpMetrics struct {
	routes    map[string]bool
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	streams   prometheus.Gauge
}

// newHTTPMetrics returns the API's collectors, registered on reg unless
// it is nil.
func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		routes: map[string]bool{},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_http_requests_total",
			Help: "HTTP requests answered, by route template, method and status code."}, []string{"route", "method", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentd_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route template and method (an SSE stream counts until it ends).",
			Buckets: prometheus.DefBuckets}, []string{"route", "method"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentd_sse_streams_open",
			Help: "SSE streams open now (GET /v1/conversations/{id}/events)."}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.durations, m.streams)
	}
	return m
}

// observe counts one answered request.
func (m *httpMetrics) observe(route, method string, status int, took time.Duration) {
	if !m.routes[route] {
		route = "unmatched"
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
	default:
		method = "other"
	}
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.durations.WithLabelValues(route, method).Observe(took.Seconds())
}
