package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/platform/config"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/kafka"
	"github.com/samla/samla/platform/mtlsca"
	"github.com/samla/samla/platform/sessiontoken"
	"github.com/samla/samla/projections/collectionstatus"
)

// Config is every role's configuration. Each setting is a flag whose default comes from a
// SAMLA_* environment variable; the defaults of the connector's settings are the worker's own.
type Config struct {
	DataDir         string
	HTTPAddr        string
	OpsAddr         string
	Profiling       bool
	StatusViewRows  int
	StatusViewIdle  time.Duration
	BootstrapAPIKey string
	EventStore      string // "sqlite" or an esdb:// connection string
	KafkaBrokers    string // empty: the embedded broker
	ClickHouseDSN   string // empty: SQLite read models
	Sandbox         bool
	SandboxAddr     string
	CompaniesURL    string
	WorkerID        string
	LogLevel        string
	LogFormat       string
	RateLimit       float64 // every client's default; a client's own (samla clients set) replaces it
	RateBurst       int
	// SessionRateLimit and SessionRateBurst are each session user's bucket, besides its client's.
	SessionRateLimit float64
	SessionRateBurst int
	StaleClaimAfter  time.Duration
	MockSignDelay    time.Duration
	ShutdownTimeout  time.Duration
	KafkaPartitions  int
	ConnectorSweep   time.Duration
	CompanyPoll      time.Duration
	MaxSessions      int
	// MinSessions is the least the connector's slots go to while the CPU is saturated; 0 is
	// worker.DefaultMinSessions with the embedded sandbox, fixed slots with companies elsewhere.
	MinSessions      int
	SandboxLatencyMS int
	// MaxSessionsPerClient caps the connector slots one client takes at once; 0: no cap (the
	// clients still take turns).
	MaxSessionsPerClient int
	InputPoll            time.Duration
	// Deadlines of SANDBOX.md: how long a collection waits for the user.
	ContactFormTimeout     time.Duration
	InputTimeout           time.Duration
	MethodSelectionTimeout time.Duration
	EIDOrderTimeout        time.Duration
	// ConsentValidity is how long an authorized PSD2 consent lasts (its expiresAt).
	ConsentValidity time.Duration
	// Cancellations: how long the holder has to sign, how often pending signatures are read at
	// the provider, where the signing provider is (empty: the sandbox's, embedded or at
	// CompaniesURL) and Samla's own public base URL for the provider's callbacks (empty: the
	// API listener's address).
	SigningTimeout     time.Duration
	SigningPoll        time.Duration
	SigningProviderURL string
	PublicURL          string

	// ReadHeaderTimeout is how long a client may take to send a request's header, and
	// MaxConnections how many connections the public listeners (API and mutual TLS) hold at
	// once together (0: as many as the file descriptor limit leaves): slow or many clients
	// cannot hold the server's connections.
	ReadHeaderTimeout time.Duration
	MaxConnections    int

	// AuthFailureLimit is how many failed authentications one source address may make per
	// minute before it is refused (429); 0: no limit (a reverse proxy limits them).
	AuthFailureLimit int

	// FingerprintKeyFile holds the secret of the idempotency fingerprints; empty: one generated
	// into the data dir.
	FingerprintKeyFile string

	// Users' session tokens (sessions.go): their lifetime, the PEM file of their signing keys
	// (empty: generated into the data dir) and their issuer (the iss claim).
	SessionTTL time.Duration
	JWTKeyFile string
	JWTIssuer  string

	// Mutual TLS (assemble_mtls.go): the listener (empty: off; off too while no CA exists), this
	// deployment's environment (test or production: the certificates it takes), the listener's
	// own certificate (empty: issued by the CA into the data dir) and the operator's CA files
	// (empty: <data dir>/ca/ca.crt and ca.key).
	MTLSAddr     string
	Environment  string
	MTLSCertFile string
	MTLSKeyFile  string
	CACertFile   string
	CAKeyFile    string

	// KafkaSASLMechanism, KafkaSASLUsername and KafkaSASLPasswordFile authenticate to the
	// KafkaBrokers cluster; all empty: no authentication. The embedded broker has its own.
	KafkaSASLMechanism    string
	KafkaSASLUsername     string
	KafkaSASLPasswordFile string

	// envErr lists the SAMLA_* variables that did not parse; validate reports them.
	envErr error
}

// bindConfig registers the flags on fs with environment defaults and returns the config they
// fill. Call validate once the flags are parsed.
func bindConfig(fs *pflag.FlagSet) *Config {
	return bindConfigFrom(fs, config.NewEnv())
}

func bindConfigFrom(fs *pflag.FlagSet, env *config.Env) *Config {
	c := &Config{}
	fs.StringVar(&c.DataDir, "data-dir", env.String("SAMLA_DATA_DIR", "./data"), "embedded event store, Kafka log and read models [SAMLA_DATA_DIR]")
	fs.StringVar(&c.HTTPAddr, "http-addr", env.String("SAMLA_HTTP_ADDR", "127.0.0.1:8080"), "REST API listener [SAMLA_HTTP_ADDR]")
	fs.StringVar(&c.OpsAddr, "ops-addr", env.String("SAMLA_OPS_ADDR", "127.0.0.1:9090"), "/metrics, /livez, /readyz listener [SAMLA_OPS_ADDR]")
	fs.IntVar(&c.StatusViewRows, "status-view-rows", env.Int("SAMLA_STATUS_VIEW_ROWS", collectionstatus.DefaultViewCapacity), "rows the in-memory status view keeps for the status poll (embedded: query and projection in one process); 0: none, every poll reads the read model [SAMLA_STATUS_VIEW_ROWS]")
	fs.DurationVar(&c.StatusViewIdle, "status-view-idle", env.Duration("SAMLA_STATUS_VIEW_IDLE", time.Minute), "a status-view row nobody polled for this long is dropped (read again from the read model if polled) [SAMLA_STATUS_VIEW_IDLE]")
	fs.BoolVar(&c.Profiling, "pprof", env.Bool("SAMLA_PPROF", false), "serve Go's profiles under /debug/pprof/ on the ops listener [SAMLA_PPROF]")
	fs.StringVar(&c.BootstrapAPIKey, "bootstrap-api-key", env.String("SAMLA_BOOTSTRAP_API_KEY", ""), "API key of the sandbox client created on first start; generated when empty [SAMLA_BOOTSTRAP_API_KEY]")
	fs.StringVar(&c.FingerprintKeyFile, "fingerprint-key-file", env.String("SAMLA_FINGERPRINT_KEY_FILE", ""), "file whose content (at least 32 bytes) keys the requests' idempotency fingerprints; a distributed deployment gives every command replica the same file. Empty: a key generated into <data dir>/fingerprint-key on the first start and reused [SAMLA_FINGERPRINT_KEY_FILE]")
	fs.DurationVar(&c.SessionTTL, "session-ttl", env.Duration("SAMLA_SESSION_TTL", sessiontoken.DefaultTTL), "lifetime of a user's session token, at most 24h [SAMLA_SESSION_TTL]")
	fs.StringVar(&c.JWTKeyFile, "jwt-key-file", env.String("SAMLA_JWT_KEY_FILE", ""), "PEM file of the Ed25519 keys that sign and verify users' session tokens, the signing key first (samla sessions rotate-key manages it); every API replica reads the same file. Empty: keys generated into <data dir>/"+SessionKeyFile+" on the first start [SAMLA_JWT_KEY_FILE]")
	fs.StringVar(&c.JWTIssuer, "jwt-issuer", env.String("SAMLA_JWT_ISSUER", DefaultJWTIssuer), "issuer (iss) of users' session tokens; tokens of another issuer are refused [SAMLA_JWT_ISSUER]")
	fs.StringVar(&c.EventStore, "eventstore", env.String("SAMLA_EVENTSTORE", "sqlite"), "sqlite, or an esdb:// connection string [SAMLA_EVENTSTORE]")
	fs.StringVar(&c.KafkaBrokers, "kafka-brokers", env.String("SAMLA_KAFKA_BROKERS", ""), "comma-separated brokers; empty runs the embedded broker [SAMLA_KAFKA_BROKERS]")
	fs.StringVar(&c.KafkaSASLMechanism, "kafka-sasl-mechanism", env.String("SAMLA_KAFKA_SASL_MECHANISM", ""), "SASL mechanism for --kafka-brokers: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: no authentication (the embedded broker always uses its own credential) [SAMLA_KAFKA_SASL_MECHANISM]")
	fs.StringVar(&c.KafkaSASLUsername, "kafka-sasl-username", env.String("SAMLA_KAFKA_SASL_USERNAME", ""), "SASL user for --kafka-brokers [SAMLA_KAFKA_SASL_USERNAME]")
	fs.StringVar(&c.KafkaSASLPasswordFile, "kafka-sasl-password-file", env.String("SAMLA_KAFKA_SASL_PASSWORD_FILE", ""), "file holding the SASL password for --kafka-brokers (one trailing newline is ignored) [SAMLA_KAFKA_SASL_PASSWORD_FILE]")
	fs.StringVar(&c.ClickHouseDSN, "clickhouse-dsn", env.String("SAMLA_CLICKHOUSE_DSN", ""), "clickhouse://host:9000/db for ClickHouse read models; empty uses SQLite [SAMLA_CLICKHOUSE_DSN]")
	fs.BoolVar(&c.Sandbox, "sandbox", env.Bool("SAMLA_SANDBOX", true), "start the sandbox demo companies [SAMLA_SANDBOX]")
	fs.StringVar(&c.SandboxAddr, "sandbox-addr", env.String("SAMLA_SANDBOX_ADDR", "127.0.0.1:0"), "sandbox companies listener [SAMLA_SANDBOX_ADDR]")
	fs.StringVar(&c.CompaniesURL, "companies-url", env.String("SAMLA_COMPANIES_URL", ""), "root URL of the company APIs a connector calls when it runs no sandbox of its own, e.g. a standalone `samla sandbox` [SAMLA_COMPANIES_URL]")
	fs.StringVar(&c.WorkerID, "worker-id", env.String("SAMLA_WORKER_ID", ""), "connector worker identity; stable across restarts so a worker resumes its sessions (default: from the data dir or host name) [SAMLA_WORKER_ID]")
	fs.StringVar(&c.LogLevel, "log-level", env.String("SAMLA_LOG_LEVEL", "info"), "debug, info, warn or error [SAMLA_LOG_LEVEL]")
	fs.StringVar(&c.LogFormat, "log-format", env.String("SAMLA_LOG_FORMAT", "text"), "text or json [SAMLA_LOG_FORMAT]")
	fs.Float64Var(&c.RateLimit, "rate-limit", env.Float("SAMLA_RATE_LIMIT", httpapi.DefaultRatePerSecond), "default requests per second per client; a client's own (samla clients set --rate-limit) replaces it [SAMLA_RATE_LIMIT]")
	fs.IntVar(&c.RateBurst, "rate-burst", env.Int("SAMLA_RATE_BURST", httpapi.DefaultRateBurst), "default burst of requests per client; a client's own (samla clients set --burst) replaces it [SAMLA_RATE_BURST]")
	fs.Float64Var(&c.SessionRateLimit, "session-rate-limit", env.Float("SAMLA_SESSION_RATE_LIMIT", httpapi.DefaultSessionRatePerSecond), "requests per second per session user, taken besides its client's [SAMLA_SESSION_RATE_LIMIT]")
	fs.IntVar(&c.SessionRateBurst, "session-rate-burst", env.Int("SAMLA_SESSION_RATE_BURST", httpapi.DefaultSessionRateBurst), "burst of requests per session user [SAMLA_SESSION_RATE_BURST]")
	fs.IntVar(&c.AuthFailureLimit, "auth-failure-limit", env.Int("SAMLA_AUTH_FAILURE_LIMIT", httpapi.DefaultAuthFailureMax), "failed authentications (bad API keys or session tokens) one source address may make per minute; more are refused with 429 before any lookup. The connection's address counts, never X-Forwarded-For: behind a reverse proxy set 0 (off) and limit them at the proxy [SAMLA_AUTH_FAILURE_LIMIT]")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", env.Duration("SAMLA_READ_HEADER_TIMEOUT", 10*time.Second), "how long a client may take to send a request's header before its connection is closed [SAMLA_READ_HEADER_TIMEOUT]")
	fs.IntVar(&c.MaxConnections, "max-connections", env.Int("SAMLA_MAX_CONNECTIONS", 10000), "connections the API and mutual-TLS listeners hold at once together, cut to what the file descriptor limit leaves; more wait to be accepted; 0: what that limit leaves [SAMLA_MAX_CONNECTIONS]")
	fs.DurationVar(&c.StaleClaimAfter, "stale-claim-after", env.Duration("SAMLA_STALE_CLAIM_AFTER", worker.DefaultStaleClaimAfter), "another worker may take over a collection whose worker recorded nothing for this long [SAMLA_STALE_CLAIM_AFTER]")
	fs.DurationVar(&c.MockSignDelay, "mock-sign-delay", env.Duration("SAMLA_MOCK_SIGN_DELAY", time.Second), "how long the simulated user of the MOCK login method takes to sign [SAMLA_MOCK_SIGN_DELAY]")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", env.Duration("SAMLA_SHUTDOWN_TIMEOUT", 15*time.Second), "graceful shutdown limit [SAMLA_SHUTDOWN_TIMEOUT]")
	fs.IntVar(&c.KafkaPartitions, "kafka-partitions", env.Int("SAMLA_KAFKA_PARTITIONS", 8), "partitions of each event topic when created on a Kafka cluster (the embedded broker has its own) [SAMLA_KAFKA_PARTITIONS]")
	fs.DurationVar(&c.ConnectorSweep, "connector-sweep", env.Duration("SAMLA_CONNECTOR_SWEEP", worker.DefaultSweepInterval), "how often a connector looks for non-final collections nobody drives [SAMLA_CONNECTOR_SWEEP]")
	fs.DurationVar(&c.CompanyPoll, "company-poll", env.Duration("SAMLA_COMPANY_POLL", worker.DefaultPollInterval), "wait between a connector's polls of a company login [SAMLA_COMPANY_POLL]")
	fs.IntVar(&c.MaxSessions, "max-sessions", env.Int("SAMLA_MAX_SESSIONS", worker.DefaultMaxSessions), "company sessions one connector drives at once [SAMLA_MAX_SESSIONS]")
	fs.IntVar(&c.MinSessions, "min-sessions", env.Int("SAMLA_MIN_SESSIONS", 0), "the least a connector's collection sessions at once go to while the CPU is saturated: between it and --max-sessions the slots follow how long runnable goroutines wait for a CPU; 0: 32 with the embedded sandbox, fixed at --max-sessions with companies elsewhere; at or above --max-sessions: fixed [SAMLA_MIN_SESSIONS]")
	fs.DurationVar(&c.InputPoll, "input-poll", env.Duration("SAMLA_INPUT_POLL", worker.DefaultInputPollInterval), "wait between a connector's looks at a login that waits for the client's input (contact form, collection input); the input's event wakes the session at once, this look catches what came without one [SAMLA_INPUT_POLL]")
	fs.IntVar(&c.MaxSessionsPerClient, "max-sessions-per-client", env.Int("SAMLA_MAX_SESSIONS_PER_CLIENT", 0), "slots of --max-sessions one client's sessions may take at once, even while others are free; 0: no cap, the clients only take turns [SAMLA_MAX_SESSIONS_PER_CLIENT]")
	fs.IntVar(&c.SandboxLatencyMS, "sandbox-latency-ms", env.Int("SAMLA_SANDBOX_LATENCY_MS", 20), "upper bound of the sandbox companies' simulated latency [SAMLA_SANDBOX_LATENCY_MS]")
	fs.DurationVar(&c.ContactFormTimeout, "contact-form-timeout", env.Duration("SAMLA_CONTACT_FORM_TIMEOUT", worker.DefaultContactFormTimeout), "CONTACT_FORM_PENDING turns CONTACT_FORM after this long without input [SAMLA_CONTACT_FORM_TIMEOUT]")
	fs.DurationVar(&c.InputTimeout, "input-timeout", env.Duration("SAMLA_INPUT_TIMEOUT", worker.DefaultInputTimeout), "COLLECTION_INPUT_PENDING turns COLLECTION_INPUT_TIMEOUT after this long [SAMLA_INPUT_TIMEOUT]")
	fs.DurationVar(&c.MethodSelectionTimeout, "method-selection-timeout", env.Duration("SAMLA_METHOD_SELECTION_TIMEOUT", worker.DefaultMethodSelectionTimeout), "a two-factor method not chosen in this time ends TWO_FACTOR_METHOD_SELECTION_TIMEOUT [SAMLA_METHOD_SELECTION_TIMEOUT]")
	fs.DurationVar(&c.EIDOrderTimeout, "eid-order-timeout", env.Duration("SAMLA_EID_ORDER_TIMEOUT", worker.DefaultEIDOrderTimeout), "an electronic-ID order not signed in this time ends AUTHENTICATION_TIMEOUT [SAMLA_EID_ORDER_TIMEOUT]")
	fs.DurationVar(&c.ConsentValidity, "consent-validity", env.Duration("SAMLA_CONSENT_VALIDITY", worker.DefaultConsentValidity), "an authorized consent expires this long after its authorization (default 180 days) [SAMLA_CONSENT_VALIDITY]")
	fs.DurationVar(&c.SigningTimeout, "signing-timeout", env.Duration("SAMLA_SIGNING_TIMEOUT", worker.DefaultSigningTimeout), "a cancellation not signed in this time ends TIMED_OUT (default 30 days) [SAMLA_SIGNING_TIMEOUT]")
	fs.DurationVar(&c.SigningPoll, "signing-poll", env.Duration("SAMLA_SIGNING_POLL", worker.DefaultSigningPollInterval), "how often pending signatures are read at the signing provider, the most a lost callback delays one [SAMLA_SIGNING_POLL]")
	fs.StringVar(&c.SigningProviderURL, "signing-provider-url", env.String("SAMLA_SIGNING_PROVIDER_URL", ""), "base URL of the signing provider's API (empty: the sandbox's) [SAMLA_SIGNING_PROVIDER_URL]")
	fs.StringVar(&c.PublicURL, "public-url", env.String("SAMLA_PUBLIC_URL", ""), "Samla's public base URL, for the signing provider's callbacks (empty: http:// and the API listener's address) [SAMLA_PUBLIC_URL]")
	fs.StringVar(&c.MTLSAddr, "mtls-addr", env.String("SAMLA_MTLS_ADDR", "127.0.0.1:8443"), "mutual-TLS listener of the API; off when empty or while no CA exists (samla ca init) [SAMLA_MTLS_ADDR]")
	fs.StringVar(&c.Environment, "environment", env.String("SAMLA_ENVIRONMENT", "test"), "test or production: the mutual-TLS listener takes only client certificates signed for it [SAMLA_ENVIRONMENT]")
	fs.StringVar(&c.MTLSCertFile, "mtls-cert-file", env.String("SAMLA_MTLS_CERT_FILE", ""), "PEM certificate (chain) of the mutual-TLS listener; empty: one the CA issues for localhost and 127.0.0.1 into <data dir>/mtls [SAMLA_MTLS_CERT_FILE]")
	fs.StringVar(&c.MTLSKeyFile, "mtls-key-file", env.String("SAMLA_MTLS_KEY_FILE", ""), "PEM private key of --mtls-cert-file [SAMLA_MTLS_KEY_FILE]")
	fs.StringVar(&c.CACertFile, "ca-cert-file", env.String("SAMLA_CA_CERT_FILE", ""), "the operator's CA certificate, which client certificates must chain to (default <data dir>/ca/ca.crt) [SAMLA_CA_CERT_FILE]")
	fs.StringVar(&c.CAKeyFile, "ca-key-file", env.String("SAMLA_CA_KEY_FILE", ""), "the CA's private key, for samla ca sign and for issuing the listener's certificate (default <data dir>/ca/ca.key) [SAMLA_CA_KEY_FILE]")
	c.envErr = env.Err()
	return c
}

// validate refuses a configuration that would run with settings nobody chose: SAMLA_* values
// that did not parse, and values out of range.
func (c *Config) validate() error {
	var errs []error
	if c.envErr != nil {
		errs = append(errs, c.envErr)
	}
	positive := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be positive, not %s", name, d))
		}
	}
	positive("stale-claim-after", c.StaleClaimAfter)
	positive("shutdown-timeout", c.ShutdownTimeout)
	positive("connector-sweep", c.ConnectorSweep)
	positive("input-poll", c.InputPoll)
	positive("company-poll", c.CompanyPoll)
	positive("contact-form-timeout", c.ContactFormTimeout)
	positive("input-timeout", c.InputTimeout)
	positive("method-selection-timeout", c.MethodSelectionTimeout)
	positive("eid-order-timeout", c.EIDOrderTimeout)
	positive("consent-validity", c.ConsentValidity)
	positive("signing-timeout", c.SigningTimeout)
	positive("signing-poll", c.SigningPoll)
	positive("session-ttl", c.SessionTTL)
	positive("read-header-timeout", c.ReadHeaderTimeout)
	if c.StatusViewIdle < time.Second {
		errs = append(errs, fmt.Errorf("--status-view-idle must be at least 1s, not %s", c.StatusViewIdle))
	}
	if c.StatusViewRows < 0 {
		errs = append(errs, fmt.Errorf("--status-view-rows must not be negative, not %d", c.StatusViewRows))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("--max-connections must not be negative, not %d", c.MaxConnections))
	}
	if c.SessionTTL > sessiontoken.MaxTTL {
		// A session token cannot be revoked on its own; a long-lived one is a mistake.
		errs = append(errs, fmt.Errorf("--session-ttl must be at most %s, not %s", sessiontoken.MaxTTL, c.SessionTTL))
	}
	if strings.TrimSpace(c.JWTIssuer) == "" {
		errs = append(errs, errors.New("--jwt-issuer must not be empty"))
	}
	if c.MockSignDelay < 0 {
		errs = append(errs, fmt.Errorf("--mock-sign-delay must not be negative, not %s", c.MockSignDelay))
	}
	if c.RateLimit <= 0 || c.RateBurst < 1 {
		errs = append(errs, fmt.Errorf("--rate-limit must be positive and --rate-burst at least 1, not %g and %d", c.RateLimit, c.RateBurst))
	}
	if c.SessionRateLimit <= 0 || c.SessionRateBurst < 1 {
		errs = append(errs, fmt.Errorf("--session-rate-limit must be positive and --session-rate-burst at least 1, not %g and %d", c.SessionRateLimit, c.SessionRateBurst))
	}
	if c.MaxSessionsPerClient < 0 {
		errs = append(errs, fmt.Errorf("--max-sessions-per-client must not be negative, not %d", c.MaxSessionsPerClient))
	}
	if c.AuthFailureLimit < 0 {
		errs = append(errs, fmt.Errorf("--auth-failure-limit must not be negative, not %d", c.AuthFailureLimit))
	}
	if c.MinSessions < 0 {
		errs = append(errs, fmt.Errorf("--min-sessions must not be negative, not %d", c.MinSessions))
	}
	if c.KafkaPartitions < 1 || c.MaxSessions < 1 || c.SandboxLatencyMS < 0 {
		errs = append(errs, fmt.Errorf("--kafka-partitions and --max-sessions must be at least 1 and --sandbox-latency-ms not negative, not %d, %d and %d",
			c.KafkaPartitions, c.MaxSessions, c.SandboxLatencyMS))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("--data-dir must not be empty"))
	}
	// Listeners are checked here, before anything starts, rather than found bad after the
	// stores and the broker have opened.
	for _, l := range []struct{ flag, addr string }{{"http-addr", c.HTTPAddr}, {"ops-addr", c.OpsAddr}, {"sandbox-addr", c.SandboxAddr},
		{"mtls-addr", c.MTLSAddr}} {
		if l.addr == "" && (l.flag == "ops-addr" || l.flag == "mtls-addr") {
			continue // no ops or mTLS listener
		}
		if _, port, err := net.SplitHostPort(l.addr); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("--%s %q must be host:port", l.flag, l.addr))
		}
	}
	if c.Environment != "test" && c.Environment != "production" {
		errs = append(errs, fmt.Errorf("--environment must be test or production, not %q", c.Environment))
	}
	if (c.MTLSCertFile == "") != (c.MTLSKeyFile == "") {
		errs = append(errs, errors.New("--mtls-cert-file and --mtls-key-file go together"))
	}
	if c.KafkaBrokers != "" && len(c.Brokers()) == 0 {
		// Silently running the embedded broker instead of the cluster someone meant to name
		// would split the deployment in two.
		errs = append(errs, fmt.Errorf("--kafka-brokers %q names no broker; leave it empty for the embedded broker", c.KafkaBrokers))
	}
	errs = append(errs, c.checkKafkaSASL()...)
	if c.CompaniesURL != "" {
		if err := checkCompaniesURL(c.CompaniesURL); err != nil {
			errs = append(errs, err)
		}
	}
	for _, u := range []struct{ flag, url string }{{"signing-provider-url", c.SigningProviderURL}, {"public-url", c.PublicURL}} {
		if u.url == "" {
			continue
		}
		if err := checkBaseURL(u.flag, u.url); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	return nil
}

// checkCompaniesURL refuses a --companies-url the connector could not call: the company paths
// are appended to it, so it must be an absolute http(s) URL with a host and neither a query nor
// a fragment.
func checkCompaniesURL(raw string) error { return checkBaseURL("companies-url", raw) }

// checkBaseURL refuses a base URL that paths cannot be appended to: not http(s), no host, or a
// query or fragment.
func checkBaseURL(flag, raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("--%s %q is not a URL: %w", flag, raw, err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "", u.Hostname() == "":
		return fmt.Errorf("--%s %q must be an http:// or https:// URL with a host", flag, raw)
	case strings.ContainsAny(raw, "?#"):
		return fmt.Errorf("--%s %q must have neither a query nor a fragment", flag, raw)
	}
	return nil
}

// checkKafkaSASL refuses SASL settings that would be ignored or cannot work: they need
// --kafka-brokers, a known mechanism and all three of them.
func (c *Config) checkKafkaSASL() []error {
	if c.KafkaSASLMechanism == "" && c.KafkaSASLUsername == "" && c.KafkaSASLPasswordFile == "" {
		return nil
	}
	var errs []error
	if c.KafkaBrokers == "" {
		errs = append(errs, errors.New("--kafka-sasl-* settings are for --kafka-brokers; the embedded broker generates its own credential"))
	}
	if c.KafkaSASLMechanism == "" {
		errs = append(errs, errors.New("--kafka-sasl-mechanism is required with --kafka-sasl-username or --kafka-sasl-password-file"))
	} else if _, err := kafka.NewMechanism(c.KafkaSASLMechanism, "user", "password"); err != nil {
		// NewMechanism is what KafkaConn builds it with: the one list of known mechanisms.
		errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism must be one samla knows: %w", err))
	}
	if c.KafkaSASLUsername == "" {
		errs = append(errs, errors.New("--kafka-sasl-username is required with --kafka-sasl-mechanism"))
	}
	if c.KafkaSASLPasswordFile == "" {
		errs = append(errs, errors.New("--kafka-sasl-password-file is required with --kafka-sasl-mechanism"))
	}
	return errs
}

// KafkaConn returns the --kafka-brokers cluster with its SASL mechanism (none when no
// --kafka-sasl-mechanism is set), reading the password file.
func (c *Config) KafkaConn() (kafka.Conn, error) {
	conn := kafka.Conn{Brokers: c.Brokers()}
	if c.KafkaSASLMechanism == "" {
		return conn, nil
	}
	b, err := os.ReadFile(c.KafkaSASLPasswordFile)
	if err != nil {
		return kafka.Conn{}, fmt.Errorf("kafka SASL password: %w", err)
	}
	password := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if password == "" {
		return kafka.Conn{}, fmt.Errorf("kafka SASL password file %s is empty", c.KafkaSASLPasswordFile)
	}
	m, err := kafka.NewMechanism(c.KafkaSASLMechanism, c.KafkaSASLUsername, password)
	if err != nil {
		return kafka.Conn{}, fmt.Errorf("kafka SASL: %w", err)
	}
	conn.SASL = m
	return conn, nil
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

// CAFiles is where the operator's CA is kept: the files given, or <data dir>/ca/.
func (c *Config) CAFiles() mtlsca.Files {
	files := mtlsca.DefaultFiles(c.DataDir)
	if c.CACertFile != "" {
		files.Cert = c.CACertFile
	}
	if c.CAKeyFile != "" {
		files.Key = c.CAKeyFile
	}
	return files
}
