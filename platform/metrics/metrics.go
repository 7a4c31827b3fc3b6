// Package metrics holds Samla's Prometheus collectors. One Metrics value is built per process and
// passed to the parts that record; labels never carry personal data or unbounded ids.
package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the collectors every role records into.
type Metrics struct {
	HTTPRequests     *prometheus.CounterVec   // method, route, code
	HTTPDuration     *prometheus.HistogramVec // method, route
	Appends          *prometheus.CounterVec   // category, outcome (ok, conflict, error)
	AppendDuration   prometheus.Histogram
	RelayPublished   prometheus.Counter
	RelayLag         prometheus.Gauge // seconds between an event's occurrence and its publication
	RelayCheckpoint  prometheus.Gauge
	ProjectionEvents *prometheus.CounterVec // projection
	// ProjectionBatches counts the batches (one read-model transaction each) beside the events,
	// so that events per batch, what a projection's cost per event turns on, can be read.
	ProjectionBatches  *prometheus.CounterVec // projection
	ProjectionLag      *prometheus.GaugeVec   // projection; seconds between occurrence and read-model write
	ConnectorOutcomes  *prometheus.CounterVec // company, status
	ConnectorSessions  prometheus.Gauge
	CompanyRequestTime *prometheus.HistogramVec // company, outcome
	// ConsentStatuses counts the consents that reached each status (the consents projection
	// counts each status change once, as it folds it), by company and status.
	ConsentStatuses *prometheus.CounterVec // company, status
	// ConsentAuthorization is the time from a consent's EID order to its authorization.
	ConsentAuthorization *prometheus.HistogramVec // company
	// ConsentOutcomes counts the consents the connectors authorized or ended, by company,
	// status (AUTHORIZED, FAILED, EXPIRED, REVOKED) and failure code ("" unless FAILED).
	ConsentOutcomes *prometheus.CounterVec // company, status, code
	// BankConsentRevocations counts the withdrawals of consents at the banks, by company and
	// outcome (ok, failed: given up after the retries).
	BankConsentRevocations *prometheus.CounterVec // company, outcome
	// CancellationStatuses counts the insurance cancellations that reached each status (the
	// cancellations projection counts each status change once, as it folds it), by company and
	// status.
	CancellationStatuses *prometheus.CounterVec // company, status
	// CancellationSignature is the time from a cancellation's signing link to the holder's
	// signature, observed once per cancellation.
	CancellationSignature *prometheus.HistogramVec // company
	// CancellationOutcomes counts the cancellations the connector workers moved (sent, closed,
	// rejected, timed out, withdrawn for a deleted user, document errors), by company, status
	// and code.
	CancellationOutcomes *prometheus.CounterVec // company, status, code
	// SigningProviderCalls counts the calls of the signing providers, by operation and outcome.
	SigningProviderCalls *prometheus.CounterVec // operation, outcome
	// StatusViewEvictions counts the rows the in-memory status view dropped to make room.
	StatusViewEvictions prometheus.Counter
	// StatusFollowerDrops counts the rows the status view's follower dropped (a gap in their
	// revisions or an event it could not fold): each is read from the read model again.
	StatusFollowerDrops *prometheus.CounterVec // reason
	// StatusReadFallbacks counts the status polls answered from the event store because the
	// read model did not show the collection yet (read-your-writes), by outcome (found, absent).
	StatusReadFallbacks *prometheus.CounterVec // outcome
	// ConnectorParked are the collection sessions waiting without a worker slot (for the user,
	// the client's input or the company's next state); ConnectorQueued those ready for a step
	// and waiting for a slot. Plain gauges: a client id is no label anywhere.
	ConnectorParked prometheus.Gauge
	ConnectorQueued prometheus.Gauge
	// ConnectorSlotLimit is the collection worker's slot limit now: its --max-sessions, or
	// fewer while the CPU is saturated (when its slots adapt).
	ConnectorSlotLimit prometheus.Gauge

	reg prometheus.Registerer
}

// New registers every collector on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "samla_http_requests_total", Help: "HTTP requests by route template and status code.",
		}, []string{"method", "route", "code"}),
		HTTPDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "samla_http_request_duration_seconds", Help: "HTTP request latency by route template.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"method", "route"}),
		Appends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "samla_eventstore_appends_total", Help: "Event-store appends by stream category and outcome.",
		}, []string{"category", "outcome"}),
		AppendDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "samla_eventstore_append_duration_seconds", Help: "Durable append latency.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5},
		}),
		RelayPublished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "samla_relay_published_events_total", Help: "Events the relay published to Kafka.",
		}),
		RelayLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "samla_relay_publish_lag_seconds", Help: "Age of the last published event when Kafka acknowledged it.",
		}),
		RelayCheckpoint: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "samla_relay_checkpoint_position", Help: "Global position the relay has published up to.",
		}),
		ProjectionEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "samla_projection_events_total", Help: "Events applied to read models.",
		}, []string{"projection"}),
		ProjectionBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "samla_projection_batches_total", Help: "Batches of events applied to read models, one transaction each.",
		}, []string{"projection"}),
		ProjectionLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "samla_projection_lag_seconds", Help: "Age of the last event a projection wrote.",
		}, []string{"projection"}),
		ConnectorOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "samla_connector_outcomes_total", Help: "Collections ended by company and final status.",
		}, []string{"company", "status"}),
		ConnectorSessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "samla_connector_active_sessions", Help: "Connector sessions running a step now (worker slots taken); parked ones are not counted.",
		}),
		ConnectorParked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "samla_connector_parked_sessions",
			Help: "Collection sessions waiting for the user, the client or the company without a worker slot.",
		}),
		ConnectorQueued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "samla_connector_queued_sessions",
			Help: "Collection sessions ready for their next step, waiting for a worker slot.",
		}),
		ConnectorSlotLimit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "samla_connector_slot_limit",
			Help: "Steps the collection worker runs at once at most now: --max-sessions, or fewer (down to the --min-sessions floor) while the CPU is saturated.",
		}),
		ConsentOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "samla_connector_consent_outcomes_total",
			Help: "Consents the connector workers authorized or ended, by company, status and failure code.",
		}, []string{"company", "status", "code"}),
		BankConsentRevocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "samla_connector_bank_consent_revocations_total",
			Help: "Withdrawals of consents at the banks, by company and outcome (ok, failed after retries).",
		}, []string{"company", "outcome"}),
		CompanyRequestTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "samla_company_request_duration_seconds", Help: "Latency of requests to companies.",
			Buckets: prometheus.DefBuckets,
		}, []string{"company", "outcome"}),
		ConsentStatuses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "samla_consent_status_changes_total", Help: "Consents that reached a status, by company and status.",
		}, []string{"company", "status"}),
		ConsentAuthorization: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "samla_consent_authorization_duration_seconds",
			Help: "Time from a consent's electronic-ID order to its authorization (the person's signature).",
			// A person signs in seconds to a minute; the order times out after SAMLA_EID_ORDER_TIMEOUT.
			Buckets: []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 300},
		}, []string{"company"}),
		CancellationStatuses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "samla_cancellation_status_changes_total",
			Help: "Insurance cancellations that reached a status, by company and status.",
		}, []string{"company", "status"}),
		CancellationSignature: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "samla_cancellation_signature_duration_seconds",
			Help: "Time from a cancellation's signing link to the holder's signature.",
			// A holder signs within minutes to days; unsigned, the cancellation times out after
			// SAMLA_SIGNING_TIMEOUT (30 days by default).
			Buckets: []float64{30, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400, 14 * 86400, 30 * 86400},
		}, []string{"company"}),
		CancellationOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "samla_connector_cancellation_outcomes_total",
			Help: "Cancellations the connector workers moved, by company, status and code.",
		}, []string{"company", "status", "code"}),
		SigningProviderCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "samla_signing_provider_calls_total",
			Help: "Calls of the signing providers, by operation (start, status, document, cancel) and outcome.",
		}, []string{"operation", "outcome"}),
		StatusViewEvictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "samla_status_view_evictions_total", Help: "Rows the in-memory status view dropped to make room.",
		}),
		StatusFollowerDrops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "samla_status_view_follower_drops_total",
			Help: "Rows the status view's follower dropped, to be read from the read model again, by reason (gap, unfoldable).",
		}, []string{"reason"}),
		StatusReadFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "samla_status_event_store_reads_total",
			Help: "Status polls of a collection the read model did not show yet, answered from the event store, by outcome (found, absent).",
		}, []string{"outcome"}),
		reg: reg,
	}
	reg.MustRegister(m.StatusViewEvictions, m.StatusReadFallbacks, m.StatusFollowerDrops)
	reg.MustRegister(m.HTTPRequests, m.HTTPDuration, m.Appends, m.AppendDuration, m.RelayPublished,
		m.RelayLag, m.RelayCheckpoint, m.ProjectionEvents, m.ProjectionBatches, m.ProjectionLag, m.ConnectorOutcomes,
		m.ConnectorSessions, m.CompanyRequestTime, m.ConsentOutcomes, m.BankConsentRevocations, m.ConsentStatuses, m.ConsentAuthorization,
		m.CancellationStatuses, m.CancellationSignature, m.CancellationOutcomes, m.SigningProviderCalls,
		m.ConnectorParked, m.ConnectorQueued, m.ConnectorSlotLimit)
	return m
}

// ListenerConnections reports held() as the connections a budget of listeners holds and max
// as its size (budget: public, ops or sandbox); call it once per budget. A budget that stays
// full is clients waiting in the kernel's backlog.
func (m *Metrics) ListenerConnections(budget string, max int, held func() int) {
	labels := prometheus.Labels{"budget": budget}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "samla_listener_connections", Help: "Connections the listeners of a budget hold.", ConstLabels: labels,
	}, func() float64 { return float64(held()) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "samla_listener_connections_max", Help: "Connections the listeners of a budget may hold at once.", ConstLabels: labels,
	}, func() float64 { return float64(max) }))
}

// StatusViewRows reports rows() as the size of the in-memory status view; call it once.
func (m *Metrics) StatusViewRows(rows func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "samla_status_view_rows", Help: "Rows the in-memory status view holds.",
	}, func() float64 { return float64(rows()) }))
}
