// Package service assembles Samla's roles into one process: every role on the embedded default
// for `samla run`, or one role against EventStoreDB, Kafka and ClickHouse.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/clients"
	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/esdb"
	"github.com/samla/samla/command/eventstore/sqlite"
	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/command/relay"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/connectors/catalog"
	"github.com/samla/samla/connectors/company"
	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/config"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/kafka"
	"github.com/samla/samla/platform/metrics"
	"github.com/samla/samla/projections"
	"github.com/samla/samla/projections/apikeys"
	"github.com/samla/samla/projections/collectiondata"
	"github.com/samla/samla/query/httpquery"
)

// Roles selects what a process runs.
type Roles struct {
	Command bool // POST endpoints: append to the event store
	Query   bool // GET endpoints: read models
	Relay   bool // event store → Kafka
	Project bool // Kafka → read models
	Connect bool // Kafka → company sessions → event store
}

// AllRoles is `samla run`.
func AllRoles() Roles {
	return Roles{Command: true, Query: true, Relay: true, Project: true, Connect: true}
}

func (r Roles) http() bool { return r.Command || r.Query }

// ConnectorGroupID is the consumer group of the connector workers.
const ConnectorGroupID = "samla.connector"

// Service is a running process. Shutdown stops it.
type Service struct {
	cfg      *config.Config
	roles    Roles
	log      *slog.Logger
	gatherer prometheus.Gatherer
	metrics  *metrics.Metrics
	registry *eventschema.Registry

	store   eventstore.Store
	broker  *kafka.Embedded
	brokers []string
	models  *projections.ReadModels
	catalog *catalog.Catalog
	sandbox *sandbox.Sandbox
	servers []*http.Server
	addrs   map[string]string

	bootstrapKey       string
	bootstrapGenerated bool

	cancel   context.CancelFunc
	roleWG   sync.WaitGroup
	done     chan struct{}
	failOnce sync.Once
	failErr  error
	closers  []func() error // run in reverse order after the roles stopped
}

// Start opens what the roles need, starts them and returns once the API serves requests.
// ctx bounds only the start; Shutdown stops the service.
func Start(ctx context.Context, cfg *config.Config, roles Roles, logger *slog.Logger) (svc *Service, err error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registry, err := eventschema.NewRegistry()
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, roles: roles, log: logger, gatherer: reg, metrics: metrics.New(reg),
		registry: registry, catalog: catalog.Sandbox(), addrs: map[string]string{}, done: make(chan struct{})}
	defer func() {
		if err != nil {
			s.closeAll()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	if roles.Command || roles.Relay || roles.Connect {
		store, err := openStore(cfg)
		if err != nil {
			return nil, err
		}
		s.closers = append(s.closers, store.Close)
		s.store = eventstore.Instrument(store, s.metrics)
	}
	if roles.Relay || roles.Project || roles.Connect {
		if err := s.openKafka(ctx); err != nil {
			return nil, err
		}
	}
	if roles.http() || roles.Project || roles.Connect {
		models, err := openReadModels(ctx, cfg)
		if err != nil {
			return nil, err
		}
		s.models = models
		s.closers = append(s.closers, models.Close)
	}
	if roles.Connect && cfg.Sandbox {
		// The companies' EID orders expire when Samla's EID deadline does, so that both tell the
		// same story. The simulated user enters a two-factor code after a second, as a person
		// would; that also leaves a poll of the company time to see TWO_FACTOR_PENDING. The
		// companies' own steps and the slow product keep the sandbox's realistic defaults.
		sb, err := sandbox.Start(context.Background(), sandbox.WithAddr(cfg.SandboxAddr),
			sandbox.WithLatency(0, time.Duration(cfg.SandboxLatencyMS)*time.Millisecond),
			sandbox.WithMockSignDelay(cfg.MockSignDelay), sandbox.WithEIDOrderTimeout(cfg.EIDOrderTimeout),
			sandbox.WithUserDelay(sandboxUserDelay), sandbox.WithLogger(logger.With("role", "sandbox")))
		if err != nil {
			return nil, fmt.Errorf("start sandbox: %w", err)
		}
		s.sandbox = sb
		s.closers = append(s.closers, sb.Close)
		s.addrs["sandbox"] = sb.URL()
	}

	roleCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if roles.Relay {
		s.startRelay(roleCtx)
	}
	if roles.Project {
		s.startProjections(roleCtx)
	}
	if roles.Connect {
		if err := s.startConnector(roleCtx); err != nil {
			return nil, err
		}
	}
	// The sandbox client exists for trying the service: with the sandbox, or whenever the operator
	// names its key explicitly (e.g. against a standalone `samla sandbox`).
	if roles.Command && (cfg.Sandbox || cfg.BootstrapAPIKey != "") {
		if err := s.bootstrap(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.startHTTP(); err != nil {
		return nil, err
	}
	return s, nil
}

func openStore(cfg *config.Config) (eventstore.Store, error) {
	switch {
	case cfg.EventStore == "" || cfg.EventStore == "sqlite":
		path := filepath.Join(cfg.DataDir, "eventstore", "events.db")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("create event store dir: %w", err)
		}
		store, err := sqlite.Open(path)
		if err != nil {
			return nil, fmt.Errorf("open SQLite event store: %w", err)
		}
		return store, nil
	case strings.HasPrefix(cfg.EventStore, "esdb://") || strings.HasPrefix(cfg.EventStore, "esdb+discover://") ||
		strings.HasPrefix(cfg.EventStore, "kurrentdb://"):
		store, err := esdb.Open(cfg.EventStore)
		if err != nil {
			return nil, fmt.Errorf("open EventStoreDB: %w", err)
		}
		return store, nil
	}
	return nil, fmt.Errorf("SAMLA_EVENTSTORE %q: want sqlite or an esdb:// connection string", cfg.EventStore)
}

func openReadModels(ctx context.Context, cfg *config.Config) (*projections.ReadModels, error) {
	if cfg.ClickHouseDSN != "" {
		m, err := projections.OpenClickHouseReadModels(ctx, cfg.ClickHouseDSN)
		if err != nil {
			return nil, fmt.Errorf("open ClickHouse read models: %w", err)
		}
		return m, nil
	}
	m, err := projections.OpenSQLiteReadModels(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("open SQLite read models: %w", err)
	}
	return m, nil
}

func (s *Service) openKafka(ctx context.Context) error {
	if brokers := s.cfg.Brokers(); len(brokers) > 0 {
		s.brokers = brokers
		if err := kafka.EnsureTopics(ctx, brokers, eventschema.Topics(), s.cfg.KafkaPartitions); err != nil {
			return fmt.Errorf("create Kafka topics: %w", err)
		}
		if err := kafka.EnsureCheckpointTopic(ctx, brokers); err != nil {
			return fmt.Errorf("create relay checkpoint topic: %w", err)
		}
		return nil
	}
	broker, err := kafka.StartEmbedded(filepath.Join(s.cfg.DataDir, "kafka"), s.log.With("role", "kafka"))
	if err != nil {
		return fmt.Errorf("start embedded Kafka: %w", err)
	}
	s.broker = broker
	s.brokers = broker.Brokers()
	s.closers = append(s.closers, func() error { broker.Close(); return nil })
	s.addrs["kafka"] = strings.Join(s.brokers, ",")
	return nil
}

// runRole runs one long-lived role in the background. A role that fails for any reason but
// shutdown fails the whole service, so that a supervisor restarts it instead of it limping on.
func (s *Service) runRole(ctx context.Context, name string, run func(context.Context) error) {
	s.roleWG.Add(1)
	go func() {
		defer s.roleWG.Done()
		err := run(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		s.log.Error("role failed", "role", name, "err", err)
		s.fail(fmt.Errorf("%s: %w", name, err))
	}()
}

func (s *Service) fail(err error) {
	s.failOnce.Do(func() {
		s.failErr = err
		close(s.done)
	})
}

// Done is closed when a role failed; Err then tells why.
func (s *Service) Done() <-chan struct{} { return s.done }

// Err is the failure that closed Done.
func (s *Service) Err() error { return s.failErr }

func (s *Service) startRelay(ctx context.Context) {
	r := relay.New(relay.Config{
		Store: s.store, Brokers: s.brokers, Logger: s.log,
		Metrics: relay.Metrics{Published: s.metrics.RelayPublished, PublishLag: s.metrics.RelayLag, Checkpoint: s.metrics.RelayCheckpoint},
	})
	s.runRole(ctx, "relay", r.Run)
}

func (s *Service) consume(groupID string, topics []string) projections.ConsumeFunc {
	return func(ctx context.Context, _ string, handle func(context.Context, []eventschema.Envelope) error) error {
		return kafka.Consume(ctx, kafka.ConsumerConfig{Brokers: s.brokers, GroupID: groupID, Topics: topics, MaxWait: consumerGatherWindow},
			s.log, handle) // Consume adds the group to its logger itself
	}
}

func (s *Service) startProjections(ctx context.Context) {
	for _, p := range s.models.Projectors() {
		p := p
		consume := s.consume(projections.GroupID(p.Name()), eventschema.Topics())
		s.runRole(ctx, "projection "+p.Name(), func(ctx context.Context) error {
			return projections.Run(ctx, p, consume, s.metrics)
		})
	}
}

// sandboxUserDelay is how long the sandbox's simulated user takes to act at a company (enter a
// two-factor code).
const sandboxUserDelay = time.Second

func (s *Service) startConnector(ctx context.Context) error {
	workerID, err := s.workerID()
	if err != nil {
		return err
	}
	baseURL := func(string) string { return "" }
	switch {
	case s.sandbox != nil:
		baseURL = s.sandbox.BaseURL
	case s.cfg.CompaniesURL != "":
		// A standalone `samla sandbox` (or anything serving its API) elsewhere.
		root := strings.TrimRight(s.cfg.CompaniesURL, "/")
		baseURL = func(companyID string) string {
			if _, err := s.catalog.Get(companyID); err != nil {
				return "" // never call a host about a company the catalog does not know
			}
			return root + "/sandbox/companies/" + companyID // catalog ids are URL-safe slugs
		}
	}
	companies, err := company.New(company.Config{BaseURL: baseURL, Metrics: s.metrics, Logger: s.log})
	if err != nil {
		return fmt.Errorf("company adapter: %w", err)
	}
	status := s.models.Status
	w := worker.New(worker.Config{
		WorkerID: workerID, Repo: repository.New(s.store, s.registry, nil), Catalog: s.catalog,
		Companies: companies, Metrics: s.metrics, Logger: s.log, StaleClaimAfter: s.cfg.StaleClaimAfter,
		MaxSessions: s.cfg.MaxSessions, SweepInterval: s.cfg.ConnectorSweep, PollInterval: s.cfg.CompanyPoll,
		// The user's deadlines; they are recorded with the statuses that wait, so a restarted
		// or another worker enforces them.
		ContactFormTimeout: s.cfg.ContactFormTimeout, InputTimeout: s.cfg.InputTimeout,
		MethodSelectionTimeout: s.cfg.MethodSelectionTimeout, EIDOrderTimeout: s.cfg.EIDOrderTimeout,
		Active: worker.ActiveCollectionsFunc(func(ctx context.Context, limit int) ([]string, error) {
			rows, err := status.ListNonFinal(ctx, limit)
			if err != nil {
				return nil, err
			}
			ids := make([]string, len(rows))
			for i, r := range rows {
				ids[i] = r.CollectionID
			}
			return ids, nil
		}),
	})
	consume := s.consume(ConnectorGroupID, []string{eventschema.Topic("collection")})
	s.runRole(ctx, "connector consumer", func(ctx context.Context) error {
		return consume(ctx, ConnectorGroupID, w.HandleBatch)
	})
	s.runRole(ctx, "connector", w.Run)
	return nil
}

// workerID is stable across restarts so that a restarted worker resumes its own sessions at
// once instead of waiting for its old claims to go stale.
func (s *Service) workerID() (string, error) {
	if s.cfg.WorkerID != "" {
		return s.cfg.WorkerID, nil
	}
	path := filepath.Join(s.cfg.DataDir, "worker-id")
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	}
	host, _ := os.Hostname()
	key, err := clients.GenerateAPIKey("w") // 256 random bits; only a slice is needed
	if err != nil {
		return "", err
	}
	id := "worker-" + host + "-" + key[len(key)-8:]
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return id, nil
}

// bootstrap creates the sandbox client and, when the projections run in this process, waits
// until its key authenticates, so that the printed curl works at once.
func (s *Service) bootstrap(ctx context.Context) error {
	svc := clients.New(repository.New(s.store, s.registry, nil), nil)
	key, generated, err := svc.EnsureSandbox(ctx, s.cfg.DataDir, s.cfg.BootstrapAPIKey)
	if err != nil {
		return err
	}
	s.bootstrapKey, s.bootstrapGenerated = key, generated
	if !s.roles.Project || !s.roles.Relay {
		return nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	hash := client.HashAPIKey(key)
	for {
		if _, err := s.models.APIKeys.Lookup(waitCtx, hash); err == nil {
			return nil
		}
		select {
		case <-waitCtx.Done():
			return fmt.Errorf("the sandbox client's key did not reach the read model: %w", waitCtx.Err())
		case <-s.done:
			return s.failErr
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (s *Service) startHTTP() error {
	if s.roles.http() {
		engine := httpapi.NewEngine(httpapi.Options{
			Keys:          s.models.APIKeys,
			IsKeyNotFound: func(err error) bool { return errors.Is(err, apikeys.ErrNotFound) },
			Logger:        s.log, Metrics: s.metrics,
			RateLimit: httpapi.RateLimit{PerSecond: s.cfg.RateLimit, Burst: s.cfg.RateBurst},
		})
		s.registerRoutes(engine)
		var handler http.Handler = engine
		if s.sandbox != nil {
			// The sandbox's simulated user ("scan and sign", the outbox) answers beside the API,
			// outside its API-key authentication, as the end user's phone would.
			mux := http.NewServeMux()
			mux.Handle("/sandbox/", s.sandbox.Handler())
			mux.Handle("/", engine)
			handler = mux
		}
		if err := s.serve("http", s.cfg.HTTPAddr, handler); err != nil {
			return err
		}
	}
	if s.cfg.OpsAddr != "" {
		if err := s.serve("ops", s.cfg.OpsAddr, httpapi.NewOpsHandler(s.gatherer, s.ready)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) registerRoutes(engine *gin.Engine) {
	if s.roles.Command {
		collections := app.NewCollectionService(s.catalog, repository.New(s.store, s.registry, nil), nil)
		httpcmd.RegisterRoutes(engine, httpcmd.Deps{Collections: collections})
	}
	if s.roles.Query {
		httpquery.RegisterRoutes(engine, httpquery.Deps{
			Status: statusReader{s.models.Status}, History: historyReader{s.models.History}, Companies: s.catalog,
			Data: collectiondata.NewQueryReader(s.models.Data),
		})
	}
}

func (s *Service) serve(name, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s on %s: %w", name, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
	s.servers = append(s.servers, srv)
	s.addrs[name] = ln.Addr().String()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("server failed", "listener", name, "err", err)
			s.fail(fmt.Errorf("%s listener: %w", name, err))
		}
	}()
	s.log.Info("listening", "listener", name, "addr", ln.Addr().String())
	return nil
}

// ready reports whether the process can serve: its read models answer and no role failed.
func (s *Service) ready(ctx context.Context) error {
	select {
	case <-s.done:
		return s.failErr
	default:
	}
	if s.models != nil {
		if _, err := s.models.APIKeys.Lookup(ctx, "readiness-probe"); err != nil && !errors.Is(err, apikeys.ErrNotFound) {
			return fmt.Errorf("read models: %w", err)
		}
	}
	return nil
}

// HTTPAddr is the REST API's bound address.
func (s *Service) HTTPAddr() string { return s.addrs["http"] }

// OpsAddr is the ops listener's bound address.
func (s *Service) OpsAddr() string { return s.addrs["ops"] }

// BootstrapAPIKey is the sandbox client's key, when this process created or found it.
func (s *Service) BootstrapAPIKey() string { return s.bootstrapKey }

// BootstrapKeyGenerated tells whether the key was generated by this start.
func (s *Service) BootstrapKeyGenerated() bool { return s.bootstrapGenerated }

// BootstrapKeyPath is where a generated key is kept.
func (s *Service) BootstrapKeyPath() string {
	return filepath.Join(s.cfg.DataDir, clients.BootstrapKeyFile)
}

// Shutdown stops accepting requests, drains them, stops the roles (sessions stop without a
// final status, to be resumed on the next start) and closes the stores.
func (s *Service) Shutdown(ctx context.Context) error {
	var errs []error
	for _, srv := range s.servers {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if s.cancel != nil {
		s.cancel()
	}
	stopped := make(chan struct{})
	go func() { s.roleWG.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("roles did not stop in time: %w", ctx.Err()))
	}
	errs = append(errs, s.closeAll())
	return errors.Join(errs...)
}

func (s *Service) closeAll() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	s.closers = nil
	return errors.Join(errs...)
}

// RebuildProjections empties the read models and replays the event store into them. The
// projections must not run meanwhile.
func RebuildProjections(ctx context.Context, cfg *config.Config, logger *slog.Logger) (int, error) {
	store, err := openStore(cfg)
	if err != nil {
		return 0, err
	}
	defer store.Close()
	models, err := openReadModels(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer models.Close()
	n, err := projections.Rebuild(ctx, store, models)
	if err != nil {
		return n, fmt.Errorf("rebuild: %w", err)
	}
	logger.Info("read models rebuilt", "events", n)
	return n, nil
}

// CreateClient registers a client and returns its first API key.
func CreateClient(ctx context.Context, cfg *config.Config, logger *slog.Logger, id, name string) (string, error) {
	store, err := openStore(cfg)
	if err != nil {
		return "", err
	}
	defer store.Close()
	registry, err := eventschema.NewRegistry()
	if err != nil {
		return "", err
	}
	key, err := clients.New(repository.New(store, registry, nil), nil).Create(ctx, id, name, false)
	if err != nil {
		return "", err
	}
	logger.Info("client created", "client", id)
	return key, nil
}

// consumerGatherWindow is how long a consumer waits for more messages after the first of a
// batch. Under load batches fill up anyway; when idle the window is pure latency between an
// append and its read model, so it is kept short.
const consumerGatherWindow = 2 * time.Millisecond
