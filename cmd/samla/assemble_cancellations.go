// Cancellations: the command role's service and the provider's callbacks.

package main

import (
	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/platform/keystore"
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

// callbackVerifier checks the signing provider's callbacks; until the provider's adapter is
// wired, none is mounted.
func (s *Service) callbackVerifier() httpcmd.CallbackVerifier { return nil }
