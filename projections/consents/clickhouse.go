package consents

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
)

// clickhouseSchema is the read model's ClickHouse DDL, kept to what both 18.16 (CI) and current
// servers accept: String and UInt64 columns, times as Unix milliseconds (0 for none), the scope
// as encodeScope's comma-separated list (splitByChar(',', scope) in a query), "" for no text.
// Analysts see a consent's client, user id, company, status, scope and times, and the bank's
// consent id; the pending EID order is sealed (personal), so an erasure leaves the older row
// versions unreadable too.
//
// ReplacingMergeTree(revision) keeps the newest version of each row when parts merge, which is
// whenever the server likes, so every read collapses versions itself with FINAL.
const clickhouseSchema = `
CREATE TABLE IF NOT EXISTS consents (
	consent_id      String,
	tenant          String,
	user_uuid       String,
	company         String,
	login_method    String,
	status          String,
	scope           String,
	bank_consent_id String,
	error_code      String,
	error_message   String,
	revoke_reason   String,
	personal        String,
	created_at_ms   UInt64,
	updated_at_ms   UInt64,
	authorization_started_at_ms UInt64,
	authorization_deadline_ms   UInt64,
	authorized_at_ms UInt64,
	expires_at_ms    UInt64,
	revision        UInt64
) ENGINE = ReplacingMergeTree(revision)
ORDER BY consent_id`

const clickhouseColumns = sqliteColumns

// ClickHouseStore is the Store on a ClickHouse database.
type ClickHouseStore struct {
	conn driver.Conn
	memo *readdb.Memo[string, Row] // set by Fresh
}

var _ Store = (*ClickHouseStore)(nil)

// NewClickHouse creates the read model's table when missing and returns the store. The caller
// keeps ownership of conn.
func NewClickHouse(ctx context.Context, conn driver.Conn) (*ClickHouseStore, error) {
	if err := conn.Exec(ctx, clickhouseSchema); err != nil {
		return nil, fmt.Errorf("migrate clickhouse consents: %w", err)
	}
	return &ClickHouseStore{conn: conn}, nil
}

// Fresh tells the store that its table was created empty for it and that nothing else writes
// it (a rebuild's): it then answers its own reads of what it wrote from memory (readdb.Memo).
func (s *ClickHouseStore) Fresh() { s.memo = readdb.NewMemo[string, Row]() }

// GetMany implements Store. consent_id is the sorting key, so filtering on it before FINAL keeps
// or drops every version of a row together.
func (s *ClickHouseStore) GetMany(ctx context.Context, ids []string) (map[string]Row, error) {
	if rows, ok := s.memo.Get(ids); ok {
		return rows, nil
	}
	return readdb.ClickHouseMapByKeys(ctx, s.conn, "consents", scanClickHouseRow, func(r Row) string { return r.ConsentID },
		`SELECT `+clickhouseColumns+` FROM consents FINAL WHERE consent_id IN`, ids)
}

// Upsert implements Store. Among equal revisions ReplacingMergeTree keeps whichever version it
// merges last, and an older revision inserted late shows until a merge, so the revision rule is
// applied before inserting. One consumer per partition writes a consent's stream, so nothing
// interleaves with the read of the stored revisions but a rebalance, whose writers fold the same
// events into the same rows.
func (s *ClickHouseStore) Upsert(ctx context.Context, rows []Row) error {
	rows = readdb.LatestPerKey(rows, rowKey, rowRevision)
	if len(rows) == 0 {
		return nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ConsentID
	}
	stored, ok := s.memo.Revisions(ids, rowRevision)
	if !ok {
		var err error
		if stored, err = readdb.StoredRevisions(ctx, s.conn, "consents", "consent_id", ids); err != nil {
			return fmt.Errorf("upsert consents: %w", err)
		}
	}
	if err := s.insert(ctx, readdb.KeepNewer(rows, stored, rowKey, rowRevision)); err != nil {
		return fmt.Errorf("upsert consents: %w", err)
	}
	return nil
}

// insert appends row versions as they are.
func (s *ClickHouseStore) insert(ctx context.Context, rows []Row) error {
	err := readdb.InsertBatch(ctx, s.conn, "consents", clickhouseColumns, rows, func(r Row) ([]any, error) {
		return []any{r.ConsentID, r.Tenant, r.UserUUID, r.Company, r.LoginMethod, r.Status, encodeScope(r.Scope),
			r.BankConsentID, r.ErrorCode, r.ErrorMessage, r.RevokeReason, r.Personal.String(),
			readdb.UMillis(r.CreatedAt), readdb.UMillis(r.UpdatedAt), readdb.UMillis(r.AuthorizationStartedAt),
			readdb.UMillis(r.AuthorizationDeadline), readdb.UMillis(r.AuthorizedAt), readdb.UMillis(r.ExpiresAt),
			r.Revision}, nil
	})
	if err != nil {
		return err
	}
	s.memo.Put(rows, rowKey)
	return nil
}

// Get implements Store. tenant never changes for a consent, so, like the key, it is filtered on
// before FINAL.
func (s *ClickHouseStore) Get(ctx context.Context, tenant, consentID string) (Row, error) {
	var (
		found Row
		ok    bool
	)
	err := s.query(ctx, func(r Row) { found, ok = r, true }, `SELECT `+clickhouseColumns+` FROM consents FINAL
		WHERE consent_id = ? AND tenant = ?`, consentID, tenant)
	if err != nil {
		return Row{}, err
	}
	if !ok {
		return Row{}, fmt.Errorf("consent %s: %w", consentID, readdb.ErrNotFound)
	}
	return found, nil
}

// ListByUser implements Store. Every column of the filter and the order never changes for a
// consent, so they apply to the raw versions next to FINAL, which then keeps the newest version
// of each listed consent.
func (s *ClickHouseStore) ListByUser(ctx context.Context, tenant, userUUID string, after *UserPosition, limit int) ([]Row, error) {
	if userUUID == "" || limit <= 0 {
		return nil, nil
	}
	where, args := byUserFilter(tenant, userUUID, after, false)
	var out []Row
	err := s.query(ctx, func(r Row) { out = append(out, r) }, `SELECT `+clickhouseColumns+` FROM consents FINAL
		WHERE `+where+` ORDER BY created_at_ms DESC, consent_id DESC LIMIT `+fmt.Sprint(limit), args...)
	if err != nil {
		return nil, fmt.Errorf("list consents of user %s: %w", userUUID, err)
	}
	return out, nil
}

// ListNonFinal implements Store. status changes from version to version, so the filter must see
// only the collapsed rows: applied to raw versions (as a PREWHERE would be, which servers move a
// WHERE to under FINAL when optimize_move_to_prewhere_if_final is on), an old AUTHORIZED version
// of a revoked consent would survive as if it were current. An outer query over the FINAL
// subquery is correct under every server version and setting. The position's columns never
// change for a consent, so it is applied next to FINAL, where it spares the collapse of every
// row before it.
func (s *ClickHouseStore) ListNonFinal(ctx context.Context, after *NonFinalPosition, limit int) ([]Row, error) {
	var args []any
	inner := `SELECT ` + clickhouseColumns + ` FROM consents FINAL`
	if cond, condArgs := nonFinalAfter(after, false); cond != "" {
		inner += ` WHERE ` + cond
		args = condArgs
	}
	q := `SELECT ` + clickhouseColumns + ` FROM (` + inner + `) WHERE status IN ? ORDER BY created_at_ms, consent_id`
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	var out []Row
	if err := s.query(ctx, func(r Row) { out = append(out, r) }, q, append(args, readdb.InSet(nonFinalStatuses()))...); err != nil {
		return nil, fmt.Errorf("list non-final consents: %w", err)
	}
	return out, nil
}

// ErasePersonal implements Store as collectionstatus's ClickHouse adapter does: ClickHouse has no
// in-place update but mutations, which finish whenever the server likes, so each affected row is
// written again at its own revision without its personal part. Among versions of equal revision
// ReplacingMergeTree keeps the last inserted, in FINAL reads and in merges alike, so the copy
// wins at once; a newer revision written meanwhile wins over it, as it should. The older copy
// stays on disk until the part merges, sealed under a key that the erasure destroyed.
func (s *ClickHouseStore) ErasePersonal(ctx context.Context, tenant, userUUID string) error {
	if userUUID == "" {
		return nil
	}
	var erased []Row
	err := s.query(ctx, func(r Row) {
		if !r.Personal.IsZero() {
			r.Personal = sealed.Value{}
			erased = append(erased, r)
		}
	}, `SELECT `+clickhouseColumns+` FROM consents FINAL WHERE tenant = ? AND user_uuid = ?`, tenant, userUUID)
	if err != nil {
		return fmt.Errorf("erase the personal parts of user %s's consents: %w", userUUID, err)
	}
	if err := s.insert(ctx, erased); err != nil {
		return fmt.Errorf("erase the personal parts of user %s's consents: %w", userUUID, err)
	}
	return nil
}

// Reset implements Store.
func (s *ClickHouseStore) Reset(ctx context.Context) error {
	if err := s.conn.Exec(ctx, `TRUNCATE TABLE consents`); err != nil {
		return fmt.Errorf("reset consents: %w", err)
	}
	s.memo.Reset()
	return nil
}

func (s *ClickHouseStore) query(ctx context.Context, each func(Row), q string, args ...any) error {
	return readdb.ClickHouseEach(ctx, s.conn, "consents", scanClickHouseRow, each, q, args...)
}

func scanClickHouseRow(rows readdb.Rows) (Row, error) {
	var (
		r                                                  Row
		scope, personal                                    string
		created, updated, started, deadline, authed, expir uint64
	)
	if err := rows.Scan(&r.ConsentID, &r.Tenant, &r.UserUUID, &r.Company, &r.LoginMethod, &r.Status, &scope,
		&r.BankConsentID, &r.ErrorCode, &r.ErrorMessage, &r.RevokeReason, &personal, &created, &updated,
		&started, &deadline, &authed, &expir, &r.Revision); err != nil {
		return Row{}, fmt.Errorf("scan consent: %w", err)
	}
	var err error
	if r.Personal, err = sealed.FromStored([]byte(personal)); err != nil {
		return Row{}, fmt.Errorf("consent %s: %w", r.ConsentID, err)
	}
	r.Scope = decodeScope(scope)
	r.CreatedAt, r.UpdatedAt = readdb.FromUMillis(created), readdb.FromUMillis(updated)
	r.AuthorizationStartedAt, r.AuthorizationDeadline = readdb.FromUMillis(started), readdb.FromUMillis(deadline)
	r.AuthorizedAt, r.ExpiresAt = readdb.FromUMillis(authed), readdb.FromUMillis(expir)
	return r, nil
}
