package eventhistory

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/samla/samla/projections/readdb"
)

// clickhouseSchema is the history's ClickHouse DDL, kept to what 18.16 and current servers
// both accept (String and integer columns only; times as Unix milliseconds). summary is the
// audit summary's JSON, "" for none.
//
// ReplacingMergeTree ORDER BY (stream, revision) collapses a redelivered event into the copy
// already stored; the copies are the same event, so which one survives does not matter. Until
// the server merges them both copies are on disk, so reads (List here, and analysts' queries)
// use FINAL. occurred_at is a MATERIALIZED second-precision DateTime for analysts' time
// functions; it is computed by the server and never inserted.
const clickhouseSchema = `
CREATE TABLE IF NOT EXISTS event_history_v2 (
	tenant         String,
	stream         String,
	revision       UInt64,
	position       UInt64,
	event_id       String,
	type           String,
	schema_version UInt32,
	occurred_at_ms UInt64,
	correlation_id String,
	causation_id   String,
	actor          String,
	summary        String,
	personal_data  String,
	data_subject   String,
	occurred_at    DateTime MATERIALIZED toDateTime(intDiv(occurred_at_ms, 1000))
) ENGINE = ReplacingMergeTree
ORDER BY (stream, revision)`

const clickhouseColumns = `tenant, stream, revision, position, event_id, type, schema_version,
	occurred_at_ms, correlation_id, causation_id, actor, summary, personal_data, data_subject`

// clickhouseAddedColumns are the columns a table created before them gets on opening: its rows
// read the empty string (no personal data known) until a rebuild projects them again.
var clickhouseAddedColumns = []string{"personal_data", "data_subject"}

// ClickHouseStore is the Store on a ClickHouse database.
type ClickHouseStore struct {
	conn driver.Conn
}

var _ Store = (*ClickHouseStore)(nil)

// NewClickHouse creates the history table when missing, drops the first table (which kept
// payloads) and returns the store. The caller keeps ownership of conn.
func NewClickHouse(ctx context.Context, conn driver.Conn) (*ClickHouseStore, error) {
	if err := conn.Exec(ctx, clickhouseSchema); err != nil {
		return nil, fmt.Errorf("migrate clickhouse event_history_v2: %w", err)
	}
	if err := readdb.EnsureClickHouseColumns(ctx, conn, "event_history_v2", clickhouseAddedColumns, "String DEFAULT ''"); err != nil {
		return nil, fmt.Errorf("migrate clickhouse event_history_v2: %w", err)
	}
	if err := conn.Exec(ctx, `DROP TABLE IF EXISTS `+legacyTable); err != nil {
		return nil, fmt.Errorf("drop clickhouse %s: %w", legacyTable, err)
	}
	return &ClickHouseStore{conn: conn}, nil
}

// Insert implements Store with one batched INSERT, appended column by column: a rebuild inserts
// a row per event, and appending each of them value by value (batch.Append) was a tenth of a
// ClickHouse rebuild's CPU.
func (s *ClickHouseStore) Insert(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	n := len(rows)
	var (
		tenant, stream, eventID, typ   = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		correlation, causation, actor  = make([]string, n), make([]string, n), make([]string, n)
		personalData, dataSubject      = make([]string, n), make([]string, n)
		summary                        = make([]json.RawMessage, n)
		revision, position, occurredMs = make([]uint64, n), make([]uint64, n), make([]uint64, n)
		version                        = make([]uint32, n)
	)
	for i, r := range rows {
		if r.SchemaVersion < 0 {
			return fmt.Errorf("insert event history: event history %s/%d: negative schema version %d", r.Stream, r.Revision, r.SchemaVersion)
		}
		tenant[i], stream[i], revision[i], position[i], eventID[i], typ[i] = r.Tenant, r.Stream, r.Revision, r.Position, r.EventID, r.Type
		version[i], occurredMs[i] = uint32(r.SchemaVersion), readdb.UMillis(r.OccurredAt)
		correlation[i], causation[i], actor[i], summary[i] = r.CorrelationID, r.CausationID, r.Actor, r.Summary
		personalData[i], dataSubject[i] = r.PersonalData, r.DataSubject
	}
	// In the order of clickhouseColumns.
	columns := []any{tenant, stream, revision, position, eventID, typ, version, occurredMs, correlation,
		causation, actor, summary, personalData, dataSubject}
	if err := readdb.InsertColumns(ctx, s.conn, "event_history_v2", clickhouseColumns, n, columns); err != nil {
		return fmt.Errorf("insert event history: %w", err)
	}
	return nil
}

// List implements Store. stream is the key's prefix and tenant never changes within a stream,
// so both can be filtered on before FINAL collapses the copies.
func (s *ClickHouseStore) List(ctx context.Context, tenant, stream string, afterRevision *uint64, limit int) ([]Row, error) {
	q := `SELECT ` + clickhouseColumns + ` FROM event_history_v2 FINAL WHERE stream = ? AND tenant = ?`
	args := []any{stream, tenant}
	if afterRevision != nil {
		q += ` AND revision > ?`
		args = append(args, *afterRevision)
	}
	q += ` ORDER BY revision`
	if limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, limit)
	}
	var out []Row
	err := readdb.ClickHouseEach(ctx, s.conn, "event history", func(rows readdb.Rows) (Row, error) {
		var (
			r          Row
			version    uint32
			occurredMs uint64
			summary    string
		)
		if err := rows.Scan(&r.Tenant, &r.Stream, &r.Revision, &r.Position, &r.EventID, &r.Type,
			&version, &occurredMs, &r.CorrelationID, &r.CausationID, &r.Actor, &summary,
			&r.PersonalData, &r.DataSubject); err != nil {
			return Row{}, fmt.Errorf("scan: %w", err)
		}
		r.SchemaVersion = int(version)
		r.OccurredAt = readdb.FromUMillis(occurredMs)
		if summary != "" {
			r.Summary = []byte(summary)
		}
		return r, nil
	}, func(r Row) { out = append(out, r) }, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list event history of %s: %w", stream, err)
	}
	return out, nil
}

// Reset implements Store.
func (s *ClickHouseStore) Reset(ctx context.Context) error {
	if err := s.conn.Exec(ctx, `TRUNCATE TABLE event_history_v2`); err != nil {
		return fmt.Errorf("reset event_history_v2: %w", err)
	}
	return nil
}
