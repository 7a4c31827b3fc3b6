// Package consentstest is the contract suite of the consents read model. Every Store adapter runs
// it; it covers the store on its own, the Projector writing through it and the Reader on top.
package consentstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/consents"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/query"
)

// Open returns a fresh, empty store for one test.
type Open = func(t *testing.T) consents.Store

// Run runs the whole suite against the adapter that open builds.
func Run(t *testing.T, open Open) {
	readdbtest.Suite[consents.Store]{
		{"RoundTripEveryField", testRoundTrip},
		{"GetMany", testGetMany},
		{"StaleAndEqualRevisionsIgnored", testRevisions},
		{"BatchWithSeveralRevisionsOfOneRow", testBatchDuplicates},
		{"TenantIsolation", testTenantIsolation},
		{"ListByUser", testListByUser},
		{"ListByUserPages", testListByUserPages},
		{"ListNonFinal", testListNonFinal},
		{"ListNonFinalPages", testListNonFinalPages},
		{"ListNonFinalAfterAPosition", testListNonFinalAfterAPosition},
		{"ErasePersonal", testErasePersonal},
		{"Reset", testReset},
		{"ProjectorWholeLife", testProjectorWholeLife},
		{"ProjectorEveryEnding", testProjectorEndings},
		{"ProjectorRedeliveryAndOverlap", testProjectorRedelivery},
		{"ProjectorIgnoresOtherCategories", testProjectorOtherCategories},
		{"ProjectorKeepsTheOrderSealed", testProjectorSealed},
		{"ProjectorErasesOnUserDeleted", testProjectorErasesOnUserDeleted},
		{"ProjectorAfterTheErasure", testProjectorAfterErasure},
		{"ProjectorMetrics", testProjectorMetrics},
		{"ReaderGetThroughItsPort", testReaderGet},
		{"ReaderErasedAndLostKeys", testReaderKeys},
		{"ReaderListByUser", testReaderListByUser},
		{"ReaderUserConsentIDs", testReaderUserConsentIDs},
		{"ReaderListNonFinal", testReaderListNonFinal},
	}.Run(t, open)
}

func ctx(t *testing.T) context.Context { return readdbtest.Context(t) }

// suiteKeys seals and opens the rows' personal parts in the tests that do not need keys of
// their own.
var suiteKeys = keystore.NewMemory()

// base is a fixed instant with sub-millisecond digits, to prove the store keeps ms precision.
var base = time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)

const (
	u1 = "0197c0a1-1111-7b3a-9a51-2f1e3d4c5b6a"
	u2 = "0197c0a1-2222-7b3a-9a51-2f1e3d4c5b6a"
	c1 = "0197c0a1-0000-7b3a-9a51-000000000001"
	c2 = "0197c0a1-0000-7b3a-9a51-000000000002"

	// The EID order's personal data, which must never be stored in plain text.
	autoStart = "auto-start-token-5f1c"
	qrStart   = "qr-start-token-77ab"
	qrSecret  = "qr-start-secret-9d0e"
)

var allScopes = []string{"CHECKING_ACCOUNTS", "CREDIT_CARDS", "SAVINGS_ACCOUNTS"}

// sealOrder is an EID order as the projector stores it, under the user's subject.
func sealOrder(t *testing.T, keys eventschema.Keys, userUUID string, o consents.Order) sealed.Value {
	t.Helper()
	plain, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	v, err := sealed.Seal(ctx(t), keys, domain.UserSubject(userUUID), plain)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// row is a consent of the tenant's user, created at base plus minute minutes.
func row(id, tenant, userUUID, status string, minute int, rev uint64) consents.Row {
	at := base.Add(time.Duration(minute) * time.Minute)
	return consents.Row{ConsentID: id, Tenant: tenant, UserUUID: userUUID, Company: "se-demo-bank",
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", Status: status, Scope: allScopes, CreatedAt: at, UpdatedAt: at, Revision: rev}
}

// full is a row with every field set.
func full(t *testing.T, id string, rev uint64) consents.Row {
	r := row(id, "acme", u1, "AWAITING_AUTHORIZATION", 0, rev)
	r.Scope = []string{"CHECKING_ACCOUNTS", "SAVINGS_ACCOUNTS"}
	r.BankConsentID, r.ErrorCode, r.ErrorMessage, r.RevokeReason = "bank-consent-1", "THIRD_PARTY_ERROR", "The bank failed.", "CLIENT"
	r.Personal = sealOrder(t, suiteKeys, u1, consents.Order{StartedAt: base, AutoStartToken: autoStart, QRStartToken: qrStart, QRStartSecret: qrSecret})
	r.UpdatedAt = base.Add(time.Hour)
	r.AuthorizationStartedAt, r.AuthorizationDeadline = base.Add(time.Second), base.Add(31*time.Second)
	r.AuthorizedAt, r.ExpiresAt = base.Add(10*time.Second), base.Add(180*24*time.Hour)
	return r
}

// stored is r as a store returns it: times at ms precision, in UTC.
func stored(r consents.Row) consents.Row {
	for _, at := range []*time.Time{&r.CreatedAt, &r.UpdatedAt, &r.AuthorizationStartedAt, &r.AuthorizationDeadline, &r.AuthorizedAt, &r.ExpiresAt} {
		if !at.IsZero() {
			*at = at.UTC().Truncate(time.Millisecond)
		}
	}
	if len(r.Scope) == 0 {
		r.Scope = nil
	}
	return r
}

func upsert(t *testing.T, s consents.Store, rows ...consents.Row) {
	t.Helper()
	if err := s.Upsert(ctx(t), rows); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
}

func get(t *testing.T, s consents.Store, tenant, id string) consents.Row {
	t.Helper()
	r, err := s.Get(ctx(t), tenant, id)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", tenant, id, err)
	}
	return r
}

func assertRow(t *testing.T, got, want consents.Row) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("row mismatch\n got: %#v\nwant: %#v", got, want)
	}
}

func assertNotFound(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("err = %v, want readdb.ErrNotFound", err)
	}
}

func testRoundTrip(t *testing.T, s consents.Store) {
	in := full(t, c1, 4)
	in.CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.FixedZone("CET", 3600))
	upsert(t, s, in)
	got := get(t, s, "acme", c1)
	assertRow(t, got, stored(in))
	if got.CreatedAt.Location() != time.UTC || got.CreatedAt.Nanosecond() != 678_000_000 {
		t.Fatalf("created at %v", got.CreatedAt)
	}
	// A row with nothing optional reads back with zero values.
	bare := row(c2, "acme", u1, "INITIATED", 1, 0)
	upsert(t, s, bare)
	assertRow(t, get(t, s, "acme", c2), stored(bare))
}

func testGetMany(t *testing.T, s consents.Store) {
	a, b := row(c1, "acme", u1, "INITIATED", 0, 0), row(c2, "globex", u2, "AUTHORIZED", 1, 3)
	upsert(t, s, a, b)
	got, err := s.GetMany(ctx(t), []string{c1, c2, "missing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !reflect.DeepEqual(got[c1], stored(a)) || !reflect.DeepEqual(got[c2], stored(b)) {
		t.Fatalf("GetMany = %#v", got)
	}
	if none, err := s.GetMany(ctx(t), nil); err != nil || len(none) != 0 {
		t.Fatalf("GetMany(nil) = %v, %v", none, err)
	}
	// More ids than one IN list takes.
	ids := make([]string, 1203)
	for i := range ids {
		ids[i] = fmt.Sprintf("missing-%d", i)
	}
	ids[1202] = c2
	if got, err := s.GetMany(ctx(t), ids); err != nil || len(got) != 1 {
		t.Fatalf("GetMany of many = %d rows, %v", len(got), err)
	}
}

func testRevisions(t *testing.T, s consents.Store) {
	current := row(c1, "acme", u1, "AUTHORIZED", 0, 5)
	upsert(t, s, current)
	stale, equal := current, current
	stale.Status, stale.Revision = "AWAITING_AUTHORIZATION", 4
	equal.Status = "REVOKED"
	upsert(t, s, stale)
	upsert(t, s, equal)
	assertRow(t, get(t, s, "acme", c1), stored(current))
	newer := current
	newer.Status, newer.Revision = "EXPIRED", 6
	upsert(t, s, newer)
	assertRow(t, get(t, s, "acme", c1), stored(newer))
}

func testBatchDuplicates(t *testing.T, s consents.Store) {
	r1, r3, r3b, r2 := row(c1, "acme", u1, "INITIATED", 0, 1), row(c1, "acme", u1, "AUTHORIZED", 0, 3),
		row(c1, "acme", u1, "FAILED", 0, 3), row(c1, "acme", u1, "AWAITING_AUTHORIZATION", 0, 2)
	upsert(t, s, r1, r3, r3b, r2)
	assertRow(t, get(t, s, "acme", c1), stored(r3))
}

func testTenantIsolation(t *testing.T, s consents.Store) {
	upsert(t, s, row(c1, "acme", u1, "INITIATED", 0, 0))
	_, err := s.Get(ctx(t), "globex", c1)
	assertNotFound(t, err)
	_, err = s.Get(ctx(t), "acme", c2)
	assertNotFound(t, err)
}

func listed(t *testing.T, s consents.Store, tenant, userUUID string, after *consents.UserPosition, limit int) []string {
	t.Helper()
	rows, err := s.ListByUser(ctx(t), tenant, userUUID, after, limit)
	if err != nil {
		t.Fatalf("ListByUser: %v", err)
	}
	ids := []string{}
	for _, r := range rows {
		ids = append(ids, r.ConsentID)
	}
	return ids
}

func assertIDs(t *testing.T, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

func testListByUser(t *testing.T, s consents.Store) {
	upsert(t, s,
		row("k-1", "acme", u1, "INITIATED", 1, 0),
		row("k-3", "acme", u1, "INITIATED", 3, 0),
		row("k-2", "acme", u1, "INITIATED", 2, 0),
		row("k-2b", "acme", u1, "INITIATED", 2, 0),  // the same ms as k-2: the id breaks the tie
		row("k-x", "acme", u2, "INITIATED", 4, 0),   // another user's
		row("k-y", "globex", u1, "INITIATED", 5, 0), // the same user id under another client
	)
	assertIDs(t, listed(t, s, "acme", u1, nil, 10), "k-3", "k-2b", "k-2", "k-1")
	assertIDs(t, listed(t, s, "acme", u1, nil, 2), "k-3", "k-2b")
	assertIDs(t, listed(t, s, "globex", u1, nil, 10), "k-y")
	assertIDs(t, listed(t, s, "acme", "", nil, 10))
	assertIDs(t, listed(t, s, "initech", u1, nil, 10))
	assertIDs(t, listed(t, s, "acme", u1, nil, 0))
	// The listed row is the current one, in full.
	newer := full(t, "k-3", 4)
	newer.CreatedAt = base.Add(3 * time.Minute)
	upsert(t, s, newer)
	rows, err := s.ListByUser(ctx(t), "acme", u1, nil, 1)
	if err != nil || len(rows) != 1 {
		t.Fatalf("ListByUser = %v, %v", rows, err)
	}
	assertRow(t, rows[0], stored(newer))
}

func testListByUserPages(t *testing.T, s consents.Store) {
	var all []consents.Row
	for i := range 7 {
		all = append(all, row("k-"+string(rune('a'+i)), "acme", u1, "INITIATED", i/2, 0)) // pairs share a ms
	}
	upsert(t, s, all...)
	var got []string
	var after *consents.UserPosition
	for page := 0; ; page++ {
		rows, err := s.ListByUser(ctx(t), "acme", u1, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if page == 0 {
			// A consent created after the first page was read never shows on later pages.
			upsert(t, s, row("k-new", "acme", u1, "INITIATED", 60, 0))
		}
		for _, r := range rows {
			got = append(got, r.ConsentID)
		}
		if len(rows) < 3 {
			break
		}
		last := rows[len(rows)-1]
		after = &consents.UserPosition{CreatedAt: last.CreatedAt, ConsentID: last.ConsentID}
		if page > 5 {
			t.Fatal("paging does not end")
		}
	}
	assertIDs(t, got, "k-g", "k-f", "k-e", "k-d", "k-c", "k-b", "k-a")
}

func testListNonFinal(t *testing.T, s consents.Store) {
	var want []string
	for i, st := range consent.AllStatuses() {
		id := "k-" + string(st)
		upsert(t, s, row(id, "acme", u1, string(st), 10-i, 0))
		if !st.IsFinal() {
			want = append([]string{id}, want...) // oldest first: the later statuses were created earlier
		}
	}
	rows, err := s.ListNonFinal(ctx(t), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.ConsentID)
	}
	assertIDs(t, got, want...)
	if len(want) != 3 || want[0] != "k-AUTHORIZED" {
		t.Fatalf("non-final statuses %v: AUTHORIZED must be among them, it still expires", want)
	}
	// A consent that moved to a final status leaves the list, whatever versions a store keeps.
	ended := row("k-AUTHORIZED", "acme", u1, "EXPIRED", 8, 1)
	upsert(t, s, ended)
	if rows, err = s.ListNonFinal(ctx(t), nil, 1); err != nil || len(rows) != 1 || rows[0].ConsentID != "k-AWAITING_AUTHORIZATION" {
		t.Fatalf("ListNonFinal(1) = %v, %v", rows, err)
	}
}

// testErasePersonal: ErasePersonal blanks the order of the user's consents of the tenant, keeps
// everything else and the revisions, leaves every other row alone, and a later revision is still
// written over it.
func testErasePersonal(t *testing.T, s consents.Store) {
	withOrder := func(r consents.Row) consents.Row {
		r.Personal = sealOrder(t, suiteKeys, r.UserUUID, consents.Order{StartedAt: base, QRStartToken: qrStart, QRStartSecret: qrSecret})
		return r
	}
	erased := []consents.Row{withOrder(row("k-1", "acme", u1, "AWAITING_AUTHORIZATION", 1, 4)),
		withOrder(row("k-2", "acme", u1, "AWAITING_AUTHORIZATION", 2, 7))}
	kept := []consents.Row{withOrder(row("k-other-user", "acme", u2, "AWAITING_AUTHORIZATION", 3, 2)),
		withOrder(row("k-other-tenant", "globex", u1, "AWAITING_AUTHORIZATION", 4, 2))}
	upsert(t, s, append(slices.Clone(erased), kept...)...)
	for range 2 { // erasing again changes nothing
		if err := s.ErasePersonal(ctx(t), "acme", u1); err != nil {
			t.Fatalf("ErasePersonal: %v", err)
		}
		for _, r := range erased {
			want := r
			want.Personal = sealed.Value{}
			assertRow(t, get(t, s, "acme", r.ConsentID), stored(want))
		}
		for _, r := range kept {
			assertRow(t, get(t, s, r.Tenant, r.ConsentID), stored(r))
		}
	}
	if err := s.ErasePersonal(ctx(t), "acme", ""); err != nil {
		t.Fatal(err)
	}
	next := withOrder(row("k-1", "acme", u1, "AWAITING_AUTHORIZATION", 1, 5))
	upsert(t, s, next)
	assertRow(t, get(t, s, "acme", "k-1"), stored(next))
}

func testReset(t *testing.T, s consents.Store) {
	upsert(t, s, row(c1, "acme", u1, "INITIATED", 0, 0))
	if err := s.Reset(ctx(t)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(ctx(t), "acme", c1)
	assertNotFound(t, err)
	// The store takes rows again after a reset, from revision 0.
	upsert(t, s, row(c1, "acme", u1, "INITIATED", 0, 0))
	get(t, s, "acme", c1)
}

// fixture records consent events, as the command side and the worker do, and folds them.
type fixture struct {
	t    *testing.T
	log  *eventlog.Log
	keys *keystore.Memory
	p    *consents.Projector
	s    consents.Store
}

func newFixture(t *testing.T, s consents.Store) *fixture {
	log := eventlog.New(t)
	keys := keystore.NewMemory()
	return &fixture{t: t, log: log, keys: keys, s: s, p: consents.NewProjector(log.Registry(), s, keys, consents.Metrics{})}
}

func (f *fixture) created(tenant, id, userUUID string, at time.Time, scope ...consent.Scope) eventschema.Envelope {
	if scope == nil {
		scope = consent.AllScopes()
	}
	return f.log.Append(tenant, consent.StreamName(id), at, consent.Created{ConsentID: id, ClientID: tenant, UserUUID: userUUID,
		Company: "se-demo-bank", LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", Scope: scope, CreatedAt: at,
		Personal: &consent.CreatedPerson{PersonalNumber: "199001010017", RequestHash: "hash-1"}})
}

func (f *fixture) append(tenant, id string, at time.Time, ev domain.Event) eventschema.Envelope {
	return f.log.Append(tenant, consent.StreamName(id), at, ev)
}

func (f *fixture) started(tenant, id string, at time.Time, token string) eventschema.Envelope {
	return f.append(tenant, id, at, consent.AuthorizationStarted{At: at, Deadline: at.Add(30 * time.Second), BankConsentID: "bank-" + id,
		Personal: &consent.AuthorizationPersonal{AutoStartToken: autoStart + token, QRStartToken: qrStart + token, QRStartSecret: qrSecret + token}})
}

func (f *fixture) handle(envs ...eventschema.Envelope) {
	f.t.Helper()
	if err := f.p.Handle(ctx(f.t), envs); err != nil {
		f.t.Fatalf("Handle: %v", err)
	}
}

func (f *fixture) view(tenant, id string) query.ConsentView {
	f.t.Helper()
	v, err := consents.NewReader(f.s, f.keys).Get(ctx(f.t), tenant, id)
	if err != nil {
		f.t.Fatalf("Reader.Get(%s): %v", id, err)
	}
	return v
}

// testProjectorWholeLife folds a consent's life one event at a time and checks what the reader
// shows after each.
func testProjectorWholeLife(t *testing.T, s consents.Store) {
	f := newFixture(t, s)
	at := base
	f.handle(f.created("acme", c1, u1, at, consent.ScopeSavingsAccounts, consent.ScopeCheckingAccounts))
	v := f.view("acme", c1)
	want := query.ConsentView{ConsentID: c1, Tenant: "acme", UserUUID: u1, Company: "se-demo-bank",
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", Status: "INITIATED", Scope: []string{"SAVINGS_ACCOUNTS", "CHECKING_ACCOUNTS"},
		CreatedAt: at.Truncate(time.Millisecond), UpdatedAt: at.Truncate(time.Millisecond)}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("created:\n got %#v\nwant %#v", v, want)
	}

	f.handle(f.append("acme", c1, at.Add(time.Second), consent.Claimed{WorkerID: "w-1", ClaimedAt: at.Add(time.Second)}))
	if v := f.view("acme", c1); v.Status != "INITIATED" || !v.UpdatedAt.Equal(at.Add(time.Second).Truncate(time.Millisecond)) {
		t.Fatalf("claimed: %#v", v)
	}

	orderAt := at.Add(2 * time.Second)
	f.handle(f.started("acme", c1, orderAt, ""))
	v = f.view("acme", c1)
	wantOrder := &query.ConsentEIDOrder{StartedAt: orderAt, AutoStartToken: autoStart, QRStartToken: qrStart, QRStartSecret: qrSecret}
	if v.Status != "AWAITING_AUTHORIZATION" || !reflect.DeepEqual(v.EIDOrder, wantOrder) {
		t.Fatalf("awaiting: %#v, order %#v", v, v.EIDOrder)
	}
	r := get(t, s, "acme", c1)
	if r.BankConsentID != "bank-"+c1 || !r.AuthorizationStartedAt.Equal(orderAt.Truncate(time.Millisecond)) ||
		!r.AuthorizationDeadline.Equal(orderAt.Add(30*time.Second).Truncate(time.Millisecond)) || r.Revision != 2 {
		t.Fatalf("awaiting row %#v", r)
	}

	// The worker opened another order: its tokens replace the first's.
	f.handle(f.started("acme", c1, orderAt.Add(5*time.Second), "-2"))
	if v := f.view("acme", c1); v.EIDOrder == nil || v.EIDOrder.QRStartSecret != qrSecret+"-2" || !v.EIDOrder.StartedAt.Equal(orderAt.Add(5*time.Second)) {
		t.Fatalf("second order: %#v", v.EIDOrder)
	}

	authorized, expires := orderAt.Add(12*time.Second), orderAt.Add(12*time.Second+180*24*time.Hour)
	f.handle(f.append("acme", c1, authorized, consent.Authorized{AuthorizedAt: authorized, ExpiresAt: expires}))
	v = f.view("acme", c1)
	if v.Status != "AUTHORIZED" || v.EIDOrder != nil || !v.AuthorizedAt.Equal(authorized.Truncate(time.Millisecond)) ||
		!v.ExpiresAt.Equal(expires.Truncate(time.Millisecond)) || v.Error != nil {
		t.Fatalf("authorized: %#v", v)
	}
	if r := get(t, s, "acme", c1); !r.Personal.IsZero() {
		t.Fatal("the order outlived the authorization")
	}

	f.handle(f.append("acme", c1, authorized.Add(time.Hour), consent.Revoked{At: authorized.Add(time.Hour), Reason: consent.RevokedByClient}))
	v = f.view("acme", c1)
	if v.Status != "REVOKED" || !v.AuthorizedAt.Equal(authorized.Truncate(time.Millisecond)) || !v.UpdatedAt.Equal(authorized.Add(time.Hour).Truncate(time.Millisecond)) {
		t.Fatalf("revoked: %#v", v)
	}
	if r := get(t, s, "acme", c1); r.RevokeReason != "CLIENT" || r.Revision != 5 {
		t.Fatalf("revoked row: %#v", r)
	}
}

// testProjectorEndings: every other way a consent ends, each in one batch.
func testProjectorEndings(t *testing.T, s consents.Store) {
	f := newFixture(t, s)
	f.handle(f.created("acme", c1, u1, base), f.started("acme", c1, base.Add(time.Second), ""),
		f.append("acme", c1, base.Add(2*time.Second), consent.Failed{At: base.Add(2 * time.Second), Code: consent.FailureAuthenticationMismatch,
			Message: "Another person signed."}))
	v := f.view("acme", c1)
	if v.Status != "FAILED" || v.Error == nil || *v.Error != (query.ConsentError{Code: "AUTHENTICATION_MISMATCH", Message: "Another person signed."}) ||
		v.EIDOrder != nil || !get(t, s, "acme", c1).Personal.IsZero() {
		t.Fatalf("failed: %#v", v)
	}

	authorized := base.Add(3 * time.Second)
	f.handle(f.created("acme", c2, u1, base), f.started("acme", c2, base.Add(time.Second), ""),
		f.append("acme", c2, authorized, consent.Authorized{AuthorizedAt: authorized, ExpiresAt: authorized.Add(time.Hour)}),
		f.append("acme", c2, authorized.Add(time.Hour), consent.Expired{At: authorized.Add(time.Hour)}))
	if v := f.view("acme", c2); v.Status != "EXPIRED" || v.Error != nil || v.ExpiresAt.IsZero() {
		t.Fatalf("expired: %#v", v)
	}

	const c3 = "0197c0a1-0000-7b3a-9a51-000000000003"
	f.handle(f.created("acme", c3, u1, base), f.append("acme", c3, base.Add(time.Second),
		consent.Revoked{At: base.Add(time.Second), Reason: consent.RevokedUserDeleted}))
	if r := get(t, s, "acme", c3); r.Status != "REVOKED" || r.RevokeReason != "USER_DELETED" {
		t.Fatalf("revoked with the user: %#v", r)
	}
}

func testProjectorRedelivery(t *testing.T, s consents.Store) {
	f := newFixture(t, s)
	created := f.created("acme", c1, u1, base)
	started := f.started("acme", c1, base.Add(time.Second), "")
	authorized := f.append("acme", c1, base.Add(2*time.Second), consent.Authorized{AuthorizedAt: base.Add(2 * time.Second), ExpiresAt: base.Add(time.Hour)})
	f.handle(created, started, authorized)
	want := get(t, s, "acme", c1)
	// The same batch again, an overlapping one, and an older one change nothing.
	f.handle(created, started, authorized)
	f.handle(started, authorized)
	f.handle(created)
	assertRow(t, get(t, s, "acme", c1), want)
	if want.Status != "AUTHORIZED" || want.Revision != 2 {
		t.Fatalf("row %#v", want)
	}
}

func testProjectorOtherCategories(t *testing.T, s consents.Store) {
	f := newFixture(t, s)
	f.handle(
		f.log.Append("acme", client.StreamName("acme"), base, client.Registered{ClientID: "acme", Name: "Acme", RegisteredAt: base}),
		f.log.Append("acme", user.StreamName(u1), base, user.Created{UserUUID: u1, ClientID: "acme", CreatedAt: base}),
	)
	// An event of a consent whose creation the read model never saw makes no row.
	f.handle(f.log.AppendRaw(eventschema.Envelope{Type: consent.EventExpired, SchemaVersion: 1, Tenant: "acme",
		Stream: consent.StreamName(c2), OccurredAt: base, Payload: json.RawMessage(`{"at":"2026-03-04T05:06:07Z"}`)}))
	rows, err := s.GetMany(ctx(t), []string{c1, c2, "acme", u1})
	if err != nil || len(rows) != 0 {
		t.Fatalf("rows %v, %v", rows, err)
	}
}

// testProjectorSealed: the row keeps the EID order sealed under the user's data subject: none of
// its tokens, nor the personal number, is stored in plain text.
func testProjectorSealed(t *testing.T, s consents.Store) {
	f := newFixture(t, s)
	f.handle(f.created("acme", c1, u1, base), f.started("acme", c1, base.Add(time.Second), ""))
	r := get(t, s, "acme", c1)
	dump := fmt.Sprintf("%#v %s", r, r.Personal.Bytes())
	for _, secret := range []string{autoStart, qrStart, qrSecret, "199001010017", "hash-1"} {
		if strings.Contains(dump, secret) {
			t.Fatalf("the stored row holds %q in plain text: %s", secret, dump)
		}
	}
	if r.Personal.IsZero() || r.Personal.Subject() != domain.UserSubject(u1) {
		t.Fatalf("sealed under %q, want the user's subject", r.Personal.Subject())
	}
	if v := f.view("acme", c1); v.EIDOrder == nil || v.EIDOrder.QRStartSecret != qrSecret {
		t.Fatalf("read back: %#v", v.EIDOrder)
	}
	// An order whose tokens were erased before the read model saw it shows none.
	f.handle(f.append("acme", c1, base.Add(2*time.Second), consent.AuthorizationStarted{At: base.Add(2 * time.Second),
		Deadline: base.Add(32 * time.Second), BankConsentID: "bank-2"}))
	if r := get(t, s, "acme", c1); !r.Personal.IsZero() || r.Status != "AWAITING_AUTHORIZATION" || r.BankConsentID != "bank-2" {
		t.Fatalf("an order without tokens: %#v", r)
	}
}

// testProjectorErasesOnUserDeleted: a user.deleted blanks the orders of the user's consents, in
// the batch that brings it or after; the statuses stay; another user's consents keep theirs.
func testProjectorErasesOnUserDeleted(t *testing.T, s consents.Store) {
	f := newFixture(t, s)
	deleted := f.log.Append("acme", user.StreamName(u1), base.Add(3*time.Second), user.Deleted{DeletedAt: base.Add(3 * time.Second)})
	batch := []eventschema.Envelope{f.created("acme", c1, u1, base), f.started("acme", c1, base.Add(time.Second), ""),
		f.created("acme", c2, u2, base), f.started("acme", c2, base.Add(time.Second), ""), deleted}
	for range 2 {
		f.handle(batch...)
		if r := get(t, s, "acme", c1); !r.Personal.IsZero() || r.Status != "AWAITING_AUTHORIZATION" || r.Revision != 1 {
			t.Fatalf("the deleted user's consent: %#v", r)
		}
		if v := f.view("acme", c2); v.EIDOrder == nil || v.EIDOrder.QRStartSecret != qrSecret {
			t.Fatalf("another user's consent lost its order: %#v", v)
		}
	}
	if v := f.view("acme", c1); v.EIDOrder != nil || v.Status != "AWAITING_AUTHORIZATION" {
		t.Fatalf("the erased consent reads as %#v", v)
	}
}

// testProjectorAfterTheErasure: a replay after the user's key was destroyed keeps nothing of the
// order, under no new key.
func testProjectorAfterErasure(t *testing.T, s consents.Store) {
	f := newFixture(t, s)
	if err := f.keys.Destroy(ctx(t), domain.UserSubject(u1)); err != nil {
		t.Fatal(err)
	}
	f.handle(f.created("acme", c1, u1, base), f.started("acme", c1, base.Add(time.Second), ""))
	if r := get(t, s, "acme", c1); !r.Personal.IsZero() || r.Status != "AWAITING_AUTHORIZATION" {
		t.Fatalf("replayed after the erasure: %#v", r)
	}
}

// testProjectorMetrics: every status change is counted once, by company and status, however often
// it is delivered; the authorization's latency is observed from its order's start.
func testProjectorMetrics(t *testing.T, s consents.Store) {
	log := eventlog.New(t)
	m := consents.Metrics{
		Statuses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "statuses"}, []string{"company", "status"}),
		Authorization: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "authorization", Buckets: []float64{5, 10, 60}},
			[]string{"company"}),
	}
	f := &fixture{t: t, log: log, keys: keystore.NewMemory(), s: s}
	f.p = consents.NewProjector(log.Registry(), s, f.keys, m)
	started := base.Add(time.Second)
	batch := []eventschema.Envelope{
		f.created("acme", c1, u1, base),
		f.append("acme", c1, base, consent.Claimed{WorkerID: "w", ClaimedAt: base}),
		f.started("acme", c1, started, ""),
		f.started("acme", c1, started.Add(time.Second), "-2"), // a new order: no new status
		f.append("acme", c1, started.Add(7*time.Second), consent.Authorized{AuthorizedAt: started.Add(7 * time.Second), ExpiresAt: base.Add(time.Hour)}),
		f.created("acme", c2, u1, base),
		f.append("acme", c2, base, consent.Failed{At: base, Code: consent.FailureThirdPartyError, Message: "down"}),
	}
	f.handle(batch...)
	f.handle(batch...) // redelivered
	f.handle(batch[4:]...)
	for status, want := range map[string]float64{"INITIATED": 2, "AWAITING_AUTHORIZATION": 1, "AUTHORIZED": 1, "FAILED": 1, "REVOKED": 0} {
		if got := counted(t, m.Statuses.WithLabelValues("se-demo-bank", status)); got != want {
			t.Errorf("%s counted %v times, want %v", status, got, want)
		}
	}
	// The person signed the second order 6 s after it started: the latency counts from the order
	// the consent awaited, once.
	var h dto.Metric
	if err := m.Authorization.WithLabelValues("se-demo-bank").(prometheus.Metric).Write(&h); err != nil {
		t.Fatal(err)
	}
	if got := h.GetHistogram(); got.GetSampleCount() != 1 || got.GetSampleSum() != 6 {
		t.Fatalf("authorization latency: %d observations of %v s in all, want one of 6 s", got.GetSampleCount(), got.GetSampleSum())
	}
}

// counted is a counter's value.
func counted(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetCounter().GetValue()
}

// testReaderGet reads through the query side's port: every field the endpoints need, and the
// port's own not-found error (never the store's) for an unknown consent and another tenant's.
func testReaderGet(t *testing.T, s consents.Store) {
	in := full(t, c1, 3)
	upsert(t, s, in, row(c2, "globex", u2, "INITIATED", 0, 0))
	var reader query.ConsentReader = consents.NewReader(s, suiteKeys)
	got, err := reader.Get(ctx(t), "acme", c1)
	if err != nil {
		t.Fatal(err)
	}
	r := stored(in)
	want := query.ConsentView{ConsentID: c1, Tenant: "acme", UserUUID: u1, Company: "se-demo-bank",
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", Status: "AWAITING_AUTHORIZATION", Scope: r.Scope, CreatedAt: r.CreatedAt,
		AuthorizedAt: r.AuthorizedAt, ExpiresAt: r.ExpiresAt, UpdatedAt: r.UpdatedAt,
		Error:    &query.ConsentError{Code: "THIRD_PARTY_ERROR", Message: "The bank failed."},
		EIDOrder: &query.ConsentEIDOrder{StartedAt: base, AutoStartToken: autoStart, QRStartToken: qrStart, QRStartSecret: qrSecret}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("view\n got %#v\nwant %#v", got, want)
	}
	// A consent that awaits nothing opens nothing, whatever a row holds.
	in.Status, in.Revision = "AUTHORIZED", 4
	upsert(t, s, in)
	if got, err := reader.Get(ctx(t), "acme", c1); err != nil || got.EIDOrder != nil {
		t.Fatalf("authorized: %#v, %v", got.EIDOrder, err)
	}
	for _, tc := range [][2]string{{"acme", c2}, {"globex", c1}, {"acme", "missing"}} {
		if _, err := reader.Get(ctx(t), tc[0], tc[1]); !errors.Is(err, query.ErrNotFound) {
			t.Fatalf("Get(%s, %s): %v, want query.ErrNotFound", tc[0], tc[1], err)
		}
	}
}

// testReaderKeys: an erased subject's consent reads without its order, and no error; a lost key is
// an error, never a poll without its QR code.
func testReaderKeys(t *testing.T, s consents.Store) {
	keys := keystore.NewMemory()
	erased := row(c1, "acme", u1, "AWAITING_AUTHORIZATION", 0, 1)
	erased.Personal = sealOrder(t, keys, u1, consents.Order{StartedAt: base, QRStartToken: qrStart, QRStartSecret: qrSecret})
	lost := row(c2, "acme", u2, "AWAITING_AUTHORIZATION", 0, 1)
	lost.Personal = sealOrder(t, keys, u2, consents.Order{StartedAt: base, QRStartToken: qrStart, QRStartSecret: qrSecret})
	upsert(t, s, erased, lost)
	if err := keys.Destroy(ctx(t), domain.UserSubject(u1)); err != nil {
		t.Fatal(err)
	}
	if v, err := consents.NewReader(s, keys).Get(ctx(t), "acme", c1); err != nil || v.EIDOrder != nil || v.Status != "AWAITING_AUTHORIZATION" {
		t.Fatalf("erased subject: %#v, %v", v, err)
	}
	_, err := consents.NewReader(s, keystore.NewMemory()).Get(ctx(t), "acme", c2)
	if !errors.Is(err, eventschema.ErrKeyNotFound) || errors.Is(err, query.ErrNotFound) {
		t.Fatalf("a lost key: %v", err)
	}
}

func testReaderListByUser(t *testing.T, s consents.Store) {
	newest := full(t, "k-2", 2)
	newest.CreatedAt = base.Add(2 * time.Minute)
	upsert(t, s, row("k-1", "acme", u1, "INITIATED", 1, 0), newest, row("k-3", "acme", u2, "INITIATED", 3, 0),
		row("k-4", "globex", u1, "INITIATED", 4, 0))
	var reader query.UserConsentsReader = consents.NewReader(s, suiteKeys)
	page, err := reader.ListByUser(ctx(t), "acme", u1, nil, 1)
	if err != nil || len(page) != 1 || page[0].ConsentID != "k-2" || page[0].EIDOrder != nil || page[0].Error == nil ||
		!slices.Equal(page[0].Scope, []string{"CHECKING_ACCOUNTS", "SAVINGS_ACCOUNTS"}) {
		t.Fatalf("first page %#v, %v", page, err)
	}
	next, err := reader.ListByUser(ctx(t), "acme", u1, &query.ConsentCursor{CreatedAt: page[0].CreatedAt, ConsentID: "k-2"}, 10)
	if err != nil || len(next) != 1 || next[0].ConsentID != "k-1" {
		t.Fatalf("second page %#v, %v", next, err)
	}
	if none, err := reader.ListByUser(ctx(t), "initech", u1, nil, 10); err != nil || len(none) != 0 {
		t.Fatalf("another tenant: %v, %v", none, err)
	}
}

// testReaderUserConsentIDs lists every consent of a user, final ones included, through pages,
// for its erasure to revoke those the event store shows live; another tenant's and another
// user's are not listed.
func testReaderUserConsentIDs(t *testing.T, s consents.Store) {
	var rows []consents.Row
	var want []string
	statuses := consent.AllStatuses()
	for i := range 1203 { // past two of the reader's pages
		id := fmt.Sprintf("k-%04d", i)
		rows = append(rows, row(id, "acme", u1, string(statuses[i%len(statuses)]), i, 0))
		want = append([]string{id}, want...) // newest first
	}
	rows = append(rows, row("k-other-user", "acme", u2, "INITIATED", 1, 0), row("k-other-tenant", "globex", u1, "INITIATED", 1, 0))
	upsert(t, s, rows...)
	got, err := consents.NewReader(s, suiteKeys).UserConsentIDs(ctx(t), "acme", u1)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("UserConsentIDs = %d ids (%v), want %d", len(got), err, len(want))
	}
	if none, err := consents.NewReader(s, suiteKeys).UserConsentIDs(ctx(t), "acme", "u-none"); err != nil || len(none) != 0 {
		t.Fatalf("a user without consents: %v, %v", none, err)
	}
}

// activeConsents is the connectors' port (connectors/worker.ActiveConsents), restated here as
// the worker declares it: the reader must satisfy it by its shape alone.
type activeConsents interface {
	ListNonFinal(ctx context.Context, afterCreatedAt time.Time, afterID string, limit int) (ids []string, lastCreatedAt time.Time, err error)
}

func testReaderListNonFinal(t *testing.T, s consents.Store) {
	upsert(t, s, row("k-1", "acme", u1, "AUTHORIZED", 1, 0), row("k-2", "globex", u2, "INITIATED", 2, 0),
		row("k-3", "acme", u1, "REVOKED", 0, 0))
	var active activeConsents = consents.NewReader(s, suiteKeys)
	ids, last, err := active.ListNonFinal(ctx(t), time.Time{}, "", 0)
	if err != nil || !slices.Equal(ids, []string{"k-1", "k-2"}) || !last.Equal(base.Add(2*time.Minute).Truncate(time.Millisecond)) {
		t.Fatalf("ListNonFinal = %v, %v, %v", ids, last, err)
	}
	ids, last, err = active.ListNonFinal(ctx(t), time.Time{}, "", 1)
	if err != nil || !slices.Equal(ids, []string{"k-1"}) {
		t.Fatalf("ListNonFinal(1) = %v, %v", ids, err)
	}
	// The page after it starts at the id and the time it returned.
	if ids, _, err = active.ListNonFinal(ctx(t), last, ids[0], 1); err != nil || !slices.Equal(ids, []string{"k-2"}) {
		t.Fatalf("ListNonFinal(1) after k-1 = %v, %v", ids, err)
	}
	if ids, last, err = active.ListNonFinal(ctx(t), base.Add(2*time.Minute), "k-2", 1); err != nil || len(ids) != 0 || !last.IsZero() {
		t.Fatalf("ListNonFinal after the newest = %v, %v, %v", ids, last, err)
	}
}

// nonFinalRows stores consents created at base plus a few minutes, some sharing a creation
// time, some final, one final only at its newer revision; it returns the ids ListNonFinal owes,
// in its order.
func nonFinalRows(t *testing.T, s consents.Store) []string {
	t.Helper()
	upsert(t, s,
		// The same creation time: the id breaks the tie, whatever the order of the writes.
		row("k-b", "acme", u1, "AWAITING_AUTHORIZATION", 0, 1),
		row("f-0", "acme", u1, "REVOKED", 0, 3),
		row("k-a", "acme", u1, "AUTHORIZED", 0, 2),
		row("k-c", "globex", u2, "INITIATED", 1, 0),
		row("f-1", "acme", u1, "FAILED", 2, 2),
		row("k-e", "acme", u2, "AUTHORIZED", 3, 2),
		row("k-d", "acme", u1, "INITIATED", 3, 0),
		row("k-f", "acme", u1, "AUTHORIZED", 4, 2),
		row("k-g", "acme", u1, "AWAITING_AUTHORIZATION", 5, 1),
	)
	upsert(t, s, row("k-f", "acme", u1, "EXPIRED", 4, 3))
	return []string{"k-a", "k-b", "k-c", "k-d", "k-e", "k-g"}
}

// listNonFinal is one page, as ids, and the position after its last row (nil after none).
func listNonFinal(t *testing.T, s consents.Store, after *consents.NonFinalPosition, limit int) ([]string, *consents.NonFinalPosition) {
	t.Helper()
	rows, err := s.ListNonFinal(ctx(t), after, limit)
	if err != nil {
		t.Fatalf("ListNonFinal(%v, %d): %v", after, limit, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	page := make([]string, len(rows))
	for i, r := range rows {
		page[i] = r.ConsentID
	}
	last := rows[len(rows)-1]
	return page, &consents.NonFinalPosition{CreatedAt: last.CreatedAt, ConsentID: last.ConsentID}
}

// testListNonFinalPages: paging from no position to the first short page, as the connectors'
// sweep reads a round, meets every non-final consent exactly once, in order.
func testListNonFinalPages(t *testing.T, s consents.Store) {
	want := nonFinalRows(t, s)
	readdbtest.CheckPagedRound(t, want, func(after *consents.NonFinalPosition, limit int) ([]string, *consents.NonFinalPosition) {
		return listNonFinal(t, s, after, limit)
	})
}

func testListNonFinalAfterAPosition(t *testing.T, s consents.Store) {
	want := nonFinalRows(t, s)
	pos := func(minute int, id string) *consents.NonFinalPosition {
		// At full precision, as a caller may hold it: the store compares at its ms precision.
		return &consents.NonFinalPosition{CreatedAt: base.Add(time.Duration(minute) * time.Minute), ConsentID: id}
	}
	page, _ := listNonFinal(t, s, pos(0, "k-a"), 0)
	assertIDs(t, page, want[1:]...)
	page, _ = listNonFinal(t, s, pos(3, "k-d"), 1)
	assertIDs(t, page, "k-e")
	// The position of a consent that ended since, or of a final one, still holds.
	page, _ = listNonFinal(t, s, pos(4, "k-f"), 0)
	assertIDs(t, page, "k-g")
	page, _ = listNonFinal(t, s, pos(0, "f-0"), 3)
	assertIDs(t, page, "k-a", "k-b", "k-c")
	page, last := listNonFinal(t, s, pos(5, "k-g"), 3)
	if len(page) != 0 || last != nil {
		t.Fatalf("after the newest: %v", page)
	}
	upsert(t, s, row("k-late", "acme", u1, "INITIATED", 60, 0))
	page, _ = listNonFinal(t, s, pos(5, "k-g"), 3)
	assertIDs(t, page, "k-late")
}
