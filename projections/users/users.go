// Package users is the read model behind GET /users/{userUuid} and GET /users?externalId=, and
// the liveness check of users' sessions: one row per user, and one per externalId reservation.
//
// A user is found by its externalId through the reservation's id, the keyed hash of the client
// and the externalId (user.ExternalIDKey), which is also the name of the reservation's stream:
// the read model never holds an externalId in plain text, nor anything it could be looked up
// by. The externalId itself is kept only to be shown, sealed under the user's data subject
// (eventschema.Seal), and dropped when the user is deleted. Which user holds a reservation is
// sealed too, under the subject of that user's hold (domain.HolderSubject, a pseudonym, since a
// sealed form names its subject): the reservation's key is the same for every user who ever has
// the externalId, so the holders in plain text beside it (in the current row, or in ClickHouse's
// older row versions) would link an erased user to the next one. After an erasure the row says
// only that some user of the client held the externalId.
//
// The Store port is declared here with its SQLite and ClickHouse adapters, the DDL of each, the
// Projector that folds user and externalid events into rows, and the Reader that serves the
// ports of the read model's consumers (query.UserReader, httpapi.SessionUsers); userstest is the
// contract suite both adapters pass.
package users

import (
	"context"
	"time"

	"github.com/samla/samla/projections/internal/sealed"
)

// Row is one user.
type Row struct {
	UserUUID string
	Tenant   string // the client id that owns the user
	// Personal is the user's personal data (the user.created event's personal member,
	// {"externalId":…}) sealed under the user's data subject; nil once the user was deleted, or
	// when its personal data was erased before the read model saw it.
	Personal  []byte
	CreatedAt time.Time // stored at ms precision, returned in UTC
	DeletedAt time.Time // zero while the user is live
	// Revision is the revision of the last event of the user's stream folded into the row.
	Revision uint64
}

// ExternalIDRow is one externalId reservation: which user holds it, or that it was released.
type ExternalIDRow struct {
	// Key is the reservation's id, user.ExternalIDKey of the client and the externalId.
	Key    string
	Tenant string
	// Holder is the user that holds the reservation ({"userUuid":…}), sealed under the subject
	// of its hold (domain.HolderSubject), which names no user and which the user's erasure
	// destroys; zero for a released reservation, and when the holder was erased before the read
	// model saw the event.
	Holder   sealed.Value
	Released bool
	// Revision is the revision of the last event of the reservation's stream folded into the row.
	Revision uint64
}

// Store holds the rows. The projector writes through GetMany, Upsert and UpsertExternalIDs; the
// reader reads with Get and GetExternalID.
type Store interface {
	// GetMany returns the existing users among ids, keyed by user id, whatever their tenant (it
	// serves the projector, never a client).
	GetMany(ctx context.Context, ids []string) (map[string]Row, error)
	// Upsert writes users in one batch. A row whose Revision is not greater than the stored
	// row's is ignored; within one call, the first row with the highest revision per user wins.
	Upsert(ctx context.Context, rows []Row) error
	// UpsertExternalIDs writes reservations in one batch, under the same revision rule per key.
	UpsertExternalIDs(ctx context.Context, rows []ExternalIDRow) error
	// Get returns tenant's user, deleted or not, or readdb.ErrNotFound when it does not exist
	// or belongs to another tenant.
	Get(ctx context.Context, tenant, userUUID string) (Row, error)
	// GetExternalID returns tenant's reservation with this key (its holder still sealed), or
	// readdb.ErrNotFound.
	GetExternalID(ctx context.Context, tenant, key string) (ExternalIDRow, error)
	// Reset removes every row, before a rebuild from the event store.
	Reset(ctx context.Context) error
}

// rowKey and rowRevision are a row's identity and version, for readdb's revision helpers.
func rowKey(r Row) string      { return r.UserUUID }
func rowRevision(r Row) uint64 { return r.Revision }

func externalIDKey(r ExternalIDRow) string      { return r.Key }
func externalIDRevision(r ExternalIDRow) uint64 { return r.Revision }
