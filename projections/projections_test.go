package projections_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/platform/metrics"
	"github.com/samla/samla/projections"
	"github.com/samla/samla/projections/cancellations"
	"github.com/samla/samla/projections/clientsecurity"
	"github.com/samla/samla/projections/collectiondata"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/consents"
	"github.com/samla/samla/projections/eventhistory"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/projections/users"
	"github.com/samla/samla/query"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

type recordingProjector struct {
	name    string
	batches [][]eventschema.Envelope
	err     error
}

func (p *recordingProjector) Name() string { return p.name }
func (p *recordingProjector) Handle(_ context.Context, batch []eventschema.Envelope) error {
	if p.err != nil {
		return p.err
	}
	p.batches = append(p.batches, batch)
	return nil
}

// fakeConsume delivers batches like platform/kafka.Consume: in order, stopping at the first
// handler error.
func fakeConsume(groups *[]string, batches ...[]eventschema.Envelope) projections.ConsumeFunc {
	return func(ctx context.Context, groupID string, handle func(context.Context, []eventschema.Envelope) error) error {
		*groups = append(*groups, groupID)
		for _, b := range batches {
			if err := handle(ctx, b); err != nil {
				return err
			}
		}
		return nil
	}
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

func TestRunRecordsMetricsAndUsesItsOwnGroup(t *testing.T) {
	log := eventlog.New(t)
	now := time.Now()
	a := log.Append("acme", client.StreamName("acme"), now.Add(-time.Hour), client.Registered{ClientID: "acme", Name: "A", RegisteredAt: now})
	b := log.Append("acme", client.StreamName("acme"), now.Add(-time.Minute), client.APIKeyIssued{KeyID: "k", KeyHash: client.HashAPIKey("x"), IssuedAt: now})
	c := log.Append("acme", client.StreamName("acme"), now.Add(-2*time.Minute), client.APIKeyRevoked{KeyID: "k", RevokedAt: now})

	p := &recordingProjector{name: "probe"}
	m := metrics.New(prometheus.NewRegistry())
	var groups []string
	err := projections.Run(testCtx(t), p, fakeConsume(&groups, []eventschema.Envelope{a, b}, nil, []eventschema.Envelope{c}), m)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !reflect.DeepEqual(groups, []string{"samla.projection.probe"}) {
		t.Fatalf("consumer groups = %v", groups)
	}
	if len(p.batches) != 2 {
		t.Fatalf("projector saw %d batches, want 2 (the empty one is skipped)", len(p.batches))
	}
	if got := counter(t, m.ProjectionEvents.WithLabelValues("probe")); got != 3 {
		t.Fatalf("ProjectionEvents = %v, want 3", got)
	}
	// The lag is the age of the last event of the last batch: two minutes.
	if got := gauge(t, m.ProjectionLag.WithLabelValues("probe")); got < 119 || got > 180 {
		t.Fatalf("ProjectionLag = %vs, want about 120s", got)
	}
}

func TestRunStopsOnHandlerError(t *testing.T) {
	log := eventlog.New(t)
	e := log.Append("acme", client.StreamName("acme"), time.Now(), client.Registered{ClientID: "acme", Name: "A", RegisteredAt: time.Now()})
	boom := errors.New("read model down")
	p := &recordingProjector{name: "probe", err: boom}
	m := metrics.New(prometheus.NewRegistry())
	var groups []string
	err := projections.Run(testCtx(t), p, fakeConsume(&groups, []eventschema.Envelope{e}, []eventschema.Envelope{e}), m)
	if !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want the handler's error", err)
	}
	if got := counter(t, m.ProjectionEvents.WithLabelValues("probe")); got != 0 {
		t.Fatalf("a failed batch was counted: %v", got)
	}
	// nil metrics are allowed.
	if err := projections.Run(testCtx(t), &recordingProjector{name: "quiet"}, fakeConsume(&groups, []eventschema.Envelope{e}), nil); err != nil {
		t.Fatalf("Run without metrics: %v", err)
	}
}

// finals cycles the outcomes the generated collections end in; "" leaves one running.
var finals = []collection.Status{collection.StatusCompleted, "", collection.StatusFailed,
	collection.StatusAuthenticationTimeout, collection.StatusLogin}

// world appends n collections (two tenants) and the tenants' keys to log and returns what the
// read models must show.
type world struct {
	statuses   map[string]collectionstatus.Row
	nonFinal   []string
	keys       map[string]string // plain key → client, for active keys
	revoked    []string
	historyLen map[string]int // stream → events
	tenantOf   map[string]string
	data       map[string]collectiondata.Row // collection → its data row, for every collection
	users      map[string]users.Row          // user → its row, Personal only marked (sealed bytes vary)
	externalID map[string]string             // reservation key → the live user that holds it
	consents   map[string]consents.Row       // consent → its row, Personal only marked non-zero when sealed
	// cancellations: document → its row; signedPDF: document → the PDF its Reader serves.
	cancellations map[string]cancellations.Row
	signedPDF     map[string][]byte
}

// sealedMark stands for a sealed value in the world's rows: verify checks whether a stored one is
// there, and under whose subject, since the sealed bytes vary.
var sealedMark = func() sealed.Value {
	v, err := sealed.Seal(context.Background(), keystore.NewMemory(), "mark", []byte("x"))
	if err != nil {
		panic(err)
	}
	return v
}()

// worldSecret names the world's externalId reservations.
var worldSecret = []byte("world-secret-0123456789abcdef0123456")

func buildWorld(log *eventlog.Log, n int) world {
	w := world{statuses: map[string]collectionstatus.Row{}, keys: map[string]string{},
		historyLen: map[string]int{}, tenantOf: map[string]string{}, data: map[string]collectiondata.Row{},
		users: map[string]users.Row{}, externalID: map[string]string{}, consents: map[string]consents.Row{},
		cancellations: map[string]cancellations.Row{}, signedPDF: map[string][]byte{}}
	t0 := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	for _, tenant := range []string{"acme", "other"} {
		s := client.StreamName(tenant)
		log.Append(tenant, s, t0, client.Registered{ClientID: tenant, Name: tenant, RegisteredAt: t0})
		for k := range 3 {
			plain := fmt.Sprintf("%s-key-%d", tenant, k)
			log.Append(tenant, s, t0, client.APIKeyIssued{KeyID: fmt.Sprint(k), KeyHash: client.HashAPIKey(plain), IssuedAt: t0})
			w.keys[plain] = tenant
		}
		log.Append(tenant, s, t0, client.APIKeyRevoked{KeyID: "1", RevokedAt: t0})
		delete(w.keys, tenant+"-key-1")
		w.revoked = append(w.revoked, tenant+"-key-1")
		w.historyLen[s] = 5
		w.tenantOf[s] = tenant
		// Two users, the first deleted and its externalId taken by the second.
		first, second := fmt.Sprintf("u-%s-1", tenant), fmt.Sprintf("u-%s-2", tenant)
		key := user.ExternalIDKey(worldSecret, tenant, "customer-42")
		reservation := user.ReservationStreamName(key)
		for i, id := range []string{first, second} {
			at := t0.Add(time.Duration(i) * time.Hour)
			log.Append(tenant, reservation, at, user.ExternalIDReserved{ClientID: tenant, ReservedAt: at,
				Personal: &user.ReservedBy{UserUUID: id, RequestHash: "h"}})
			log.Append(tenant, user.StreamName(id), at, user.Created{UserUUID: id, ClientID: tenant, CreatedAt: at,
				Personal: &user.CreatedPerson{ExternalID: "customer-42", RequestHash: "h"}})
			w.users[id] = users.Row{UserUUID: id, Tenant: tenant, Personal: []byte("sealed"), CreatedAt: at}
			w.historyLen[user.StreamName(id)], w.tenantOf[user.StreamName(id)] = 1, tenant
			if i == 0 {
				deleted := at.Add(time.Minute)
				log.Append(tenant, user.StreamName(id), deleted, user.Deleted{DeletedAt: deleted})
				log.Append(tenant, reservation, deleted, user.ExternalIDReleased{ReleasedAt: deleted, Personal: &user.ReleasedBy{UserUUID: id}})
				w.users[id] = users.Row{UserUUID: id, Tenant: tenant, CreatedAt: at, DeletedAt: deleted, Revision: 1}
				w.historyLen[user.StreamName(id)] = 2
			}
		}
		w.externalID[key] = second
		w.historyLen[reservation], w.tenantOf[reservation] = 3, tenant
		// Consents: the deleted user's revoked with it; the second user's authorized, and one
		// awaiting its authorization with the EID order sealed.
		for i, owner := range []string{first, second, second} {
			id := fmt.Sprintf("k-%s-%d", tenant, i)
			stream := consent.StreamName(id)
			at := t0.Add(time.Duration(i) * time.Minute)
			log.Append(tenant, stream, at, consent.Created{ConsentID: id, ClientID: tenant, UserUUID: owner, Company: "se-demo-bank",
				LoginMethod: "BANKID", Scope: consent.AllScopes(), CreatedAt: at, Personal: &consent.CreatedPerson{PersonalNumber: "199001010017"}})
			started := at.Add(time.Second)
			log.Append(tenant, stream, started, consent.AuthorizationStarted{At: started, Deadline: started.Add(30 * time.Second),
				BankConsentID: "bank-" + id, Personal: &consent.AuthorizationPersonal{QRStartToken: "qr", QRStartSecret: "secret"}})
			row := consents.Row{ConsentID: id, Tenant: tenant, UserUUID: owner, Company: "se-demo-bank", LoginMethod: "BANKID",
				Status: "AWAITING_AUTHORIZATION", Scope: []string{"CHECKING_ACCOUNTS", "CREDIT_CARDS", "SAVINGS_ACCOUNTS"},
				BankConsentID: "bank-" + id, CreatedAt: at, UpdatedAt: started, AuthorizationStartedAt: started,
				AuthorizationDeadline: started.Add(30 * time.Second), Revision: 1}
			switch i {
			case 0:
				log.Append(tenant, stream, at.Add(time.Hour), consent.Revoked{At: at.Add(time.Hour), Reason: consent.RevokedUserDeleted})
				row.Status, row.RevokeReason, row.UpdatedAt, row.Revision = "REVOKED", "USER_DELETED", at.Add(time.Hour), 2
			case 1:
				authorized := started.Add(5 * time.Second)
				log.Append(tenant, stream, authorized, consent.Authorized{AuthorizedAt: authorized, ExpiresAt: authorized.Add(time.Hour)})
				row.Status, row.AuthorizedAt, row.ExpiresAt, row.UpdatedAt, row.Revision = "AUTHORIZED", authorized, authorized.Add(time.Hour), authorized, 2
			default:
				row.Personal = sealedMark
			}
			w.consents[id] = row
			w.historyLen[stream], w.tenantOf[stream] = int(row.Revision)+1, tenant
		}
		// Cancellations of the second user's collection: one signed and sealed, one pending; and
		// one of a collection without a user, withdrawn.
		for i, owner := range []string{second, second, ""} {
			id := fmt.Sprintf("d-%s-%d", tenant, i)
			collectionID := "c-cancelled-" + tenant
			if owner == "" {
				collectionID = "c-userless-" + tenant
			}
			stream := cancellation.StreamName(id)
			at := t0.Add(time.Duration(i) * time.Minute)
			log.Append(tenant, stream, at, cancellation.Requested{DocumentID: id, ClientID: tenant, CollectionID: collectionID,
				UserUUID: owner, Company: "se-demo-insurer", InsuranceID: "ins-" + id, DeliveryMethod: cancellation.DeliverySMS,
				TemplateVersion: 1, CancellationDate: "2026-06-01", RequestedAt: at,
				Personal: &cancellation.Requester{HolderName: "Tolvan", PhoneNumber: "46701234567"}})
			row := cancellations.Row{DocumentID: id, Tenant: tenant, CollectionID: collectionID, UserUUID: owner,
				Company: "se-demo-insurer", InsuranceID: "ins-" + id, DeliveryMethod: "SMS", TemplateVersion: 1,
				Status: "PREPARATION", RequestedAt: at, UpdatedAt: at}
			if i == 2 {
				log.Append(tenant, stream, at.Add(time.Second), cancellation.Canceled{At: at.Add(time.Second), Reason: cancellation.CanceledByClient})
				row.Status, row.CancelReason, row.EndedAt, row.UpdatedAt, row.Revision = "CANCELED", "CLIENT", at.Add(time.Second), at.Add(time.Second), 1
			} else {
				sent := at.Add(time.Second)
				log.Append(tenant, stream, sent, cancellation.Sent{At: sent, Deadline: sent.Add(time.Hour), ProcessID: "p-" + id,
					DocumentSHA256: strings.Repeat("0", 64), DocumentSize: 10})
				row.Status, row.SentAt, row.Deadline, row.UpdatedAt, row.Revision = "PENDING", sent, sent.Add(time.Hour), sent, 1
			}
			if i == 0 {
				signed, pdf := at.Add(time.Minute), []byte("%PDF signed by Tolvan "+id)
				log.Append(tenant, stream, signed, cancellation.Signed{SignedAt: signed})
				log.Append(tenant, stream, signed, cancellation.Sealed{SealedAt: signed, SHA256: strings.Repeat("1", 64), Size: len(pdf),
					Personal: &cancellation.SealedPersonal{Document: pdf}})
				row.Status, row.IsSignedAndSealed, row.SignedAt, row.EndedAt, row.UpdatedAt, row.Revision = "CLOSED", true, signed, signed, signed, 3
				w.signedPDF[id] = pdf
			}
			w.cancellations[id] = row
			w.historyLen[stream], w.tenantOf[stream] = int(row.Revision)+1, tenant
		}
	}
	for i := range n {
		tenant := []string{"acme", "other"}[i%2]
		id := fmt.Sprintf("c-%05d", i)
		stream := collection.StreamName(id)
		at := t0.Add(time.Duration(i) * time.Second)
		log.Append(tenant, stream, at, collection.Started{CollectionID: id, ClientID: tenant, Company: "se-demo-insurer",
			Product: collection.ProductInsurance, LoginMethod: "BANKID", APIVersion: "2026-04-01", StartedAt: at,
			Personal: &collection.StartedPerson{PersonalNumber: "199001010017"}})
		log.Append(tenant, stream, at.Add(time.Millisecond), collection.Claimed{WorkerID: "w", ClaimedAt: at.Add(time.Millisecond)})
		final := finals[i%len(finals)]
		row := collectionstatus.Row{CollectionID: id, Tenant: tenant, Company: "se-demo-insurer", Product: "INSURANCE",
			LoginMethod: "BANKID", APIVersion: "2026-04-01", Status: "RUNNING",
			CreatedAt: at, UpdatedAt: at.Add(time.Millisecond), Revision: 1}
		events := 2
		if final != "" { // "" stays RUNNING after the claim
			log.Append(tenant, stream, at.Add(2*time.Millisecond), collection.StatusChanged{From: collection.StatusRunning,
				To: collection.StatusLogin, ExtraInformation: map[string]any{"MESSAGE": id}, ChangedAt: at.Add(2 * time.Millisecond)})
			row.Status, row.ExtraInformation, row.UpdatedAt, row.Revision = "LOGIN", map[string]any{"MESSAGE": id}, at.Add(2*time.Millisecond), 2
			events = 3
		}
		data := collectiondata.Row{CollectionID: id, Tenant: tenant, Company: "se-demo-insurer", Product: "INSURANCE",
			Status: row.Status, UpdatedAt: row.UpdatedAt, Revision: row.Revision}
		if row.Status == "RUNNING" {
			// The data read model skips the claim: its row reflects the started event.
			data.UpdatedAt, data.Revision = at, 0
		}
		if final == collection.StatusCompleted {
			// Completed collections collected something, which only the data read model shows.
			ins := collection.Insurance{ID: "ins-" + id, InsuranceType: "HOME"}
			log.Append(tenant, stream, at.Add(2500*time.Microsecond), collection.InsurancesCollected{
				InsuranceCount: 1, CollectedAt: at.Add(2500 * time.Microsecond),
				Personal: &collection.InsuranceRecords{Insurances: []collection.Insurance{ins},
					HolderNames: map[string]string{ins.ID: "Tolvan " + id}}})
			data.Content.Insurances = []collection.Insurance{ins}
			data.Personal.HolderNames = map[string]string{ins.ID: "Tolvan " + id}
			events++
		}
		if final != "" && final != collection.StatusLogin {
			log.Append(tenant, stream, at.Add(3*time.Millisecond), collection.StatusChanged{From: collection.StatusLogin,
				To: final, ChangedAt: at.Add(3 * time.Millisecond)})
			row.Status, row.ExtraInformation, row.UpdatedAt, row.Revision = string(final), nil, at.Add(3*time.Millisecond), uint64(events)
			data.Status, data.UpdatedAt, data.Revision = string(final), row.UpdatedAt, row.Revision
			events++
		}
		w.data[id] = data
		w.statuses[id] = row
		w.historyLen[stream] = events
		w.tenantOf[stream] = tenant
		if !collection.Status(row.Status).IsFinal() {
			w.nonFinal = append(w.nonFinal, id)
		}
	}
	return w
}

// verify checks the read models against the world.
func verify(t *testing.T, m *projections.ReadModels, w world) {
	t.Helper()
	ctx := testCtx(t)
	ids := make([]string, 0, len(w.statuses))
	for id := range w.statuses {
		ids = append(ids, id)
	}
	got, err := m.Status.GetMany(ctx, ids)
	if err != nil {
		t.Fatalf("GetMany: %v", err)
	}
	if !reflect.DeepEqual(got, w.statuses) {
		for id, want := range w.statuses {
			if !reflect.DeepEqual(got[id], want) {
				t.Fatalf("status of %s\n got %#v\nwant %#v", id, got[id], want)
			}
		}
		t.Fatalf("GetMany returned %d rows, want %d", len(got), len(w.statuses))
	}
	nonFinal, err := m.Status.ListNonFinal(ctx, nil, 0)
	if err != nil {
		t.Fatalf("ListNonFinal: %v", err)
	}
	var nonFinalIDs []string
	for _, r := range nonFinal {
		nonFinalIDs = append(nonFinalIDs, r.CollectionID)
	}
	sort.Strings(nonFinalIDs)
	if !reflect.DeepEqual(nonFinalIDs, w.nonFinal) {
		t.Fatalf("ListNonFinal = %d ids, want %d", len(nonFinalIDs), len(w.nonFinal))
	}
	checked := 0
	for stream, n := range w.historyLen {
		// A sample keeps the ClickHouse run short (one FINAL query per stream); the map's
		// random order makes it a different sample each run, and client streams always count.
		if checked++; checked%7 != 0 && eventschema.Category(stream) != "client" {
			continue
		}
		rows, err := m.History.List(ctx, w.tenantOf[stream], stream, nil, 0)
		if err != nil {
			t.Fatalf("List(%s): %v", stream, err)
		}
		if len(rows) != n {
			t.Fatalf("history of %s has %d events, want %d", stream, len(rows), n)
		}
	}
	checked = 0
	for id, want := range w.data {
		// A sample again: one FINAL query per collection.
		if checked++; checked%7 != 0 && id != "c-00000" {
			continue
		}
		got, err := m.Data.Get(ctx, want.Tenant, id)
		if err != nil {
			t.Fatalf("data of %s: %v", id, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("data of %s\n got %#v\nwant %#v", id, got, want)
		}
	}
	for id, want := range w.users {
		got, err := m.Users.Get(ctx, want.Tenant, id)
		if err != nil {
			t.Fatalf("user %s: %v", id, err)
		}
		if (got.Personal != nil) != (want.Personal != nil) || (got.Personal != nil && !eventschema.IsSealed(got.Personal)) {
			t.Fatalf("user %s keeps personal data %q", id, got.Personal)
		}
		got.Personal = want.Personal
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("user %s\n got %#v\nwant %#v", id, got, want)
		}
	}
	for id, want := range w.consents {
		got, err := m.Consents.Get(ctx, want.Tenant, id)
		if err != nil {
			t.Fatalf("consent %s: %v", id, err)
		}
		if got.Personal.IsZero() != want.Personal.IsZero() || (!got.Personal.IsZero() && got.Personal.Subject() != "user-"+want.UserUUID) {
			t.Fatalf("consent %s keeps personal data sealed under %q", id, got.Personal.Subject())
		}
		got.Personal = want.Personal
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("consent %s\n got %#v\nwant %#v", id, got, want)
		}
	}
	cancelReader := cancellations.NewReader(m.Cancellations, m.Keys())
	for id, want := range w.cancellations {
		got, err := m.Cancellations.Get(ctx, want.Tenant, id)
		if err != nil {
			t.Fatalf("cancellation %s: %v", id, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("cancellation %s\n got %#v\nwant %#v", id, got, want)
		}
		pdf, err := cancelReader.SignedDocument(ctx, want.Tenant, id)
		if wantPDF, ok := w.signedPDF[id]; ok && (err != nil || string(pdf) != string(wantPDF)) {
			t.Fatalf("signed document of %s = %q, %v; want %q", id, pdf, err, wantPDF)
		} else if !ok && !errors.Is(err, query.ErrNoSignedDocument) {
			t.Fatalf("signed document of %s = %q, %v; want none", id, pdf, err)
		}
	}
	for key, id := range w.externalID {
		got, err := m.Users.GetExternalID(ctx, w.users[id].Tenant, key)
		if err != nil || got.Released {
			t.Fatalf("reservation %s = %+v, %v; want held by %s", key, got, err, id)
		}
		holder, erased, err := got.Holder.Open(ctx, m.Keys())
		if err != nil || erased || !strings.Contains(string(holder), id) {
			t.Fatalf("reservation %s held by %s (erased %v, %v); want %s", key, holder, erased, err, id)
		}
	}
	for plain, tenant := range w.keys {
		if got, err := m.APIKeys.Lookup(ctx, client.HashAPIKey(plain), time.Now()); err != nil || got.ClientID != tenant {
			t.Fatalf("Lookup(%s) = %+v, %v; want %s", plain, got, err, tenant)
		}
	}
	for _, plain := range w.revoked {
		if _, err := m.APIKeys.Lookup(ctx, client.HashAPIKey(plain), time.Now()); !errors.Is(err, readdb.ErrNotFound) {
			t.Fatalf("revoked key %s: %v", plain, err)
		}
	}
}

// exercise runs the same scenario on any ReadModels: consume through Run with redelivery, then
// rebuild over left-over junk, then rebuild again.
func exercise(t *testing.T, m *projections.ReadModels, collections int) {
	log := eventlog.New(t)
	w := buildWorld(log, collections)
	all := log.All()

	names := map[string]bool{}
	for _, p := range m.Projectors() {
		names[p.Name()] = true
	}
	// event-history-v2: the history of audit summaries is projected by a consumer group of its own;
	// users-v2: so are the users, since reservations keep their holders sealed.
	if !reflect.DeepEqual(names, map[string]bool{"collection-status": true, "event-history-v2": true, "api-keys": true,
		"collection-data": true, "users-v2": true, "consents": true, "cancellations": true, "client-security": true}) {
		t.Fatalf("projector names = %v", names)
	}

	// Through Run, in batches of 97 with the second batch delivered twice and the whole log
	// delivered again at the end (a consumer that lost its offsets).
	var batches [][]eventschema.Envelope
	for i := 0; i < len(all); i += 97 {
		batches = append(batches, all[i:min(i+97, len(all))])
		if i == 97 {
			batches = append(batches, all[i:min(i+97, len(all))])
		}
	}
	batches = append(batches, all)
	var groups []string
	for _, p := range m.Projectors() {
		if err := projections.Run(testCtx(t), p, fakeConsume(&groups, batches...), nil); err != nil {
			t.Fatalf("Run %s: %v", p.Name(), err)
		}
	}
	verify(t, m, w)

	// Junk that is not in the event store must be gone after a rebuild.
	junk := collectionstatus.Row{CollectionID: "c-junk", Tenant: "acme", Status: "RUNNING", Revision: 99}
	if err := m.Status.Upsert(testCtx(t), []collectionstatus.Row{junk}); err != nil {
		t.Fatal(err)
	}
	junkData := collectiondata.Row{CollectionID: "c-junk", Tenant: "acme", Status: "COMPLETED", Revision: 99}
	junkDoc := collectiondata.Document{CollectionID: "c-junk", DocumentID: "d-junk", Tenant: "acme", Revision: 99}
	if err := m.Data.Upsert(testCtx(t), []collectiondata.Row{junkData}, []collectiondata.Document{junkDoc}); err != nil {
		t.Fatal(err)
	}
	if err := m.Users.Upsert(testCtx(t), []users.Row{{UserUUID: "u-junk", Tenant: "acme", Revision: 99}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Consents.Upsert(testCtx(t), []consents.Row{{ConsentID: "k-junk", Tenant: "acme", UserUUID: "u", Status: "INITIATED", Revision: 99}}); err != nil {
		t.Fatal(err)
	}
	junkCancellation := cancellations.Row{DocumentID: "d-junk", Tenant: "acme", CollectionID: "c", Status: "PENDING", Revision: 99}
	if err := m.Cancellations.Upsert(testCtx(t), []cancellations.Row{junkCancellation},
		[]cancellations.Document{{DocumentID: "d-junk", Tenant: "acme", Revision: 99}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		n, err := projections.Rebuild(testCtx(t), log, m)
		if err != nil {
			t.Fatalf("Rebuild: %v", err)
		}
		if n != len(all) {
			t.Fatalf("Rebuild replayed %d events, want %d", n, len(all))
		}
		verify(t, m, w)
		if _, err := m.Status.Get(testCtx(t), "acme", "c-junk"); !errors.Is(err, readdb.ErrNotFound) {
			t.Fatalf("junk row survived the rebuild: %v", err)
		}
		if _, err := m.Data.Get(testCtx(t), "acme", "c-junk"); !errors.Is(err, readdb.ErrNotFound) {
			t.Fatalf("junk data row survived the rebuild: %v", err)
		}
		if _, err := m.Data.Document(testCtx(t), "acme", "c-junk", "d-junk"); !errors.Is(err, readdb.ErrNotFound) {
			t.Fatalf("junk document survived the rebuild: %v", err)
		}
		if _, err := m.Users.Get(testCtx(t), "acme", "u-junk"); !errors.Is(err, readdb.ErrNotFound) {
			t.Fatalf("junk user survived the rebuild: %v", err)
		}
		if _, err := m.Consents.Get(testCtx(t), "acme", "k-junk"); !errors.Is(err, readdb.ErrNotFound) {
			t.Fatalf("junk consent survived the rebuild: %v", err)
		}
		if _, err := m.Cancellations.Get(testCtx(t), "acme", "d-junk"); !errors.Is(err, readdb.ErrNotFound) {
			t.Fatalf("junk cancellation survived the rebuild: %v", err)
		}
		if _, err := m.Cancellations.Document(testCtx(t), "acme", "d-junk"); !errors.Is(err, readdb.ErrNotFound) {
			t.Fatalf("junk cancellation document survived the rebuild: %v", err)
		}
	}
}

func TestSQLiteReadModels(t *testing.T) {
	dir := t.TempDir()
	m, err := projections.OpenSQLiteReadModels(dir, keystore.NewMemory())
	if err != nil {
		t.Fatalf("OpenSQLiteReadModels: %v", err)
	}
	exercise(t, m, 700) // more than one rebuild batch of events
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	// Reopening runs the migrations again and finds the data.
	m, err = projections.OpenSQLiteReadModels(dir, keystore.NewMemory())
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer func() { _ = m.Close() }()
	if r, err := m.Status.Get(testCtx(t), "acme", "c-00000"); err != nil || r.Status != "COMPLETED" {
		t.Fatalf("after reopen: %+v, %v", r, err)
	}
}

// TestSQLiteReadModelsDeleteTheHistoryThatKeptPayloads: a data dir from before the audit
// summaries has the first history's database, whose payloads showed collected values; opening
// the read models deletes it (and its WAL) and starts event_history_v2 empty, for the new
// projection to fill from the start of the topics.
func TestSQLiteReadModelsDeleteTheHistoryThatKeptPayloads(t *testing.T) {
	dir := t.TempDir()
	legacy := filepath.Join(dir, projections.SQLiteDir, "event_history")
	if err := os.MkdirAll(filepath.Dir(legacy), 0o750); err != nil {
		t.Fatal(err)
	}
	db, err := readdb.OpenSQLite(legacy + ".db")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE event_history (stream TEXT, revision INTEGER, payload TEXT)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO event_history VALUES ('collection-c1', 0, '{"requestHash":"9f2c"}')`); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(legacy+".db-wal", []byte("old frames"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	m, err := projections.OpenSQLiteReadModels(dir, keystore.NewMemory())
	if err != nil {
		t.Fatalf("OpenSQLiteReadModels: %v", err)
	}
	defer func() { _ = m.Close() }()
	for _, suffix := range []string{".db", ".db-wal", ".db-shm"} {
		if _, err := os.Stat(legacy + suffix); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there: %v", legacy+suffix, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, projections.SQLiteDir, "event_history_v2.db")); err != nil {
		t.Fatalf("the new history's database: %v", err)
	}
	if rows, err := m.History.List(testCtx(t), "acme", "collection-c1", nil, 0); err != nil || len(rows) != 0 {
		t.Fatalf("history after the upgrade = %v, %v", rows, err)
	}
}

func TestClickHouseReadModels(t *testing.T) {
	dsn := readdbtest.ClickHouseDatabase(t)
	m, err := projections.OpenClickHouseReadModels(testCtx(t), dsn, keystore.NewMemory())
	if err != nil {
		t.Fatalf("OpenClickHouseReadModels: %v", err)
	}
	defer func() { _ = m.Close() }()
	exercise(t, m, 700)

	again, err := projections.OpenClickHouseReadModels(testCtx(t), dsn, keystore.NewMemory())
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer func() { _ = again.Close() }()
	if r, err := again.Status.Get(testCtx(t), "acme", "c-00000"); err != nil || r.Status != "COMPLETED" {
		t.Fatalf("after reopen: %+v, %v", r, err)
	}
}

type stuckReader struct{ env eventschema.Envelope }

func (r stuckReader) ReadAll(context.Context, uint64, int) ([]eventschema.Envelope, error) {
	return []eventschema.Envelope{r.env}, nil
}

func TestRebuildRefusesAReaderThatDoesNotAdvance(t *testing.T) {
	m, err := projections.OpenSQLiteReadModels(t.TempDir(), keystore.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close() }()
	log := eventlog.New(t)
	e := log.Append("acme", client.StreamName("acme"), time.Now(), client.Registered{ClientID: "acme", Name: "A", RegisteredAt: time.Now()})
	e.Position = 0
	if _, err := projections.Rebuild(testCtx(t), stuckReader{e}, m); err == nil {
		t.Fatal("Rebuild looped or accepted a non-advancing reader")
	}
}

// The first audit history kept payloads in a file of its own; opening the read models deletes
// it, so that its values do not stay on disk beside the new history.
func TestOpeningTheSQLiteReadModelsRemovesTheHistoryThatKeptPayloads(t *testing.T) {
	dataDir := t.TempDir()
	dir := filepath.Join(dataDir, projections.SQLiteDir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"event_history.db", "event_history.db-wal", "event_history.db-shm"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("payloads"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, err := projections.OpenSQLiteReadModels(dataDir, keystore.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	left, err := filepath.Glob(filepath.Join(dir, "event_history.*"))
	if err != nil || len(left) != 0 {
		t.Fatalf("the old history is still there: %v %v", left, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "event_history_v2.db")); err != nil {
		t.Fatalf("the new history: %v", err)
	}
}

// TestProjectorsOpenSealedEvents: the events come sealed, as the repository appends them; every
// projector sees them opened, and a lost key stops the projection loudly. The audit history opens
// none (it summarises what events say publicly), so it goes on without keys.
func TestProjectorsOpenSealedEvents(t *testing.T) {
	keys := keystore.NewMemory()
	m, err := projections.OpenSQLiteReadModels(t.TempDir(), keys)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	log := eventlog.New(t)
	w := buildWorld(log, 7)
	var sealed []eventschema.Envelope
	for _, env := range log.All() {
		payload, _, err := eventschema.SealPersonal(testCtx(t), keys, env.Stream, env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		env.Payload = payload
		sealed = append(sealed, env)
	}
	for _, p := range m.Projectors() {
		if err := p.Handle(testCtx(t), sealed); err != nil {
			t.Fatalf("%s: %v", p.Name(), err)
		}
	}
	verify(t, m, w)

	lost, err := projections.OpenSQLiteReadModels(t.TempDir(), keystore.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lost.Close() })
	for _, p := range lost.Projectors() {
		if p.Name() == "api-keys" {
			continue // client events carry no personal data
		}
		if p.Name() == eventhistory.ProjectorName || p.Name() == clientsecurity.ProjectorName {
			if err := p.Handle(testCtx(t), sealed); err != nil {
				t.Fatalf("%s needs no key, but: %v", p.Name(), err)
			}
			continue
		}
		if err := p.Handle(testCtx(t), sealed); !errors.Is(err, eventschema.ErrKeyNotFound) {
			t.Fatalf("%s with a lost key store: %v", p.Name(), err)
		}
	}
}
