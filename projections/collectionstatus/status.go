// Package collectionstatus is the read model behind GET /collections/{id}/status: one row per
// collection with its latest status, extra information and the stream revision it reflects.
// The Store port is declared here with its SQLite and ClickHouse adapters, the DDL of each, the
// Projector that folds collection events into rows, and the Reader that serves the ports of the
// read model's consumers (query.StatusReader, the connectors' active collections); statustest is
// the contract suite both adapters pass.
package collectionstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/samla/samla/domain/collection"
)

// Row is one collection as the status endpoint shows it.
type Row struct {
	CollectionID string
	Tenant       string // the client id that owns the collection
	Company      string
	Product      string
	LoginMethod  string
	APIVersion   string
	UserUUID     string
	Status       string
	// ExtraInformation is what the last status change attached; nil when it attached nothing,
	// which is kept apart from an empty object.
	ExtraInformation map[string]any
	// What the current status asks of the client, as the status change that set it recorded it.
	// A later status change replaces all of them, clearing what it does not carry; accepted
	// supplement-info clears RequiredInputTypes and the instructions (in Personal), since the
	// status then no longer takes input. Empty and nil are the same (stored as nothing,
	// returned as nil).
	RequiredInputTypes []string
	Message            string
	// EIDOrder is the pending electronic-ID order the status poll shows as an animated QR code
	// and an autostart token; its StartedAt is kept at full precision (the QR code counts the
	// seconds since it).
	EIDOrder *collection.EIDOrder
	// Personal is the status's personal part, a collection.StatusPersonal: the instructions a
	// client-side login hands out (their headers carry the user's device token) and the EID
	// order's QR secret (the query side computes the QR data from it at every poll; it is never
	// returned to a client). It is stored sealed under the collection's data subject
	// (eventschema.Seal; rows written before sealing hold it plain) and opened only by the
	// Reader; nil when the status has neither. It lives only as long as the status that
	// carried it: the next status change clears it.
	Personal []byte
	// Deadline is when the current status stops waiting, nil when it does not wait.
	Deadline  *collection.Deadline
	CreatedAt time.Time // stored at ms precision, returned in UTC
	UpdatedAt time.Time // stored at ms precision, returned in UTC
	// Revision is the revision of the last event of the collection's stream folded into the row.
	Revision uint64
}

// Store holds the rows. The projector writes through GetMany and Upsert; query handlers read
// with Get; connectors use ListNonFinal to re-arm sessions after a restart.
type Store interface {
	// GetMany returns the rows of the given collections that exist, keyed by collection id,
	// whatever their tenant (it serves the projector, never a client).
	GetMany(ctx context.Context, ids []string) (map[string]Row, error)
	// Upsert writes rows in one batch. A row whose Revision is not greater than the stored
	// row's is ignored, so that a redelivered or reordered write can never move a row back;
	// within one call, the first row with the highest revision per collection wins.
	Upsert(ctx context.Context, rows []Row) error
	// Get returns tenant's collection, or readdb.ErrNotFound when it does not exist or belongs
	// to another tenant: a client must not learn that another client's collection exists.
	Get(ctx context.Context, tenant, collectionID string) (Row, error)
	// ListNonFinal returns up to limit collections (limit <= 0: all) whose status is not
	// final, oldest first (by CreatedAt, then id), starting after the position (nil: from the
	// oldest); nonfinal.go.
	ListNonFinal(ctx context.Context, after *NonFinalPosition, limit int) ([]Row, error)
	// ListByUser returns up to limit of tenant's collections made for userUUID, newest first
	// (by CreatedAt, then id), starting after the position (nil: from the newest); byuser.go.
	ListByUser(ctx context.Context, tenant, userUUID string, after *UserPosition, limit int) ([]Row, error)
	// ErasePersonal blanks the personal part (Row.Personal) of every one of tenant's
	// collections made for userUUID, which was deleted: its statuses and the rest stay, at the
	// revisions they have. Erasing again changes nothing; a collection of no user is never
	// touched.
	ErasePersonal(ctx context.Context, tenant, userUUID string) error
	// Reset removes every row, before a rebuild from the event store.
	Reset(ctx context.Context) error
}

// nonFinalStatuses lists the statuses ListNonFinal selects. It is derived from the domain so
// that the read model never disagrees with the state machine about what is final.
func nonFinalStatuses() []string {
	var out []string
	for _, s := range collection.AllStatuses() {
		if !s.IsFinal() {
			out = append(out, string(s))
		}
	}
	return out
}

// rowKey and rowRevision are a row's identity and version, for readdb's revision helpers.
func rowKey(r Row) string      { return r.CollectionID }
func rowRevision(r Row) uint64 { return r.Revision }

// encodeExtra is the stored form of ExtraInformation: a JSON object, or "" for nil.
func encodeExtra(m map[string]any) (string, error) {
	if m == nil {
		return "", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode extra information: %w", err)
	}
	return string(b), nil
}

// decodeExtra reverses encodeExtra.
func decodeExtra(s string) (map[string]any, error) {
	if s == "" {
		return nil, nil
	}
	m := map[string]any{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode extra information: %w", err)
	}
	return m, nil
}

// storedDetails is the stored form of a row's status details, the same in both adapters: text
// columns holding JSON (or plain text for the message), "" for none. Empty-string sentinels keep
// the ClickHouse columns plain Strings (no Nullable), and nil and empty never need telling apart
// here. personal holds Row.Personal; instructions and qr_start_secret are where rows written
// before sealing kept the personal part in plain text: they are only read (into Personal), and
// every write empties them.
type storedDetails struct {
	requiredInputTypes string
	instructions       string
	message            string
	eidOrder           string
	qrStartSecret      string
	deadline           string
	personal           string
}

// detailColumns names the columns of storedDetails, in the order of its fields.
const detailColumns = `required_input_types, instructions, message, eid_order, qr_start_secret, deadline, personal`

// detailColumnNames lists detailColumns one by one, for the migrations that add them to a
// table created before they existed.
var detailColumnNames = []string{"required_input_types", "instructions", "message", "eid_order", "qr_start_secret", "deadline", "personal"}

func encodeDetails(r Row) (storedDetails, error) {
	d := storedDetails{message: r.Message, personal: string(r.Personal)}
	var err error
	if len(r.RequiredInputTypes) > 0 {
		if d.requiredInputTypes, err = encodeJSON(r.RequiredInputTypes); err != nil {
			return d, fmt.Errorf("required input types: %w", err)
		}
	}
	if r.EIDOrder != nil {
		order := *r.EIDOrder
		order.StartedAt = order.StartedAt.UTC()
		if d.eidOrder, err = encodeJSON(order); err != nil {
			return d, fmt.Errorf("eid order: %w", err)
		}
	}
	if r.Deadline != nil {
		deadline := *r.Deadline
		deadline.DueAt = deadline.DueAt.UTC()
		if d.deadline, err = encodeJSON(deadline); err != nil {
			return d, fmt.Errorf("deadline: %w", err)
		}
	}
	return d, nil
}

// args returns the stored details as query arguments, in the order of detailColumns.
func (d storedDetails) args() []any { return d.appendArgs(nil) }

// appendArgs appends args() to args.
func (d storedDetails) appendArgs(args []any) []any {
	return append(args, d.requiredInputTypes, d.instructions, d.message, d.eidOrder, d.qrStartSecret, d.deadline, d.personal)
}

// dests returns pointers to scan detailColumns into.
func (d *storedDetails) dests() []any {
	return []any{&d.requiredInputTypes, &d.instructions, &d.message, &d.eidOrder, &d.qrStartSecret, &d.deadline, &d.personal}
}

// decodeInto reverses encodeDetails.
func (d storedDetails) decodeInto(r *Row) error {
	r.Message = d.message
	r.RequiredInputTypes, r.EIDOrder, r.Deadline, r.Personal = nil, nil, nil, nil
	if d.requiredInputTypes != "" {
		if err := json.Unmarshal([]byte(d.requiredInputTypes), &r.RequiredInputTypes); err != nil {
			return fmt.Errorf("decode required input types: %w", err)
		}
	}
	switch {
	case d.personal != "":
		r.Personal = []byte(d.personal)
	case d.instructions != "" || d.qrStartSecret != "":
		// A row written before sealing: its personal part, in plain text, as the sealed one
		// opens to.
		legacy := collection.StatusPersonal{QRStartSecret: d.qrStartSecret}
		if d.instructions != "" {
			if err := json.Unmarshal([]byte(d.instructions), &legacy.Instructions); err != nil {
				return fmt.Errorf("decode instructions: %w", err)
			}
		}
		var err error
		if r.Personal, err = json.Marshal(legacy); err != nil {
			return fmt.Errorf("decode instructions: %w", err)
		}
	}
	if d.eidOrder != "" {
		r.EIDOrder = &collection.EIDOrder{}
		if err := json.Unmarshal([]byte(d.eidOrder), r.EIDOrder); err != nil {
			return fmt.Errorf("decode eid order: %w", err)
		}
	}
	if d.deadline != "" {
		r.Deadline = &collection.Deadline{}
		if err := json.Unmarshal([]byte(d.deadline), r.Deadline); err != nil {
			return fmt.Errorf("decode deadline: %w", err)
		}
	}
	return nil
}

func encodeJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
