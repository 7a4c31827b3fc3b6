// Package consents is the read model behind GET /consents/{consentId}/status, GET
// /consents/{consentId} and GET /users/{userUuid}/consents: one row per PSD2 consent with its
// status, scope, times, error and the stream revision it reflects.
//
// The pending EID order's tokens and QR secret are personal (whoever holds them can sign in the
// person's place), and the status poll needs them: the row keeps them sealed under the user's
// data subject (projections/internal/sealed), only as long as the consent awaits its
// authorization, and drops them when the user is deleted. Nothing else of the consent is
// personal: its personal number stays in the event store.
//
// The Store port is declared here with its SQLite and ClickHouse adapters, the DDL of each, the
// Projector that folds consent events into rows, and the Reader that serves the ports of the
// read model's consumers (query.ConsentReader, query.UserConsentsReader, the erasure's list of a
// user's consents, the connectors' list of consents still running); consentstest is the
// contract suite both adapters pass.
package consents

import (
	"context"
	"strings"
	"time"

	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
)

// Row is one consent.
type Row struct {
	ConsentID   string
	Tenant      string // the client id that owns the consent
	UserUUID    string
	Company     string
	LoginMethod string
	// Status is the last status the consent's events recorded (a consent.Status); an AUTHORIZED
	// consent past ExpiresAt is still AUTHORIZED here until consent.expired is recorded.
	Status string
	// Scope is sorted and without repeats, as the consent recorded it.
	Scope []string
	// BankConsentID is the bank's own, public id of the consent, "" before its authorization
	// started.
	BankConsentID string
	// ErrorCode and ErrorMessage say why a FAILED consent failed, "" otherwise.
	ErrorCode    string
	ErrorMessage string
	// RevokeReason is who revoked a REVOKED consent (consent.RevokeReason), "" otherwise.
	RevokeReason string
	// Personal is the pending EID order (an Order) sealed under the user's data subject: only
	// while the consent is AWAITING_AUTHORIZATION, zero otherwise and once the user was deleted.
	Personal sealed.Value
	// Times are stored at ms precision and returned in UTC; zero is none.
	CreatedAt time.Time
	UpdatedAt time.Time
	// AuthorizationStartedAt is when the bank opened the current EID order, and
	// AuthorizationDeadline when the order times out unsigned.
	AuthorizationStartedAt time.Time
	AuthorizationDeadline  time.Time
	AuthorizedAt           time.Time
	ExpiresAt              time.Time
	// Revision is the revision of the last event of the consent's stream folded into the row.
	Revision uint64
}

// Order is a row's personal part, before it is sealed: the EID order the poll shows as an
// animated QR code and an autostart token. StartedAt is kept at full precision (the QR code
// counts the seconds since it). Never logged.
type Order struct {
	StartedAt      time.Time `json:"startedAt"`
	AutoStartToken string    `json:"autoStartToken,omitempty"`
	QRStartToken   string    `json:"qrStartToken,omitempty"`
	QRStartSecret  string    `json:"qrStartSecret,omitempty"`
}

// UserPosition is where a page of a user's consents ends: the last row's CreatedAt (at the
// stored ms precision) and ConsentID.
type UserPosition struct {
	CreatedAt time.Time
	ConsentID string
}

// NonFinalPosition is where a page of the non-final consents ends, in the same terms as a page
// of a user's: the last row's CreatedAt and ConsentID. Neither ever changes for a consent, so
// the page after it holds exactly the non-final consents after it, whatever was created or
// ended meanwhile.
type NonFinalPosition = UserPosition

// Store holds the rows. The projector writes through GetMany, Upsert and ErasePersonal; the
// reader reads with Get, ListByUser and ListNonFinal.
type Store interface {
	// GetMany returns the rows of the given consents that exist, keyed by consent id, whatever
	// their tenant (it serves the projector, never a client).
	GetMany(ctx context.Context, ids []string) (map[string]Row, error)
	// Upsert writes rows in one batch. A row whose Revision is not greater than the stored
	// row's is ignored, so that a redelivered or reordered write can never move a row back;
	// within one call, the first row with the highest revision per consent wins.
	Upsert(ctx context.Context, rows []Row) error
	// Get returns tenant's consent, or readdb.ErrNotFound when it does not exist or belongs to
	// another tenant: a client must not learn that another client's consent exists.
	Get(ctx context.Context, tenant, consentID string) (Row, error)
	// ListByUser returns up to limit of tenant's consents of userUUID, newest first (by
	// CreatedAt, then id, both descending), starting after the position (nil: from the newest).
	ListByUser(ctx context.Context, tenant, userUUID string, after *UserPosition, limit int) ([]Row, error)
	// ListNonFinal returns up to limit consents (limit <= 0: all) whose status is not final
	// (AUTHORIZED included: it still expires), oldest first (by CreatedAt, then id), starting
	// after the position (nil: from the oldest). The connectors' sweep pages through them.
	ListNonFinal(ctx context.Context, after *NonFinalPosition, limit int) ([]Row, error)
	// ErasePersonal blanks the personal part (Row.Personal) of every one of tenant's consents of
	// userUUID, which was deleted: the rest stays, at the revisions it has. Erasing again
	// changes nothing.
	ErasePersonal(ctx context.Context, tenant, userUUID string) error
	// Reset removes every row, before a rebuild from the event store.
	Reset(ctx context.Context) error
}

// nonFinalStatuses lists the statuses ListNonFinal selects, derived from the domain so that the
// read model never disagrees with the state machine about what is final.
func nonFinalStatuses() []string {
	var out []string
	for _, s := range consent.AllStatuses() {
		if !s.IsFinal() {
			out = append(out, string(s))
		}
	}
	return out
}

// rowKey and rowRevision are a row's identity and version, for readdb's revision helpers.
func rowKey(r Row) string      { return r.ConsentID }
func rowRevision(r Row) uint64 { return r.Revision }

// encodeScope is the stored form of a scope: its values joined by commas, which no scope value
// holds ("" for none).
func encodeScope(s []string) string { return strings.Join(s, ",") }

// decodeScope reverses encodeScope; none is nil.
func decodeScope(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// byUserFilter is the WHERE clause of ListByUser, and its arguments. SQLite takes the position
// as a row value, which its index search turns into a range; ClickHouse, which scans either way,
// takes the expanded form every server version knows. Every column in it never changes for a
// consent, so ClickHouse may apply it to the raw row versions next to FINAL.
func byUserFilter(tenant, userUUID string, after *UserPosition, rowValues bool) (string, []any) {
	where := `tenant = ? AND user_uuid = ?`
	args := []any{tenant, userUUID}
	if after == nil {
		return where, args
	}
	ms := readdb.Millis(after.CreatedAt)
	if rowValues {
		return where + ` AND (created_at_ms, consent_id) < (?, ?)`, append(args, ms, after.ConsentID)
	}
	return where + ` AND (created_at_ms < ? OR (created_at_ms = ? AND consent_id < ?))`, append(args, ms, ms, after.ConsentID)
}

// nonFinalAfter is the position condition of ListNonFinal ("" for none), and its arguments, in
// byUserFilter's two forms: a row value for SQLite, whose index over (status, created_at_ms,
// consent_id) turns it into a range per status, the expanded form for ClickHouse. Its columns
// never change for a consent, so ClickHouse may apply it to the raw row versions next to FINAL.
func nonFinalAfter(after *NonFinalPosition, rowValues bool) (string, []any) {
	if after == nil {
		return "", nil
	}
	return readdb.After("created_at_ms", "consent_id", after.CreatedAt, after.ConsentID, rowValues)
}
