package webhook

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus collectors. Labels are endpoint ids
// (configured, bounded) and outcomes; never tenants or keys.
type metrics struct {
	deliveries *prometheus.CounterVec
	latency    *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer, s *Service) (*metrics, error) {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentd_webhook_attempts_total",
			Help: "Webhook delivery attempts by endpoint and outcome (success, retry, failed, disabled).",
		}, []string{"endpoint", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentd_webhook_attempt_duration_seconds",
			Help:    "Duration of webhook delivery attempts by endpoint.",
			Buckets: prometheus.ExponentialBuckets(0.005, 3, 9), // 5ms .. 33s
		}, []string{"endpoint"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.deliveries, m.latency, queueCollector{s}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observe(endpoint, outcome string, took time.Duration) {
	m.deliveries.WithLabelValues(endpoint, outcome).Inc()
	m.latency.WithLabelValues(endpoint).Observe(took.Seconds())
}

// queueCollector reports the pending deliveries of each endpoint, read from
// the store when scraped.
type queueCollector struct{ s *Service }

var queueDesc = prometheus.NewDesc("agentd_webhook_queue_depth",
	"Webhook deliveries waiting for an attempt, by endpoint.", []string{"endpoint"}, nil)

var disabledDesc = prometheus.NewDesc("agentd_webhook_endpoint_disabled",
	"1 while the endpoint is disabled (it answered 410 Gone), else 0.", []string{"endpoint"}, nil)

func (q queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- queueDesc; ch <- disabledDesc }

func (q queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	depth, err := q.s.store.WebhookQueueDepth(ctx, "", "")
	for _, ep := range q.s.endpoints {
		if err == nil {
			ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(depth[ep.ID]), ep.ID)
		}
		off := 0.0
		if disabled, _, _ := ep.disabled(); disabled {
			off = 1
		}
		ch <- prometheus.MustNewConstMetric(disabledDesc, prometheus.GaugeValue, off, ep.ID)
	}
}
