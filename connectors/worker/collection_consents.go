package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
)

// ConsentLoader loads a consent from the event store (*repository.Repository[*consent.Consent]
// satisfies it).
type ConsentLoader interface {
	Load(ctx context.Context, consentID string) (*consent.Consent, error)
}

// RecordedConsents serves CollectionConsents from what the collection recorded when it started
// (collection.started's consent: the bank's consent id and the scope) and from the consent's own
// events, read afresh at each call: a consent revoked or expired since the start (its effective
// status, so an expiry not recorded yet counts) is no grant any more, whether or not the bank
// was told yet.
type RecordedConsents struct {
	Consents ConsentLoader
	// Clock decides expiry; nil is time.Now.
	Clock func() time.Time
}

var _ CollectionConsents = RecordedConsents{}

// PSD2Grant implements CollectionConsents. A collection started without a consent has no grant.
// One whose consent can no longer be used is an error wrapping ErrConsentNotUsable, returned
// with the grant it had, so that the worker knows which products it leaves unread.
func (r RecordedConsents) PSD2Grant(ctx context.Context, c *collection.Collection) (PSD2Grant, bool, error) {
	used := c.Consent()
	if used == nil {
		return PSD2Grant{}, false, nil
	}
	grant := PSD2Grant{BankConsentID: used.BankConsentID, Scope: used.Scope}
	k, err := r.Consents.Load(ctx, used.ConsentID)
	if err != nil {
		return PSD2Grant{}, false, fmt.Errorf("load consent %s: %w", used.ConsentID, err)
	}
	now := time.Now
	if r.Clock != nil {
		now = r.Clock
	}
	// The start checked the same; what can have changed since is the consent's status.
	if reason, ok := k.Usable(c.ClientID(), c.UserUUID(), c.Company(), now()); !ok {
		return grant, true, fmt.Errorf("consent %s is no longer usable (%s): %w", used.ConsentID, reason, ErrConsentNotUsable)
	}
	return grant, true, nil
}
