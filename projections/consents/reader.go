package consents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/query"
)

// Reader serves the read model to its consumers through the ports they declare: the consent
// endpoints' query.ConsentReader and query.UserConsentsReader, the user erasure's list of a
// user's consents and the connectors' list of consents still running (both satisfied by
// shape: an adapter depends on the ports it serves, never on their consumers' code).
type Reader struct {
	store Store
	keys  eventschema.Keys
}

var (
	_ query.ConsentReader      = Reader{}
	_ query.UserConsentsReader = Reader{}
)

// NewReader returns the reader over store, opening the pending EID orders with keys.
func NewReader(store Store, keys eventschema.Keys) Reader {
	if keys == nil {
		panic("consents.NewReader: keys are required to open the EID orders")
	}
	return Reader{store: store, keys: keys}
}

// Get implements query.ConsentReader: a consent the tenant cannot see is query.ErrNotFound. Only
// a consent awaiting its authorization has an EID order to open: the other polls decrypt nothing.
func (r Reader) Get(ctx context.Context, tenant, consentID string) (query.ConsentView, error) {
	row, err := r.store.Get(ctx, tenant, consentID)
	if errors.Is(err, readdb.ErrNotFound) {
		return query.ConsentView{}, fmt.Errorf("consent %s: %w", consentID, query.ErrNotFound)
	}
	if err != nil {
		return query.ConsentView{}, err
	}
	view := consentView(row)
	if row.Status != string(consent.StatusAwaitingAuthorization) || row.Personal.IsZero() {
		return view, nil
	}
	plain, erased, err := row.Personal.Open(ctx, r.keys)
	if err != nil {
		// A lost key store must be loud, never a poll without its QR code (erased is no error).
		return query.ConsentView{}, fmt.Errorf("consent %s: %w", consentID, err)
	}
	if erased {
		return view, nil
	}
	var order Order
	if err := json.Unmarshal(plain, &order); err != nil {
		return query.ConsentView{}, fmt.Errorf("consent %s: decode the EID order: %w", consentID, err)
	}
	view.EIDOrder = &query.ConsentEIDOrder{StartedAt: order.StartedAt, AutoStartToken: order.AutoStartToken,
		QRStartToken: order.QRStartToken, QRStartSecret: order.QRStartSecret}
	return view, nil
}

// ListByUser implements query.UserConsentsReader. The list opens no EID order.
func (r Reader) ListByUser(ctx context.Context, tenant, userUUID string, after *query.ConsentCursor, limit int) ([]query.ConsentView, error) {
	var pos *UserPosition
	if after != nil {
		pos = &UserPosition{CreatedAt: after.CreatedAt, ConsentID: after.ConsentID}
	}
	rows, err := r.store.ListByUser(ctx, tenant, userUUID, pos, limit)
	if err != nil {
		return nil, err
	}
	out := make([]query.ConsentView, 0, len(rows))
	for _, row := range rows {
		if row.Tenant != tenant || row.UserUUID != userUUID {
			continue // a store that forgot a filter must not leak another's consent
		}
		out = append(out, consentView(row))
	}
	return out, nil
}

// userConsentsPage is how many of a user's consents UserConsentIDs reads at once.
const userConsentsPage = 500

// UserConsentIDs returns the ids of every one of tenant's consents of userUUID, newest first,
// final ones included: the consents a user's erasure revokes (app.UserConsents), each that the
// event store shows live. A consent created a moment ago that this read model does not show yet
// is the connector worker's, which drives no consent of an erased user.
func (r Reader) UserConsentIDs(ctx context.Context, tenant, userUUID string) ([]string, error) {
	var (
		ids   []string
		after *UserPosition
	)
	for {
		rows, err := r.store.ListByUser(ctx, tenant, userUUID, after, userConsentsPage)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			if row.Tenant == tenant && row.UserUUID == userUUID {
				ids = append(ids, row.ConsentID)
			}
		}
		if len(rows) < userConsentsPage {
			return ids, nil
		}
		last := rows[len(rows)-1]
		after = &UserPosition{CreatedAt: last.CreatedAt, ConsentID: last.ConsentID}
	}
}

// ListNonFinal returns the ids of up to limit consents (limit <= 0: all) that have not reached a
// final status, AUTHORIZED ones included (their expiry is still to be recorded), oldest first (by
// creation, then id), starting after the consent afterID created at afterCreatedAt (afterID "":
// from the oldest), and the creation time of the last id it returns: with that id, where the
// next page starts. The connectors page through it to re-arm their consent sessions (the
// worker's ActiveConsents). The position is two plain values, not a NonFinalPosition, so that
// the worker's port names no type of this package.
func (r Reader) ListNonFinal(ctx context.Context, afterCreatedAt time.Time, afterID string, limit int) (ids []string, lastCreatedAt time.Time, err error) {
	var after *NonFinalPosition
	if afterID != "" {
		after = &NonFinalPosition{CreatedAt: afterCreatedAt, ConsentID: afterID}
	}
	rows, err := r.store.ListNonFinal(ctx, after, limit)
	if err != nil {
		return nil, time.Time{}, err
	}
	ids, lastCreatedAt = readdb.PageIDs(rows, func(r Row) string { return r.ConsentID }, func(r Row) time.Time { return r.CreatedAt })
	return ids, lastCreatedAt, nil
}

// consentView is a row as the query side sees it, without its EID order.
func consentView(row Row) query.ConsentView {
	v := query.ConsentView{
		ConsentID: row.ConsentID, Tenant: row.Tenant, UserUUID: row.UserUUID, Company: row.Company,
		LoginMethod: row.LoginMethod, Status: row.Status, Scope: append([]string(nil), row.Scope...),
		CreatedAt: row.CreatedAt, AuthorizedAt: row.AuthorizedAt, ExpiresAt: row.ExpiresAt, UpdatedAt: row.UpdatedAt,
	}
	if row.ErrorCode != "" {
		v.Error = &query.ConsentError{Code: row.ErrorCode, Message: row.ErrorMessage}
	}
	return v
}
