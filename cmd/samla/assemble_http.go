// The HTTP listeners: the API (command and query routes) and the ops listener.

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/projections/apikeys"
	"github.com/samla/samla/projections/cancellations"
	"github.com/samla/samla/projections/clientsecurity"
	"github.com/samla/samla/projections/collectiondata"
	"github.com/samla/samla/projections/consents"
	"github.com/samla/samla/projections/eventhistory"
	"github.com/samla/samla/projections/users"
	"github.com/samla/samla/query/httpquery"
)

func (s *Service) startHTTP() error {
	if s.roles.http() {
		sessions, err := s.sessionAuth()
		if err != nil {
			return err
		}
		// The API-key read model authenticates keys, names them (a session token records the
		// key that minted it), and tells the session check whether that key still
		// authenticates: a revoked key's sessions end with it, behind the same cache.
		keys := apikeys.NewReader(s.models.APIKeys)
		engine := httpapi.NewEngine(httpapi.Options{
			Keys:   keys,
			Logger: s.log, Metrics: s.metrics,
			// Each client's own rate limit comes from the client-security read model, behind
			// the limiter's cache of a few seconds; the configured one is the default.
			RateLimit: httpapi.RateLimit{PerSecond: s.cfg.RateLimit, Burst: s.cfg.RateBurst,
				Clients:          clientsecurity.NewReader(s.models.ClientSecurity),
				SessionPerSecond: s.cfg.SessionRateLimit, SessionBurst: s.cfg.SessionRateBurst},
			AuthFailures: httpapi.AuthFailureLimit{Max: s.cfg.AuthFailureLimit, Disabled: s.cfg.AuthFailureLimit == 0},
			Sessions:     sessions.tokens, SessionUsers: sessions.users, SessionKeys: keys,
			JWKS: sessions.tokens.Keys().JWKSJSON(),
			MTLS: s.mtlsOptions(),
		})
		if err := s.registerRoutes(engine, sessions); err != nil {
			return err
		}
		var handler http.Handler = engine
		if s.sandbox != nil {
			// The sandbox's simulated user ("scan and sign", the outbox) answers beside the API,
			// outside its API-key authentication, as the end user's phone would. Not through an
			// http.ServeMux: it cleans paths by redirecting (a 307 in text/html, before
			// authentication); every other path, non-canonical ones included, goes to the
			// engine, which answers with a problem.
			sandbox := s.sandbox.Handler()
			handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.URL.Path, "/sandbox/") && httpapi.CanonicalPath(r.URL.Path) {
					sandbox.ServeHTTP(w, r)
					return
				}
				engine.ServeHTTP(w, r)
			})
		}
		if err := s.listen("http", s.cfg.HTTPAddr, handler, nil, httpapi.ServerMaxHeaderBytes, s.budgets.public); err != nil {
			return err
		}
		// The same engine, without the sandbox's simulated user, on the mutual-TLS listener.
		if err := s.startMTLS(engine); err != nil {
			return err
		}
	}
	if s.cfg.OpsAddr != "" {
		if err := s.listen("ops", s.cfg.OpsAddr, httpapi.NewOpsHandler(s.gatherer, s.ready, s.cfg.Profiling), nil, httpapi.OpsMaxHeaderBytes, s.budgets.ops); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) registerRoutes(engine *gin.Engine, sessions sessionAuth) error {
	// The fingerprint key also names the users' externalId reservations (user.ExternalIDKey):
	// the command role reserves under it and the query role finds users by it, so every replica
	// of either must have the same key.
	key, err := fingerprintKey(s.cfg)
	if err != nil {
		return err
	}
	if s.cfg.FingerprintKeyFile == "" && !embeddedEventStore(s.cfg) {
		// Replicas of the command and query roles against one event store must share the key;
		// one generated per data dir is right only while this is the only replica.
		s.log.Warn("idempotency fingerprints and externalId reservations use a key generated into this data dir; give every command and query replica the same --fingerprint-key-file",
			"key_file", filepath.Join(s.cfg.DataDir, FingerprintKeyFile))
	}
	if s.roles.Command {
		userRepo := repository.New(s.store, s.registry, user.Kind, repository.WithKeys(s.keys))
		// A start's consent is checked against the event store; reuseStoredConsent takes its
		// candidates from the consents read model, newest first, and the event store decides.
		collections := app.NewCollectionService(s.catalog, repository.New(s.store, s.registry, collection.Kind, repository.WithKeys(s.keys)), userRepo, nil).
			WithConsents(repository.New(s.store, s.registry, consent.Kind, repository.WithKeys(s.keys)), consents.NewReader(s.models.Consents, s.keys))
		userService, err := s.commandUsers()
		if err != nil {
			return err
		}
		httpcmd.RegisterRoutes(engine, httpcmd.Deps{Collections: collections, FingerprintKey: key,
			Users:           userService,
			CollectionUsers: s.statusReader(),
			// A DELETE answers once the users read model, which the session check asks, shows
			// the deletion; one that a projection of this very process does not show in time is
			// a fault. The read model alone: the event store says "not live" the moment the user
			// is deleted, but a read model that then applied the user's creation before its
			// deletion would let its tokens work again for a moment after the 204.
			UserDeletions: &httpcmd.DeletionWatch{Users: sessions.model, Local: s.roles.Project},
			Consents:      s.commandConsents(),
			// Cancellations are requested against the event store (the collection, the
			// client's signing configuration, the insurance's earlier cancellations).
			Cancellations: s.commandCancellations(), CallbackVerifier: s.callbackVerifier()})
		// A session is issued for a user the event store knows to be live: a user can have one
		// the moment POST /users answered, before the users read model shows it.
		httpcmd.RegisterSessionRoutes(engine, httpcmd.SessionDeps{Issuer: sessions.tokens, Users: userService})
	}
	if s.roles.Query {
		status := s.statusReader()
		consentModel := consents.NewReader(s.models.Consents, s.keys)
		httpquery.RegisterRoutes(engine, httpquery.Deps{
			Status: status, History: eventhistory.NewReader(s.models.History, s.keys),
			Companies: s.catalog, Data: collectiondata.NewReader(s.models.Data),
			Users: users.NewReader(s.models.Users, s.keys, key), UserCollections: status,
			Consents: consentModel, UserConsents: consentModel,
			Cancellations: cancellations.NewReader(s.models.Cancellations, s.keys),
		})
	}
	return nil
}

// listen serves h on addr, over TLS when tlsConfig is set (the mutual-TLS listener), with the
// bounds every listener shares, header and body timeouts, and the header size and connection
// budget it is given (connbudget.go).
func (s *Service) listen(name, addr string, h http.Handler, tlsConfig *tls.Config, maxHeaderBytes int, budget *connBudget) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s on %s: %w", name, addr, err)
	}
	ln = budget.wrap(ln) // more wait in the backlog, unaccepted
	// On the API listeners maxHeaderBytes is above httpapi.MaxHeaderBytes, so that the engine
	// refuses oversize headers itself with a 431 problem; only above this hard bound does
	// net/http answer its own plain-text 431 before any handler runs.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, ReadTimeout: 60 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: maxHeaderBytes}
	if tlsConfig != nil {
		// HTTP/2 is negotiated here: each open stream holds its headers, a goroutine and a
		// body buffer (~70 KB), and Go's default of 250 a connection let 20 connections take
		// 280 MB. 32 a connection still lets one client poll thousands of collections a
		// second over a single connection.
		srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: mtlsMaxConcurrentStreams}
		// A failed handshake (no certificate, another CA) is the client's mistake, not the
		// server's: net/http's messages go to the debug log.
		srv.TLSConfig = tlsConfig
		srv.ErrorLog = slog.NewLogLogger(s.log.With("listener", name).Handler(), slog.LevelDebug)
	}
	s.servers = append(s.servers, srv)
	s.addrs[name] = ln.Addr().String()
	go func() {
		serve := func() error { return srv.Serve(ln) }
		if tlsConfig != nil {
			serve = func() error { return srv.ServeTLS(ln, "", "") }
		}
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("server failed", "listener", name, "error", err)
			s.fail(fmt.Errorf("%s listener: %w", name, err))
		}
	}()
	s.log.Info("listening", "listener", name, "addr", ln.Addr().String())
	return nil
}

// ready reports whether the process can serve: no role failed, its read models answer and a
// Kafka broker takes connections (the embedded broker's port once closed for good at one failed
// accept, and every probe still answered 200 while nothing was published or projected).
func (s *Service) ready(ctx context.Context) error {
	select {
	case <-s.done:
		return s.failErr
	default:
	}
	if s.models != nil {
		if _, err := apikeys.NewReader(s.models.APIKeys).Lookup(ctx, "readiness-probe"); err != nil && !errors.Is(err, httpapi.ErrKeyNotFound) {
			return fmt.Errorf("read models: %w", err)
		}
	}
	if len(s.cluster.Brokers) > 0 {
		// A TCP connection only: whether the credential works shows in the relay and the
		// consumers.
		if err := anyReachable(ctx, s.cluster.Brokers); err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
	}
	return nil
}

// brokerDialTimeout bounds a readiness probe's connection to one broker.
const brokerDialTimeout = 2 * time.Second

// anyReachable connects to the brokers in turn until one accepts.
func anyReachable(ctx context.Context, brokers []string) error {
	var errs []error
	d := net.Dialer{Timeout: brokerDialTimeout}
	for _, b := range brokers {
		conn, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			return conn.Close()
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("no broker takes connections: %w", errors.Join(errs...))
}
