// The connector role: the sandbox companies, the company adapter and the worker.

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/connectors/company"
	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/consents"
)

// sandboxUserDelay is how long the sandbox's simulated user takes to act at a company (enter a
// two-factor code).
const sandboxUserDelay = time.Second

// embeddedSandboxConns bounds the connections to the sandbox that runs in this process. Its
// companies answer within SAMLA_SANDBOX_LATENCY_MS (20 ms), so a few dozen connections carry
// any rate the process's CPUs can serve; the connector's slots (--max-sessions, 512) are not a
// reason for more. Unbounded, a POST load had ~480 of them open at once: each a client read
// and write loop, a server goroutine and four 4 KiB buffers on the same heap (~2,500
// goroutines, 34 MB of stacks at the peak), and, with 32 kept idle, a churn of new ones. Steps
// beyond the bound wait for a connection inside their request's timeout, as they waited for
// the CPU before; 64 slow reads in flight at once (the partial persona's product takes 3 s)
// hold the others back by up to one such read. The bound also keeps the connector's share of
// the two cores in check under a POST load: with 256, the load run took 730–780 POSTs/s
// where 64 took 1,030–1,130.
const embeddedSandboxConns = 64

// embeddedSandboxIdle is how long a connection to the sandbox in this process stays open
// unused: each holds three goroutines and four 4 KiB buffers (up to 64 of them after a load,
// ~2 MB with their stacks), kept 90 s by the default transport, while a new one to a server in
// the same process costs a loopback handshake.
const embeddedSandboxIdle = 15 * time.Second

// connectorMinSessions is the collection worker's slot floor: the configured one, or with 0
// worker.DefaultMinSessions when the companies run in process (embedded) and fixed slots
// otherwise. A remote company's step is its latency, which fewer slots would not make cheaper
// (connectors/worker/slots.go).
func connectorMinSessions(configured int, embedded bool) int {
	if configured == 0 && embedded {
		return worker.DefaultMinSessions
	}
	return configured
}

// embeddedSandboxClient is the company adapter's HTTP client for the sandbox in this process:
// at most embeddedSandboxConns connections, all of them kept between requests, none idle past
// embeddedSandboxIdle.
func embeddedSandboxClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxConnsPerHost = embeddedSandboxConns
	t.MaxIdleConnsPerHost = embeddedSandboxConns
	t.IdleConnTimeout = embeddedSandboxIdle
	return &http.Client{Transport: t}
}

func (s *Service) startConnector(ctx context.Context) error {
	workerID, err := s.workerID()
	if err != nil {
		return err
	}
	baseURL := func(string) string { return "" }
	var httpClient *http.Client // the adapter's own for companies elsewhere
	switch {
	case s.sandbox != nil:
		baseURL = s.sandbox.BaseURL
		httpClient = embeddedSandboxClient()
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
	companies, err := company.New(company.Config{BaseURL: baseURL, HTTPClient: httpClient, Metrics: s.metrics, Logger: s.log})
	if err != nil {
		return fmt.Errorf("company adapter: %w", err)
	}
	w := worker.New(worker.Config{
		WorkerID: workerID, Repo: repository.New(s.store, s.registry, collection.Kind, repository.WithKeys(s.keys)), Catalog: s.catalog,
		Companies: companies, Metrics: s.metrics, Logger: s.log, StaleClaimAfter: s.cfg.StaleClaimAfter,
		MaxSessions: s.cfg.MaxSessions, MinSessions: connectorMinSessions(s.cfg.MinSessions, s.sandbox != nil), SweepInterval: s.cfg.ConnectorSweep, PollInterval: s.cfg.CompanyPoll,
		// The slots are shared between clients in turn, with this cap per client when set; the
		// sessions waiting for the user are parked, woken by their input-supplied events, which
		// the consumer below hands over with the started ones.
		MaxSessionsPerClient: s.cfg.MaxSessionsPerClient, InputPollInterval: s.cfg.InputPoll,
		// The user's deadlines; they are recorded with the statuses that wait, so a restarted
		// or another worker enforces them.
		ContactFormTimeout: s.cfg.ContactFormTimeout, InputTimeout: s.cfg.InputTimeout,
		MethodSelectionTimeout: s.cfg.MethodSelectionTimeout, EIDOrderTimeout: s.cfg.EIDOrderTimeout,
		Active: collectionstatus.NewReader(s.models.Status, s.keys),
		// A deleted user's collection is ended, never driven: told by the key cache, which
		// this process's own erasures reach at once and another's within its bound.
		Erasures: keystore.Erasures{Keys: s.keys},
		// PSD2 products are read under the consent the collection started with, as long as
		// the consent's events show it usable.
		Consents:           worker.RecordedConsents{Consents: repository.New(s.store, s.registry, consent.Kind, repository.WithKeys(s.keys))},
		AccountInformation: companies,
	})
	consume := s.consume(ConnectorGroupID, []string{eventschema.Topic("collection")})
	s.runRole(ctx, "connector consumer", func(ctx context.Context) error {
		return consume(ctx, ConnectorGroupID, w.HandleBatch)
	})
	s.runRole(ctx, "connector", w.Run)

	// The consent process manager: the same worker model on the consents, with the bank's
	// consent API of the same adapter, in a consumer group of its own.
	cw := worker.NewConsentWorker(worker.ConsentConfig{
		WorkerID: workerID, Repo: repository.New(s.store, s.registry, consent.Kind, repository.WithKeys(s.keys)),
		Bank: companies, Active: consents.NewReader(s.models.Consents, s.keys), Erasures: keystore.Erasures{Keys: s.keys},
		Metrics: s.metrics, Logger: s.log, StaleClaimAfter: s.cfg.StaleClaimAfter, MaxSessions: s.cfg.MaxSessions,
		SweepInterval: s.cfg.ConnectorSweep, PollInterval: s.cfg.CompanyPoll,
		// The authorization deadline and the expiry are recorded in the consent's events, so a
		// restarted or another worker enforces them.
		EIDOrderTimeout: s.cfg.EIDOrderTimeout, Validity: s.cfg.ConsentValidity,
	})
	consumeConsents := s.consume(ConsentConnectorGroupID, []string{eventschema.Topic("consent")})
	s.runRole(ctx, "consent connector consumer", func(ctx context.Context) error {
		return consumeConsents(ctx, ConsentConnectorGroupID, cw.HandleBatch)
	})
	s.runRole(ctx, "consent connector", cw.Run)
	return s.startCancellationWorker(ctx, workerID)
}

// ConsentConnectorGroupID is the consumer group of the consent workers (samla.consent.events).
const ConsentConnectorGroupID = "samla.connector.consents"

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
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return "", fmt.Errorf("worker id: %w", err)
	}
	// The random part tells apart workers on hosts with the same name (containers).
	id := "worker-" + host + "-" + hex.EncodeToString(suffix)
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return id, nil
}
