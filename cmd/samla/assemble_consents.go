// The consents of the command role: the application service behind POST and DELETE /consents,
// and the list of a user's consents that the user's erasure revokes.

package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
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

// storeUserConsents lists a user's consents from the event store itself (app.UserConsents): it
// reads every event once and keeps the consent.created of the client's user. It reads only the
// public part of each, never opening personal data. It costs a pass over the whole store per
// erasure, which is fine while erasures are rare and the consents read model is not wired for
// it; that read model's list replaces it.
type storeUserConsents struct{ store eventstore.Store }

// storeScanPage is how many events one read of the scan takes.
const storeScanPage = 1000

var _ app.UserConsents = storeUserConsents{}

func (l storeUserConsents) UserConsentIDs(ctx context.Context, tenant, userUUID string) ([]string, error) {
	var ids []string
	var after uint64
	for {
		envs, err := l.store.ReadAll(ctx, after, storeScanPage)
		if err != nil {
			return nil, fmt.Errorf("list the consents of a user: %w", err)
		}
		for _, env := range envs {
			after = env.Position
			if env.Type != consent.EventCreated || eventschema.Category(env.Stream) != eventschema.Category(consent.StreamPrefix) {
				continue
			}
			var public struct {
				ConsentID string `json:"consentId"`
				ClientID  string `json:"clientId"`
				UserUUID  string `json:"userUuid"`
			}
			if err := json.Unmarshal(env.Payload, &public); err != nil {
				return nil, fmt.Errorf("list the consents of a user: %s/%d: %w", env.Stream, env.Revision, err)
			}
			if public.ClientID == tenant && public.UserUUID == userUUID {
				ids = append(ids, public.ConsentID)
			}
		}
		if len(envs) < storeScanPage {
			return ids, nil
		}
	}
}
