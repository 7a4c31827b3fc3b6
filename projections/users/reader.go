package users

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/query"
)

// Reader serves the read model to its consumers through the ports they declare: the user
// endpoints' query.UserReader, the liveness check of users' sessions (httpapi.SessionUsers, and
// app.SessionLiveness, which asks the event store about a user the read model has not seen),
// and what DELETE /users/{userUuid} waits on (httpcmd.DeletedUsers).
type Reader struct {
	store  Store
	keys   eventschema.Keys
	secret []byte
}

var (
	_ query.UserReader     = Reader{}
	_ httpapi.SessionUsers = Reader{}
)

// NewReader returns the reader over store. keys opens the externalIds it shows; secret is the
// server's secret of the externalId reservations (the command side's, see app.NewUserService),
// with which it finds a user by externalId.
func NewReader(store Store, keys eventschema.Keys, secret []byte) Reader {
	if keys == nil || len(secret) == 0 {
		panic("users.NewReader: keys and the externalId secret are required")
	}
	return Reader{store: store, keys: keys, secret: secret}
}

// Get implements query.UserReader: a user the tenant cannot see is query.ErrNotFound.
func (r Reader) Get(ctx context.Context, tenant, userUUID string) (query.UserView, error) {
	row, err := r.store.Get(ctx, tenant, userUUID)
	if errors.Is(err, readdb.ErrNotFound) {
		return query.UserView{}, fmt.Errorf("user %s: %w", userUUID, query.ErrNotFound)
	}
	if err != nil {
		return query.UserView{}, err
	}
	return r.view(ctx, row)
}

// FindByExternalID implements query.UserReader. The reservation's key finds the reservation, its
// holder (opened) the user, which must be live; its own externalId must then be the one asked
// for, so that a reservation caught in a repair (see app.UserService) never answers with a user
// of another externalId. An erased holder finds nobody.
func (r Reader) FindByExternalID(ctx context.Context, tenant, externalID string) (query.UserView, error) {
	notFound := fmt.Errorf("user by external id: %w", query.ErrNotFound)
	reservation, err := r.store.GetExternalID(ctx, tenant, user.ExternalIDKey(r.secret, tenant, externalID))
	if errors.Is(err, readdb.ErrNotFound) {
		return query.UserView{}, notFound
	}
	if err != nil {
		return query.UserView{}, err
	}
	if reservation.Released || reservation.Holder.IsZero() {
		return query.UserView{}, notFound
	}
	plain, erased, err := reservation.Holder.Open(ctx, r.keys)
	if err != nil {
		return query.UserView{}, fmt.Errorf("user by external id: %w", err)
	}
	if erased {
		return query.UserView{}, notFound
	}
	var holder holderOf
	if err := json.Unmarshal(plain, &holder); err != nil || holder.UserUUID == "" {
		return query.UserView{}, fmt.Errorf("user by external id: decode the holder: %w", errors.Join(err, errNoHolder))
	}
	row, err := r.store.Get(ctx, tenant, holder.UserUUID)
	if errors.Is(err, readdb.ErrNotFound) {
		return query.UserView{}, notFound
	}
	if err != nil {
		return query.UserView{}, err
	}
	if !row.DeletedAt.IsZero() {
		return query.UserView{}, notFound
	}
	view, err := r.view(ctx, row)
	if err != nil {
		return query.UserView{}, err
	}
	if view.ExternalID == nil || *view.ExternalID != externalID {
		return query.UserView{}, notFound
	}
	return view, nil
}

// errNoHolder is a sealed holder that opens to no user.
var errNoHolder = errors.New("no user in the sealed holder")

// IsLiveUser tells whether the tenant has this user and it is not deleted: the port the session
// check declares (httpapi.SessionUsers). It reads the row on every call and opens nothing.
func (r Reader) IsLiveUser(ctx context.Context, tenant, userUUID string) (bool, error) {
	l, err := r.Liveness(ctx, tenant, userUUID)
	return l == Live, err
}

// IsDeletedUser tells whether the read model shows the tenant's user deleted: the port that
// DELETE /users/{userUuid} waits on (httpcmd.DeletedUsers, restated in userstest: a projection
// does not import the command side). A user it has not seen is not deleted. It reads the row on
// every call and opens nothing.
func (r Reader) IsDeletedUser(ctx context.Context, tenant, userUUID string) (bool, error) {
	l, err := r.Liveness(ctx, tenant, userUUID)
	return l == Deleted, err
}

// Liveness is what the read model knows of a user's life.
type Liveness int

const (
	// Unknown: the tenant has no such user, or the read model does not have it yet.
	Unknown Liveness = iota
	// Live: the user exists and is not deleted.
	Live
	// Deleted: the user was deleted.
	Deleted
)

// Liveness tells what the read model knows of the tenant's user, telling a user it has not seen
// (Unknown), which another source may know already, from one it knows was deleted. It reads the
// row on every call and opens nothing.
func (r Reader) Liveness(ctx context.Context, tenant, userUUID string) (Liveness, error) {
	row, err := r.store.Get(ctx, tenant, userUUID)
	switch {
	case errors.Is(err, readdb.ErrNotFound):
		return Unknown, nil
	case err != nil:
		return Unknown, err
	case !row.DeletedAt.IsZero():
		return Deleted, nil
	}
	return Live, nil
}

// view opens a row's personal data: an erased subject, or a deleted user, shows no externalId;
// a key the key store does not have is an error, never an absent externalId.
func (r Reader) view(ctx context.Context, row Row) (query.UserView, error) {
	v := query.UserView{UserUUID: row.UserUUID, Tenant: row.Tenant, CreatedAt: row.CreatedAt}
	if !row.DeletedAt.IsZero() {
		deleted := row.DeletedAt
		v.DeletedAt = &deleted
		return v, nil
	}
	if row.Personal == nil {
		return v, nil
	}
	plain, erased, err := eventschema.Open(ctx, r.keys, row.Personal)
	if err != nil {
		return query.UserView{}, fmt.Errorf("user %s: %w", row.UserUUID, err)
	}
	if erased {
		return v, nil
	}
	var personal user.CreatedPerson
	if err := json.Unmarshal(plain, &personal); err != nil {
		return query.UserView{}, fmt.Errorf("user %s: decode personal data: %w", row.UserUUID, err)
	}
	if personal.ExternalID != "" {
		v.ExternalID = &personal.ExternalID
	}
	return v, nil
}
