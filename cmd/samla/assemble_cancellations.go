// Cancellations: the command role's service and the provider's callbacks.

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/connectors/signing"
	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/platform/retry"
	"github.com/samla/samla/projections/cancellations"
)

// commandCancellations is the command role's cancellation service: everything it checks is read
// from the event store, and a collection of an erased user is told from the key cache.
func (s *Service) commandCancellations() *app.CancellationService {
	return app.NewCancellationService(
		repository.New(s.store, s.registry, cancellation.Kind, repository.WithKeys(s.keys)),
		repository.New(s.store, s.registry, collection.Kind, repository.WithKeys(s.keys)),
		repository.New(s.store, s.registry, client.Kind, repository.WithKeys(s.keys)),
		keystore.Erasures{Keys: s.keys}, nil)
}

// callbackVerifier checks the signing provider's callbacks with the adapter's VerifyCallback.
func (s *Service) callbackVerifier() httpcmd.CallbackVerifier { return providerCallbacks{} }

// providerCallbacks is the signing adapter's callback check, answering in the command side's
// terms.
type providerCallbacks struct{}

func (providerCallbacks) VerifyCallback(key string, header http.Header, body []byte, now time.Time) (app.ProviderCallback, error) {
	cb, err := signing.VerifyCallback(key, header, body, now, signing.DefaultCallbackTolerance)
	if err != nil {
		return app.ProviderCallback{}, err
	}
	return app.ProviderCallback{EventID: cb.EventID, Reference: cb.Reference}, nil
}

// signingProviderURL is the signing provider's API: the configured one, else the sandbox's
// (embedded, or the standalone one at CompaniesURL); "" when there is none.
func (s *Service) signingProviderURL() string {
	switch {
	case s.cfg.SigningProviderURL != "":
		return s.cfg.SigningProviderURL
	case s.sandbox != nil:
		return s.sandbox.URL() + "/sandbox/signing"
	case s.cfg.CompaniesURL != "":
		return strings.TrimRight(s.cfg.CompaniesURL, "/") + "/sandbox/signing"
	}
	return ""
}

// callbackURL is where the provider reports a client's processes: under the public URL, else
// this process's API listener; "" (polling alone) when neither is known.
func (s *Service) callbackURL(clientID string) string {
	base := strings.TrimRight(s.cfg.PublicURL, "/")
	if base == "" {
		addr := s.HTTPAddr()
		if addr == "" {
			return ""
		}
		base = "http://" + addr
	}
	return base + "/callbacks/signing/" + url.PathEscape(clientID)
}

// startCancellationWorker runs the cancellation process manager of the connector role on
// samla.cancellation.events, in a consumer group of its own.
func (s *Service) startCancellationWorker(ctx context.Context, workerID string) error {
	providerURL := s.signingProviderURL()
	if providerURL == "" {
		s.log.Warn("no signing provider (neither --signing-provider-url nor a sandbox): cancellations stay in PREPARATION")
		return nil
	}
	provider, err := signing.NewClient(providerURL, nil, retry.Default)
	if err != nil {
		return fmt.Errorf("signing provider: %w", err)
	}
	w := worker.NewCancellationWorker(worker.CancellationConfig{
		WorkerID: workerID, Repo: repository.New(s.store, s.registry, cancellation.Kind, repository.WithKeys(s.keys)),
		Clients: repository.New(s.store, s.registry, client.Kind, repository.WithKeys(s.keys)), Catalog: s.catalog,
		Provider: provider, Open: cancellations.NewReader(s.models.Cancellations, s.keys),
		Erasures: keystore.Erasures{Keys: s.keys}, CallbackURL: s.callbackURL, Metrics: s.metrics, Logger: s.log,
		StaleClaimAfter: s.cfg.StaleClaimAfter, MaxSessions: s.cfg.MaxSessions,
		// The signature deadline is recorded in the cancellation's events, so a restarted or
		// another worker enforces it; pending signatures are read at the provider every poll.
		SweepInterval: s.cfg.SigningPoll, SigningTimeout: s.cfg.SigningTimeout,
	})
	consume := s.consume(CancellationConnectorGroupID, []string{eventschema.Topic("cancellation")})
	s.runRole(ctx, "cancellation connector consumer", func(ctx context.Context) error {
		return consume(ctx, CancellationConnectorGroupID, w.HandleBatch)
	})
	s.runRole(ctx, "cancellation connector", w.Run)
	return nil
}

// CancellationConnectorGroupID is the consumer group of the cancellation workers
// (samla.cancellation.events).
const CancellationConnectorGroupID = "samla.connector.cancellations"
