// The consents of the command role: the application service behind POST and DELETE /consents,
// and the repository through which the user's erasure revokes the user's consents.

package main

import (
	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
)

// commandConsents is the command role's consent service.
func (s *Service) commandConsents() *app.ConsentService {
	return app.NewConsentService(s.catalog,
		repository.New(s.store, s.registry, consent.Kind, repository.WithKeys(s.keys)),
		repository.New(s.store, s.registry, user.Kind, repository.WithKeys(s.keys)), nil)
}

// consentRevokes is the repository the user's erasure revokes the user's consents through.
func (s *Service) consentRevokes() app.ConsentRepository {
	return repository.New(s.store, s.registry, consent.Kind, repository.WithKeys(s.keys))
}
