package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"golang.org/x/sync/errgroup"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/metrics"
	"github.com/samla/samla/projections/apikeys"
	"github.com/samla/samla/projections/cancellations"
	"github.com/samla/samla/projections/clientsecurity"
	"github.com/samla/samla/projections/collectiondata"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/consents"
	"github.com/samla/samla/projections/eventhistory"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/users"
)

// ReadModels is every read model of one deployment, on SQLite or on ClickHouse. The projectors
// write to the stores; consumers read through each read model's Reader (collectionstatus.NewReader
// and the like), which implements the port the consumer declares.
type ReadModels struct {
	Status   collectionstatus.Store
	History  eventhistory.Store
	APIKeys  apikeys.Store
	Data     collectiondata.Store
	Users    users.Store
	Consents consents.Store
	// Cancellations keeps the signed PDFs sealed; its Reader opens them with Keys.
	Cancellations cancellations.Store
	// ClientSecurity holds the clients' mTLS certificates and settings (the mTLS checks).
	ClientSecurity clientsecurity.Store

	// Metrics, when set before Projectors is called, is where the projectors that keep metrics
	// of what they fold (consents and cancellations by status and company, authorization and
	// signature latency) record. A
	// rebuild leaves it unset: replayed history is not new activity.
	Metrics *metrics.Metrics

	reg  *eventschema.Registry
	keys eventschema.Keys // seals and opens personal data (crypto-shredding)
	// Where the models live, for a rebuild to build new ones beside them: the data dir of the
	// SQLite models, or the DSN and connection of the ClickHouse ones.
	dataDir       string
	clickhouseDSN string
	conn          driver.Conn
	closers       []func() error
	closed        bool
}

// SQLiteDir is where OpenSQLiteReadModels keeps its files under the data directory.
const SQLiteDir = "readmodels"

// OpenSQLiteReadModels opens (creating and migrating as needed) the embedded read models under
// dataDir/readmodels. Each read model has its own database file, so that the projectors
// never wait for each other's write lock and each model can be deleted and rebuilt alone.
// sealKeys opens the events' personal data and seals what the read models keep of it.
//
// A rebuild that was killed after it had finished its new databases is swapped in here; the
// leftovers of one that had not are removed (finishSQLiteRebuild).
func OpenSQLiteReadModels(dataDir string, sealKeys eventschema.Keys) (*ReadModels, error) {
	return openSQLiteReadModels(dataDir, sealKeys, nil)
}

// openSQLiteReadModels is OpenSQLiteReadModels with the registry reg (a new one when nil): a
// rebuild's models share the served ones' rather than compile every schema again.
func openSQLiteReadModels(dataDir string, sealKeys eventschema.Keys, reg *eventschema.Registry) (*ReadModels, error) {
	if err := finishSQLiteRebuild(dataDir); err != nil {
		return nil, fmt.Errorf("open sqlite read models: %w", err)
	}
	m, err := openSQLiteReadModelsIn(filepath.Join(dataDir, SQLiteDir), sealKeys, reg, readdb.OpenSQLite, false)
	if err != nil {
		return nil, err
	}
	m.dataDir = dataDir
	return m, nil
}

// openSQLiteReadModelsIn opens the read models' databases in dir with openDB, with the registry
// reg (a new one when nil). With fresh, dir is a rebuild's, created empty for these stores
// alone, which then ask their tables only for rows they wrote (readdb.Written).
func openSQLiteReadModelsIn(dir string, sealKeys eventschema.Keys, reg *eventschema.Registry,
	openDB func(string) (*sql.DB, error), fresh bool) (*ReadModels, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create read-model directory: %w", err)
	}
	m, err := newReadModels(sealKeys, reg)
	if err != nil {
		return nil, err
	}
	open := func(name string) (*sql.DB, error) {
		db, err := openDB(filepath.Join(dir, name+".db"))
		if err != nil {
			return nil, err
		}
		m.closers = append(m.closers, db.Close)
		return db, nil
	}
	fail := func(err error) (*ReadModels, error) {
		_ = m.Close()
		return nil, fmt.Errorf("open sqlite read models in %s: %w", dir, err)
	}

	// Each store prepares its hot reads on its database; closers run in reverse, so a store's
	// statements close before its database.
	status, err := openSQLiteStore(open, "collection_status", collectionstatus.NewSQLite, &m.closers)
	if err != nil {
		return fail(err)
	}
	if fresh {
		status.Fresh()
	}
	m.Status = status
	if err := removeSQLiteFiles(dir, legacyHistoryFile); err != nil {
		return fail(err)
	}
	history, err := openSQLiteStore(open, "event_history_v2", eventhistory.NewSQLite, &m.closers)
	if err != nil {
		return fail(err)
	}
	m.History = history
	keys, err := openSQLiteStore(open, "api_keys", apikeys.NewSQLite, &m.closers)
	if err != nil {
		return fail(err)
	}
	m.APIKeys = keys
	data, err := openSQLiteStore(open, "collection_data", collectiondata.NewSQLite, &m.closers)
	if err != nil {
		return fail(err)
	}
	if fresh {
		data.Fresh()
	}
	m.Data = collectiondata.Sealing(data, m.keys)
	userStore, err := openSQLiteStore(open, "users", users.NewSQLite, &m.closers)
	if err != nil {
		return fail(err)
	}
	m.Users = userStore
	consentStore, err := openSQLiteStore(open, "consents", consents.NewSQLite, &m.closers)
	if err != nil {
		return fail(err)
	}
	m.Consents = consentStore
	cancellationStore, err := openSQLiteStore(open, "cancellations", cancellations.NewSQLite, &m.closers)
	if err != nil {
		return fail(err)
	}
	m.Cancellations = cancellationStore
	clientSecurity, err := openSQLiteStore(open, "client_security", clientsecurity.NewSQLite, &m.closers)
	if err != nil {
		return fail(err)
	}
	m.ClientSecurity = clientSecurity
	return m, nil
}

// openSQLiteStore opens the database file name and builds a store on it whose Close is added
// to closers, after the database's.
func openSQLiteStore[S interface{ Close() error }](open func(string) (*sql.DB, error), name string,
	newStore func(context.Context, *sql.DB) (S, error), closers *[]func() error) (S, error) {
	var zero S
	db, err := open(name)
	if err != nil {
		return zero, err
	}
	// Migrations are a few local statements; nothing to cancel.
	s, err := newStore(context.Background(), db)
	if err != nil {
		return zero, err
	}
	*closers = append(*closers, s.Close)
	return s, nil
}

// legacyHistoryFile is the database of the first audit history, which kept whole payloads
// (minus their "personal" member). The history now lives in event_history_v2.db and is projected
// again from the start of the topics; the old file is deleted rather than left on disk, where its
// payloads would outlive an erasure.
const legacyHistoryFile = "event_history"

// removeSQLiteFiles deletes a read model's database file and its WAL and shared-memory files,
// when they exist.
func removeSQLiteFiles(dir, name string) error {
	for _, suffix := range []string{".db", ".db-wal", ".db-shm"} {
		path := filepath.Join(dir, name+suffix)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
	}
	return nil
}

// OpenClickHouseReadModels connects to ClickHouse (creating the DSN's database if missing) and
// migrates every read model's table. The stores share one connection pool. keys is as
// OpenSQLiteReadModels's sealKeys: ClickHouse holds personal data only sealed.
func OpenClickHouseReadModels(ctx context.Context, dsn string, keys eventschema.Keys) (*ReadModels, error) {
	return openClickHouseReadModels(ctx, dsn, keys, nil, false)
}

// openClickHouseReadModels is OpenClickHouseReadModels with the registry reg (a new one when
// nil); with fresh, the DSN's database is a rebuild's, created empty for these stores alone,
// which then remember what they wrote instead of reading it back (readdb.Memo).
func openClickHouseReadModels(ctx context.Context, dsn string, keys eventschema.Keys, reg *eventschema.Registry,
	fresh bool) (*ReadModels, error) {
	m, err := newReadModels(keys, reg)
	if err != nil {
		return nil, err
	}
	conn, err := readdb.OpenClickHouse(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("open clickhouse read models: %w", err)
	}
	m.closers = append(m.closers, conn.Close)
	if !fresh {
		// A swap that died midway set served tables aside: they come back before the stores
		// create the tables they miss (empty, and the projections would never refill them).
		live, err := clickhouseDatabase(dsn)
		if err == nil {
			err = restoreClickHouseAside(ctx, conn, live)
		}
		if err != nil {
			_ = m.Close()
			return nil, fmt.Errorf("open clickhouse read models: %w", err)
		}
	}
	if err := m.migrateClickHouse(ctx, conn, fresh); err != nil {
		_ = m.Close()
		return nil, fmt.Errorf("open clickhouse read models: %w", err)
	}
	m.clickhouseDSN, m.conn = dsn, conn
	return m, nil
}

// migrateClickHouse creates (or migrates) every read model's tables, the read models side by
// side: each is a few DDL round trips that ClickHouse takes some milliseconds to answer, and a
// rebuild creates them all anew (one after the other, the tables and the swap were a tenth of a
// rebuild of 72k events).
func (m *ReadModels) migrateClickHouse(ctx context.Context, conn driver.Conn, fresh bool) error {
	var (
		status       *collectionstatus.ClickHouseStore
		data         *collectiondata.ClickHouseStore
		userStore    *users.ClickHouseStore
		consentStore *consents.ClickHouseStore
		history      *eventhistory.ClickHouseStore
		apiKeys      *apikeys.ClickHouseStore
		cancelStore  *cancellations.ClickHouseStore
		security     *clientsecurity.ClickHouseStore
	)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { status, err = collectionstatus.NewClickHouse(ctx, conn); return err })
	g.Go(func() (err error) { history, err = eventhistory.NewClickHouse(ctx, conn); return err })
	g.Go(func() (err error) { apiKeys, err = apikeys.NewClickHouse(ctx, conn); return err })
	g.Go(func() (err error) { data, err = collectiondata.NewClickHouse(ctx, conn); return err })
	g.Go(func() (err error) { userStore, err = users.NewClickHouse(ctx, conn); return err })
	g.Go(func() (err error) { consentStore, err = consents.NewClickHouse(ctx, conn); return err })
	g.Go(func() (err error) { cancelStore, err = cancellations.NewClickHouse(ctx, conn); return err })
	g.Go(func() (err error) { security, err = clientsecurity.NewClickHouse(ctx, conn); return err })
	if err := g.Wait(); err != nil {
		return err
	}
	if fresh {
		status.Fresh()
		data.Fresh()
		userStore.Fresh()
		consentStore.Fresh()
	}
	m.Status, m.History, m.APIKeys = status, history, apiKeys
	m.Data = collectiondata.Sealing(data, m.keys)
	m.Users, m.Consents = userStore, consentStore
	m.Cancellations, m.ClientSecurity = cancelStore, security
	return nil
}

// newReadModels is the empty bundle, with the registry reg (a new one when nil: compiling every
// schema takes tens of milliseconds, which a rebuild's start and swap need not spend again).
func newReadModels(keys eventschema.Keys, reg *eventschema.Registry) (*ReadModels, error) {
	if keys == nil {
		return nil, errors.New("read models: no key store to open and seal personal data with")
	}
	if reg == nil {
		var err error
		if reg, err = eventschema.NewRegistry(); err != nil {
			return nil, fmt.Errorf("event schema registry: %w", err)
		}
	}
	return &ReadModels{reg: reg, keys: keys}, nil
}

// Keys is the key store the read models seal and open personal data with: their readers take
// it too (collectionstatus.NewReader and the like).
func (m *ReadModels) Keys() eventschema.Keys { return m.keys }

// Projectors returns one projector per read model, writing to these stores. Each sees the
// events opened (Opening): the personal data plain, or absent for an erased subject. The audit
// history opens none: it records whose personal data each sealed event held and summarises what
// the event says publicly.
func (m *ReadModels) Projectors() []Projector { return m.projectors(m.reg) }

// projectors are Projectors decoding events with dec (a rebuild's decodes them once for all).
func (m *ReadModels) projectors(dec readdb.Decoder) []Projector {
	return []Projector{
		Opening(collectionstatus.NewProjector(dec, m.Status, m.keys), m.keys),
		eventhistory.NewProjector(m.reg, m.History),
		Opening(apikeys.NewProjector(dec, m.APIKeys), m.keys),
		Opening(collectiondata.NewProjector(dec, m.Data), m.keys),
		Opening(users.NewProjector(dec, m.Users, m.keys), m.keys),
		Opening(consents.NewProjector(dec, m.Consents, m.keys, m.consentMetrics()), m.keys),
		Opening(cancellations.NewProjector(dec, m.Cancellations, m.keys, m.cancellationMetrics()), m.keys),
		// Certificates and settings name no person: the events it folds carry no personal data.
		clientsecurity.NewProjector(dec, m.ClientSecurity),
	}
}

// consentMetrics is where the consents projector records: nowhere without Metrics.
func (m *ReadModels) consentMetrics() consents.Metrics {
	if m.Metrics == nil {
		return consents.Metrics{}
	}
	return consents.Metrics{Statuses: m.Metrics.ConsentStatuses, Authorization: m.Metrics.ConsentAuthorization}
}

// cancellationMetrics is where the cancellations projector records: nowhere without Metrics.
func (m *ReadModels) cancellationMetrics() cancellations.Metrics {
	if m.Metrics == nil {
		return cancellations.Metrics{}
	}
	return cancellations.Metrics{Statuses: m.Metrics.CancellationStatuses, Signature: m.Metrics.CancellationSignature}
}

// Close releases the databases. It is safe to call more than once.
func (m *ReadModels) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	for i := len(m.closers) - 1; i >= 0; i-- {
		if err := m.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close read models: %w", err)
	}
	return nil
}
