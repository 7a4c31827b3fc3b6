// Samla's composition root: Service assembles the roles into one process, every role on the
// embedded default for `samla run`, or one role against EventStoreDB, Kafka and ClickHouse. The
// assemble_*.go files hold one part each: store, bus, connector, http, bootstrap.

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/clients"
	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/connectors/sandbox"
	domaincompany "github.com/samla/samla/domain/company"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/kafka"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/platform/metrics"
	"github.com/samla/samla/projections"
	"github.com/samla/samla/projections/collectionstatus"
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
	cfg      *Config
	roles    Roles
	log      *slog.Logger
	gatherer prometheus.Gatherer
	metrics  *metrics.Metrics
	registry *eventschema.Registry

	store   eventstore.Store
	keys    eventschema.Keys // seals and opens personal data; nil in a process that needs none
	broker  *kafka.Embedded
	cluster kafka.Conn // the brokers, with the credentials every Kafka client of the process uses
	models  *projections.ReadModels
	// statusFollower keeps the status view current in a query process that does not write the
	// status read model itself (useStatusView); nil otherwise.
	statusFollower *collectionstatus.Follower
	statusView     *collectionstatus.View
	catalog        *domaincompany.Catalog
	sandbox        *sandbox.Sandbox
	servers        []*http.Server
	budgets        connBudgets // of the listeners' connections
	addrs          map[string]string

	// userService is the command role's users (commandUsers), built once.
	userService *app.UserService

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
func Start(ctx context.Context, cfg *Config, roles Roles, logger *slog.Logger) (svc *Service, err error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registry, err := eventschema.NewRegistry()
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, roles: roles, log: logger, gatherer: reg, metrics: metrics.New(reg),
		registry: registry, catalog: sandbox.Catalog(), addrs: map[string]string{}, done: make(chan struct{})}
	defer func() {
		if err != nil {
			s.closeAll()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	var public int
	s.budgets, public = newConnBudgets(cfg.MaxConnections)
	if cfg.MaxConnections > 0 && public < cfg.MaxConnections {
		logger.Warn("the public listeners hold fewer connections than --max-connections: the file descriptor limit leaves no more",
			"max_connections", cfg.MaxConnections, "held", public)
	}
	s.budgets.report(s.metrics)
	// Held until the stores are closed (the first closer runs last), so that no rebuild empties
	// the read models under the roles.
	releaseDataDir, err := lockDataDir(cfg, useBeside)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, releaseDataDir)
	// Every role but the relay appends, loads, projects or reads personal data; the relay
	// only moves sealed events.
	var opened *keyStore
	if roles.Command || roles.Query || roles.Project || roles.Connect {
		keys, err := openKeys(cfg)
		if err != nil {
			return nil, err
		}
		s.keys, opened = keys, keys
		s.closers = append(s.closers, keys.close)
	}
	// The query role reads it only for a collection its read model does not show yet
	// (read-your-writes: statusReader).
	if roles.Command || roles.Relay || roles.Connect || roles.Query {
		store, err := openStore(cfg)
		if err != nil {
			return nil, err
		}
		s.closers = append(s.closers, store.Close)
		if opened != nil {
			if err := checkKeysNotLost(ctx, opened, store); err != nil {
				return nil, err
			}
		}
		s.store = eventstore.Instrument(store, s.metrics)
	}
	// The command role consumes the users' events to finish erasures (startErasure).
	if roles.Command || roles.Relay || roles.Project || roles.Connect || followsStatus(cfg, roles) {
		if err := s.openKafka(ctx); err != nil {
			return nil, err
		}
	}
	if roles.http() || roles.Project || roles.Connect {
		models, err := openReadModels(ctx, cfg, s.keys)
		if err != nil {
			return nil, err
		}
		// The projections of this process record what they fold (consents by status).
		models.Metrics = s.metrics
		s.models = models
		s.closers = append(s.closers, models.Close)
		s.useStatusView()
	}
	if roles.Connect && cfg.Sandbox {
		// The companies' EID orders expire when Samla's EID deadline does, so that both tell the
		// same story. The simulated user enters a two-factor code after a second, as a person
		// would; that also leaves a poll of the company time to see TWO_FACTOR_PENDING. The
		// companies' own steps and the slow product keep the sandbox's realistic defaults.
		sb, err := sandbox.Start(context.Background(), sandbox.WithAddr(cfg.SandboxAddr),
			sandbox.WithLatency(0, time.Duration(cfg.SandboxLatencyMS)*time.Millisecond),
			sandbox.WithMockSignDelay(cfg.MockSignDelay), sandbox.WithEIDOrderTimeout(cfg.EIDOrderTimeout),
			sandbox.WithUserDelay(sandboxUserDelay), sandbox.WithLogger(logger.With("role", "sandbox")),
			sandbox.WithListener(s.budgets.sandbox.wrap))
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
	s.startStatusView(roleCtx)
	s.runRole(roleCtx, "memory", every(idleHeapCheck, (&memoryReturner{log: s.log}).check))
	stopGCFloor := startGCFloor()
	s.closers = append(s.closers, func() error { stopGCFloor(); return nil })
	if ks, ok := s.keys.(*keyStore); ok {
		// Keys past their TTL would be read from the store again anyway; an idle process
		// would otherwise keep a burst's keys until new subjects push them out.
		s.runRole(roleCtx, "key cache sweep", every(keystore.DefaultCacheTTL, ks.Sweep))
	}
	if roles.Connect {
		if err := s.startConnector(roleCtx); err != nil {
			return nil, err
		}
	}
	if roles.Command {
		if err := s.startErasure(roleCtx); err != nil {
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
		s.log.Error("role failed", "role", name, "error", err)
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
