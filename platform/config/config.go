// Package config holds the settings of every role. Each setting is a flag whose default comes
// from a SAMLA_* environment variable, so the same names work in a shell, CI and containers.
package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Config is every role's configuration.
type Config struct {
	DataDir          string
	HTTPAddr         string
	OpsAddr          string
	BootstrapAPIKey  string
	EventStore       string // "sqlite" or an esdb:// connection string
	KafkaBrokers     string // empty: the embedded broker
	ClickHouseDSN    string // empty: SQLite read models
	Sandbox          bool
	SandboxAddr      string
	CompaniesURL     string
	WorkerID         string
	LogLevel         string
	LogFormat        string
	RateLimit        float64
	RateBurst        int
	StaleClaimAfter  time.Duration
	MockSignDelay    time.Duration
	ShutdownTimeout  time.Duration
	KafkaPartitions  int
	ConnectorSweep   time.Duration
	CompanyPoll      time.Duration
	MaxSessions      int
	SandboxLatencyMS int
	// Deadlines of SANDBOX.md: how long a collection waits for the user.
	ContactFormTimeout     time.Duration
	InputTimeout           time.Duration
	MethodSelectionTimeout time.Duration
	EIDOrderTimeout        time.Duration
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, ok := os.LookupEnv(name); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func envBool(name string, def bool) bool {
	switch strings.ToLower(env(name, "")) {
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off":
		return false
	}
	return def
}

func envInt(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(env(name, ""), &n); err == nil {
		return n
	}
	return def
}

// Bind registers the flags on fs with environment defaults and returns the config they fill.
func Bind(fs *pflag.FlagSet) *Config {
	c := &Config{}
	fs.StringVar(&c.DataDir, "data-dir", env("SAMLA_DATA_DIR", "./data"), "embedded event store, Kafka log and read models [SAMLA_DATA_DIR]")
	fs.StringVar(&c.HTTPAddr, "http-addr", env("SAMLA_HTTP_ADDR", "127.0.0.1:8080"), "REST API listener [SAMLA_HTTP_ADDR]")
	fs.StringVar(&c.OpsAddr, "ops-addr", env("SAMLA_OPS_ADDR", "127.0.0.1:9090"), "/metrics, /livez, /readyz listener [SAMLA_OPS_ADDR]")
	fs.StringVar(&c.BootstrapAPIKey, "bootstrap-api-key", env("SAMLA_BOOTSTRAP_API_KEY", ""), "API key of the sandbox client created on first start; generated when empty [SAMLA_BOOTSTRAP_API_KEY]")
	fs.StringVar(&c.EventStore, "eventstore", env("SAMLA_EVENTSTORE", "sqlite"), "sqlite, or an esdb:// connection string [SAMLA_EVENTSTORE]")
	fs.StringVar(&c.KafkaBrokers, "kafka-brokers", env("SAMLA_KAFKA_BROKERS", ""), "comma-separated brokers; empty runs the embedded broker [SAMLA_KAFKA_BROKERS]")
	fs.StringVar(&c.ClickHouseDSN, "clickhouse-dsn", env("SAMLA_CLICKHOUSE_DSN", ""), "clickhouse://host:9000/db for ClickHouse read models; empty uses SQLite [SAMLA_CLICKHOUSE_DSN]")
	fs.BoolVar(&c.Sandbox, "sandbox", envBool("SAMLA_SANDBOX", true), "start the sandbox demo companies [SAMLA_SANDBOX]")
	fs.StringVar(&c.SandboxAddr, "sandbox-addr", env("SAMLA_SANDBOX_ADDR", "127.0.0.1:0"), "sandbox companies listener [SAMLA_SANDBOX_ADDR]")
	fs.StringVar(&c.CompaniesURL, "companies-url", env("SAMLA_COMPANIES_URL", ""), "root URL of the company APIs a connector calls when it runs no sandbox of its own, e.g. a standalone `samla sandbox` [SAMLA_COMPANIES_URL]")
	fs.StringVar(&c.WorkerID, "worker-id", env("SAMLA_WORKER_ID", ""), "connector worker identity; stable across restarts so a worker resumes its sessions (default: from the data dir or host name) [SAMLA_WORKER_ID]")
	fs.StringVar(&c.LogLevel, "log-level", env("SAMLA_LOG_LEVEL", "info"), "debug, info, warn or error [SAMLA_LOG_LEVEL]")
	fs.StringVar(&c.LogFormat, "log-format", env("SAMLA_LOG_FORMAT", "text"), "text or json [SAMLA_LOG_FORMAT]")
	fs.Float64Var(&c.RateLimit, "rate-limit", float64(envInt("SAMLA_RATE_LIMIT", 50)), "requests per second per client [SAMLA_RATE_LIMIT]")
	fs.IntVar(&c.RateBurst, "rate-burst", envInt("SAMLA_RATE_BURST", 100), "burst of requests per client [SAMLA_RATE_BURST]")
	fs.DurationVar(&c.StaleClaimAfter, "stale-claim-after", envDuration("SAMLA_STALE_CLAIM_AFTER", 90*time.Second), "another worker may take over a collection whose worker recorded nothing for this long [SAMLA_STALE_CLAIM_AFTER]")
	fs.DurationVar(&c.MockSignDelay, "mock-sign-delay", envDuration("SAMLA_MOCK_SIGN_DELAY", time.Second), "how long the simulated user of the MOCK login method takes to sign [SAMLA_MOCK_SIGN_DELAY]")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", envDuration("SAMLA_SHUTDOWN_TIMEOUT", 15*time.Second), "graceful shutdown limit [SAMLA_SHUTDOWN_TIMEOUT]")
	fs.IntVar(&c.KafkaPartitions, "kafka-partitions", envInt("SAMLA_KAFKA_PARTITIONS", 8), "partitions of each event topic when created [SAMLA_KAFKA_PARTITIONS]")
	fs.DurationVar(&c.ConnectorSweep, "connector-sweep", envDuration("SAMLA_CONNECTOR_SWEEP", 15*time.Second), "how often a connector looks for non-final collections nobody drives [SAMLA_CONNECTOR_SWEEP]")
	fs.DurationVar(&c.CompanyPoll, "company-poll", envDuration("SAMLA_COMPANY_POLL", time.Second), "wait between a connector's polls of a company login [SAMLA_COMPANY_POLL]")
	fs.IntVar(&c.MaxSessions, "max-sessions", envInt("SAMLA_MAX_SESSIONS", 512), "company sessions one connector drives at once [SAMLA_MAX_SESSIONS]")
	fs.IntVar(&c.SandboxLatencyMS, "sandbox-latency-ms", envInt("SAMLA_SANDBOX_LATENCY_MS", 20), "upper bound of the sandbox companies' simulated latency [SAMLA_SANDBOX_LATENCY_MS]")
	fs.DurationVar(&c.ContactFormTimeout, "contact-form-timeout", envDuration("SAMLA_CONTACT_FORM_TIMEOUT", 2*time.Minute), "CONTACT_FORM_PENDING turns CONTACT_FORM after this long without input [SAMLA_CONTACT_FORM_TIMEOUT]")
	fs.DurationVar(&c.InputTimeout, "input-timeout", envDuration("SAMLA_INPUT_TIMEOUT", 2*time.Minute), "COLLECTION_INPUT_PENDING turns COLLECTION_INPUT_TIMEOUT after this long [SAMLA_INPUT_TIMEOUT]")
	fs.DurationVar(&c.MethodSelectionTimeout, "method-selection-timeout", envDuration("SAMLA_METHOD_SELECTION_TIMEOUT", time.Minute), "a two-factor method not chosen in this time ends TWO_FACTOR_METHOD_SELECTION_TIMEOUT [SAMLA_METHOD_SELECTION_TIMEOUT]")
	fs.DurationVar(&c.EIDOrderTimeout, "eid-order-timeout", envDuration("SAMLA_EID_ORDER_TIMEOUT", 30*time.Second), "an electronic-ID order not signed in this time ends AUTHENTICATION_TIMEOUT [SAMLA_EID_ORDER_TIMEOUT]")
	return c
}

// Brokers splits KafkaBrokers.
func (c *Config) Brokers() []string {
	var out []string
	for _, b := range strings.Split(c.KafkaBrokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}
