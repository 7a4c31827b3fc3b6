package httpquery_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/domain/eid"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
	"github.com/samla/samla/platform/sessiontoken"
	"github.com/samla/samla/query"
	"github.com/samla/samla/query/httpquery"
)

const (
	awaitingConsent   = "0197c0a1-0000-7e5f-8a9b-000000000001"
	authorizedConsent = "0197c0a1-0000-7e5f-8a9b-000000000002"
	failedConsent     = "0197c0a1-0000-7e5f-8a9b-000000000003"
	initiatedConsent  = "0197c0a1-0000-7e5f-8a9b-000000000004"
	otherUserConsent  = "0197c0a1-0000-7e5f-8a9b-000000000005" // acme's, of deletedUser
	globexConsent     = "0197c0a1-0000-7e5f-8a9b-000000000006"
	unknownConsent    = "0197c0a1-0000-7e5f-8a9b-0000000000ff"

	qrToken  = "qr-start-token-1"
	qrSecret = "qr-start-secret-never-shown"
)

var (
	consentCreated = time.Date(2026, 5, 2, 8, 0, 0, 250_000_000, time.UTC)
	orderStarted   = consentCreated.Add(2 * time.Second)
	authorizedAt   = consentCreated.Add(time.Minute + 20*time.Second)
	expiresAt      = authorizedAt.Add(180 * 24 * time.Hour)
)

// fakeConsents is a tenant-scoped consents read model, listing newest first like the real one;
// it records the limits it was asked for.
type fakeConsents struct {
	all       []query.ConsentView
	err       error
	leakyRead bool // ignores the tenant, as a buggy reader would
	limits    []int
}

func (f *fakeConsents) Get(_ context.Context, tenant, id string) (query.ConsentView, error) {
	if f.err != nil {
		return query.ConsentView{}, f.err
	}
	for _, v := range f.all {
		if v.ConsentID == id && (f.leakyRead || v.Tenant == tenant) {
			return v, nil
		}
	}
	return query.ConsentView{}, query.ErrNotFound
}

func (f *fakeConsents) ListByUser(_ context.Context, tenant, userUUID string, after *query.ConsentCursor, limit int) ([]query.ConsentView, error) {
	f.limits = append(f.limits, limit)
	if f.err != nil {
		return nil, f.err
	}
	var mine []query.ConsentView
	for _, v := range f.all {
		if f.leakyRead || (v.Tenant == tenant && v.UserUUID == userUUID) {
			v.EIDOrder = nil // the list holds no personal parts
			mine = append(mine, v)
		}
	}
	slices.SortFunc(mine, func(a, b query.ConsentView) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ConsentID, a.ConsentID)
	})
	var out []query.ConsentView
	for _, v := range mine {
		if after != nil && !(v.CreatedAt.Before(after.CreatedAt) || (v.CreatedAt.Equal(after.CreatedAt) && v.ConsentID < after.ConsentID)) {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, v)
	}
	return out, nil
}

type consentsEnv struct {
	engine   *gin.Engine
	consents *fakeConsents
	users    *fakeUsers
	now      time.Time
	token    string // a session of liveUser, of acme
}

func newConsentsEnv(t *testing.T) *consentsEnv {
	t.Helper()
	ext := func(s string) *string { return &s }
	e := &consentsEnv{
		users: &fakeUsers{users: map[string]query.UserView{
			liveUser:    {UserUUID: liveUser, Tenant: "acme", ExternalID: ext("customer-42"), CreatedAt: userCreatedAt},
			deletedUser: {UserUUID: deletedUser, Tenant: "acme", CreatedAt: userCreatedAt},
			globexUser:  {UserUUID: globexUser, Tenant: "globex", ExternalID: ext("customer-7"), CreatedAt: userCreatedAt},
		}},
		now: orderStarted.Add(4*time.Second + 300*time.Millisecond),
	}
	all := []string{"CHECKING_ACCOUNTS", "CREDIT_CARDS", "SAVINGS_ACCOUNTS"}
	consent := func(id, tenant, user, status string, minute int) query.ConsentView {
		at := consentCreated.Add(time.Duration(minute) * time.Minute)
		return query.ConsentView{ConsentID: id, Tenant: tenant, UserUUID: user, Company: "se-demo-bank",
			LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", Status: status, Scope: all, CreatedAt: at, UpdatedAt: at}
	}
	awaiting := consent(awaitingConsent, "acme", liveUser, "AWAITING_AUTHORIZATION", 0)
	awaiting.EIDOrder = &query.ConsentEIDOrder{StartedAt: orderStarted, AutoStartToken: "auto-start-token-1",
		QRStartToken: qrToken, QRStartSecret: qrSecret}
	authorized := consent(authorizedConsent, "acme", liveUser, "AUTHORIZED", 1)
	authorized.Scope = []string{"CHECKING_ACCOUNTS"}
	authorized.AuthorizedAt, authorized.ExpiresAt = authorizedAt, expiresAt
	failed := consent(failedConsent, "acme", liveUser, "FAILED", 2)
	failed.Error = &query.ConsentError{Code: "AUTHENTICATION_CANCELLED", Message: "The user cancelled."}
	initiated := consent(initiatedConsent, "acme", liveUser, "INITIATED", 2) // the same ms as failed: the id breaks the tie
	initiated.LoginMethod = "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK"
	e.consents = &fakeConsents{all: []query.ConsentView{awaiting, authorized, failed, initiated,
		consent(otherUserConsent, "acme", deletedUser, "REVOKED", 3), consent(globexConsent, "globex", globexUser, "INITIATED", 4)}}

	keys, err := sessiontoken.GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := sessiontoken.New(keys, sessiontoken.Config{Issuer: "samla-test"})
	if err != nil {
		t.Fatal(err)
	}
	eng := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme", globexKey: "globex"},
		RateLimit: httpapi.RateLimit{Disabled: true}, Sessions: tokens, SessionUsers: allLive{}})
	httpquery.RegisterRoutes(eng, httpquery.Deps{Status: &fakeStatus{}, History: &fakeHistory{}, Companies: companytest.Catalog(),
		Users: e.users, UserCollections: &fakeUserCollections{}, Consents: e.consents, UserConsents: e.consents,
		Now: func() time.Time { return e.now }})
	e.engine = eng
	issued, err := tokens.Issue("acme", liveUser, "")
	if err != nil {
		t.Fatal(err)
	}
	e.token = issued.Token
	return e
}

func (e *consentsEnv) get(path, key string) *httptest.ResponseRecorder {
	return httpapitest.Get(e.engine, path, key, preview)
}

func (e *consentsEnv) sessionGet(path string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set(httpapi.HeaderAuthorization, "Bearer "+e.token)
	r.Header.Set(httpapi.HeaderServiceVersion, preview)
	w := httptest.NewRecorder()
	e.engine.ServeHTTP(w, r)
	return w
}

func assertBody(t *testing.T, w *httptest.ResponseRecorder, want string) {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if w.Body.String() != want {
		t.Fatalf("body %s\nwant %s", w.Body, want)
	}
	if w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control %q", w.Header().Get("Cache-Control"))
	}
}

// TestConsentStatusAwaitingAuthorization: the poll carries the autostart token and the animated
// QR data of the poll's second, computed from the order's secret, which never shows.
func TestConsentStatusAwaitingAuthorization(t *testing.T) {
	e := newConsentsEnv(t)
	want := func(sec int64) string {
		return `{"consentId":"` + awaitingConsent + `","status":"AWAITING_AUTHORIZATION",` +
			`"scope":["CHECKING_ACCOUNTS","CREDIT_CARDS","SAVINGS_ACCOUNTS"],` +
			`"authInstructions":{"qrData":"` + eid.QRData(qrToken, qrSecret, orderStarted, orderStarted.Add(time.Duration(sec)*time.Second)) +
			`","autoStartToken":"auto-start-token-1"},"pollingInterval":1000}`
	}
	w := e.get("/consents/"+awaitingConsent+"/status", acmeKey)
	assertBody(t, w, want(4))
	if !strings.Contains(w.Body.String(), "bankid."+qrToken+".4.") || strings.Contains(w.Body.String(), qrSecret) {
		t.Fatalf("QR data of second 4 without the secret: %s", w.Body)
	}
	// A second later the QR data is another.
	e.now = e.now.Add(time.Second)
	assertBody(t, e.get("/consents/"+awaitingConsent+"/status", acmeKey), want(5))
	// An uppercase spelling of the id is the same consent.
	assertBody(t, e.get("/consents/"+strings.ToUpper(awaitingConsent)+"/status", acmeKey), want(5))
}

func TestConsentStatusOfEveryOtherStatus(t *testing.T) {
	e := newConsentsEnv(t)
	assertBody(t, e.get("/consents/"+authorizedConsent+"/status", acmeKey),
		`{"consentId":"`+authorizedConsent+`","status":"AUTHORIZED","expiresAt":"2026-10-29T08:01:20.250Z",`+
			`"scope":["CHECKING_ACCOUNTS"],"pollingInterval":1000}`)
	assertBody(t, e.get("/consents/"+failedConsent+"/status", acmeKey),
		`{"consentId":"`+failedConsent+`","status":"FAILED","scope":["CHECKING_ACCOUNTS","CREDIT_CARDS","SAVINGS_ACCOUNTS"],`+
			`"pollingInterval":1000,"error":{"code":"AUTHENTICATION_CANCELLED","message":"The user cancelled."}}`)
	assertBody(t, e.get("/consents/"+initiatedConsent+"/status", acmeKey),
		`{"consentId":"`+initiatedConsent+`","status":"INITIATED","scope":["CHECKING_ACCOUNTS","CREDIT_CARDS","SAVINGS_ACCOUNTS"],`+
			`"pollingInterval":1000}`)
	// An awaiting consent whose order's tokens were erased still says it awaits its authorization.
	e.consents.all[0].EIDOrder = nil
	w := e.get("/consents/"+awaitingConsent+"/status", acmeKey)
	if got := decodeBody[map[string]json.RawMessage](t, w); string(got["authInstructions"]) != `{}` {
		t.Fatalf("erased order: %s", w.Body)
	}
}

// TestConsentPastItsExpiryReadsExpired: an authorized consent past expiresAt is EXPIRED at once,
// before the worker records the expiry.
func TestConsentPastItsExpiryReadsExpired(t *testing.T) {
	e := newConsentsEnv(t)
	e.now = expiresAt.Add(-time.Millisecond)
	if got := decodeBody[map[string]any](t, e.get("/consents/"+authorizedConsent, acmeKey)); got["status"] != "AUTHORIZED" {
		t.Fatalf("before the expiry: %v", got)
	}
	e.now = expiresAt
	for _, path := range []string{"/consents/" + authorizedConsent, "/consents/" + authorizedConsent + "/status"} {
		if got := decodeBody[map[string]any](t, e.get(path, acmeKey)); got["status"] != "EXPIRED" || got["expiresAt"] != "2026-10-29T08:01:20.250Z" {
			t.Fatalf("%s at the expiry: %v", path, got)
		}
	}
	page := decodeBody[consentsPage](t, e.get("/users/"+liveUser+"/consents", acmeKey))
	for _, it := range page.Items {
		if it.ConsentID == authorizedConsent && it.Status != "EXPIRED" {
			t.Fatalf("listed as %s", it.Status)
		}
	}
}

func TestGetConsent(t *testing.T) {
	e := newConsentsEnv(t)
	assertBody(t, e.get("/consents/"+authorizedConsent, acmeKey),
		`{"consentId":"`+authorizedConsent+`","userUuid":"`+liveUser+`","company":"se-demo-bank","status":"AUTHORIZED",`+
			`"scope":["CHECKING_ACCOUNTS"],"createdAt":"2026-05-02T08:01:00.250Z","authorizedAt":"2026-05-02T08:01:20.250Z",`+
			`"expiresAt":"2026-10-29T08:01:20.250Z"}`)
	assertBody(t, e.get("/consents/"+failedConsent, acmeKey),
		`{"consentId":"`+failedConsent+`","userUuid":"`+liveUser+`","company":"se-demo-bank","status":"FAILED",`+
			`"scope":["CHECKING_ACCOUNTS","CREDIT_CARDS","SAVINGS_ACCOUNTS"],"createdAt":"2026-05-02T08:02:00.250Z",`+
			`"error":{"code":"AUTHENTICATION_CANCELLED","message":"The user cancelled."}}`)
	// The consent itself never shows the order's tokens.
	if w := e.get("/consents/"+awaitingConsent, acmeKey); strings.Contains(w.Body.String(), "token") || strings.Contains(w.Body.String(), "secret") {
		t.Fatalf("the consent shows its order: %s", w.Body)
	}
}

// TestConsentsOfOtherClientsAreNotFound: another client's consent, an unknown one and a
// malformed id are one 404; a reader that forgot the tenant leaks nothing either.
func TestConsentsOfOtherClientsAreNotFound(t *testing.T) {
	e := newConsentsEnv(t)
	for _, id := range []string{globexConsent, unknownConsent, "not-a-uuid", strings.ToUpper(globexConsent)} {
		for _, path := range []string{"/consents/" + id, "/consents/" + id + "/status"} {
			if code := problemCode(t, e.get(path, acmeKey), http.StatusNotFound); code != httpquery.CodeConsentNotFound {
				t.Errorf("%s: %s", path, code)
			}
		}
	}
	if w := e.get("/consents/"+globexConsent, globexKey); w.Code != http.StatusOK {
		t.Fatalf("globex's own consent: %d %s", w.Code, w.Body)
	}
	e.consents.leakyRead = true
	for _, path := range []string{"/consents/" + globexConsent, "/consents/" + globexConsent + "/status"} {
		if code := problemCode(t, e.get(path, acmeKey), http.StatusNotFound); code != httpquery.CodeConsentNotFound {
			t.Errorf("leaky reader, %s: %s", path, code)
		}
	}
	page := decodeBody[consentsPage](t, e.get("/users/"+liveUser+"/consents", acmeKey))
	for _, it := range page.Items {
		if it.ConsentID == globexConsent || it.ConsentID == otherUserConsent {
			t.Fatalf("leaky reader: listed %s", it.ConsentID)
		}
	}
	e.consents.leakyRead = false
	e.consents.err = errors.New("read model down")
	for _, path := range []string{"/consents/" + awaitingConsent, "/consents/" + awaitingConsent + "/status", "/users/" + liveUser + "/consents"} {
		httpapitest.Problem(t, e.get(path, acmeKey), http.StatusInternalServerError)
	}
}

type consentsPage struct {
	Items []struct {
		ConsentID string   `json:"consentId"`
		UserUUID  string   `json:"userUuid"`
		Status    string   `json:"status"`
		Scope     []string `json:"scope"`
	} `json:"items"`
	NextCursor *string `json:"nextCursor"`
}

func TestUserConsentsPages(t *testing.T) {
	e := newConsentsEnv(t)
	var ids []string
	path := "/users/" + liveUser + "/consents?limit=3"
	for pages := 0; ; pages++ {
		page := decodeBody[consentsPage](t, e.get(path, acmeKey))
		for _, it := range page.Items {
			if it.UserUUID != liveUser {
				t.Fatalf("listed %+v", it)
			}
			ids = append(ids, it.ConsentID)
		}
		if page.NextCursor == nil {
			if pages != 1 || len(page.Items) != 1 {
				t.Fatalf("last page %d has %d items", pages, len(page.Items))
			}
			break
		}
		if len(page.Items) != 3 || pages > 2 {
			t.Fatalf("page %d: %+v", pages, page)
		}
		path = "/users/" + liveUser + "/consents?limit=3&cursor=" + url.QueryEscape(*page.NextCursor)
	}
	want := []string{initiatedConsent, failedConsent, authorizedConsent, awaitingConsent}
	if !slices.Equal(ids, want) {
		t.Fatalf("listed %v, want %v", ids, want)
	}
	// A page that holds exactly the rest has no next cursor.
	if page := decodeBody[consentsPage](t, e.get("/users/"+liveUser+"/consents?limit=4", acmeKey)); page.NextCursor != nil || len(page.Items) != 4 {
		t.Fatalf("page of 4: %+v", page)
	}
	// The default page is 50, the largest 500; the reader is asked for one more.
	e.consents.limits = nil
	decodeBody[consentsPage](t, e.get("/users/"+liveUser+"/consents", acmeKey))
	decodeBody[consentsPage](t, e.get("/users/"+liveUser+"/consents?limit=500", acmeKey))
	if !slices.Equal(e.consents.limits, []int{51, 501}) {
		t.Fatalf("limits asked for %v", e.consents.limits)
	}
	// A user without consents has an empty list; a deleted user's consents are still listed.
	e.consents.all = e.consents.all[4:]
	if w := e.get("/users/"+liveUser+"/consents", acmeKey); w.Code != http.StatusOK || w.Body.String() != `{"items":[]}` {
		t.Fatalf("empty list: %d %s", w.Code, w.Body)
	}
	if page := decodeBody[consentsPage](t, e.get("/users/"+deletedUser+"/consents", acmeKey)); len(page.Items) != 1 || page.Items[0].Status != "REVOKED" {
		t.Fatalf("the deleted user's consents: %+v", page)
	}
}

func TestUserConsentsRefusals(t *testing.T) {
	e := newConsentsEnv(t)
	first := decodeBody[consentsPage](t, e.get("/users/"+liveUser+"/consents?limit=1", acmeKey))
	if first.NextCursor == nil {
		t.Fatal("no cursor")
	}
	// A cursor of the user's collections, of another user's consents, or none at all, is refused.
	collectionsCursor := decodeBody[collectionsPage](t, func() *httptest.ResponseRecorder {
		ue := newUsersEnv(t)
		return ue.get("/users/"+liveUser+"/collections?limit=1", acmeKey, preview)
	}()).NextCursor
	otherUsers := decodeBody[consentsPage](t, func() *httptest.ResponseRecorder {
		e.consents.all = append(e.consents.all, e.consents.all[4])
		e.consents.all[len(e.consents.all)-1].ConsentID = unknownConsent
		return e.get("/users/"+deletedUser+"/consents?limit=1", acmeKey)
	}()).NextCursor
	if collectionsCursor == nil || otherUsers == nil {
		t.Fatal("no cursors to try")
	}
	for _, q := range []string{"limit=0", "limit=501", "limit=x", "cursor=", "cursor=abc",
		"cursor=" + url.QueryEscape(*collectionsCursor), "cursor=" + url.QueryEscape(*otherUsers)} {
		p := httpapitest.Problem(t, e.get("/users/"+liveUser+"/consents?"+q, acmeKey), http.StatusBadRequest)
		if len(p.Errors) != 1 {
			t.Errorf("%s: %+v", q, p)
		}
	}
	// The same cursor is refused to another client: it is bound to its client too.
	if w := e.get("/users/"+liveUser+"/consents?cursor="+url.QueryEscape(*first.NextCursor), globexKey); w.Code != http.StatusBadRequest {
		t.Errorf("another client's cursor: %d", w.Code)
	}
	// Another client's user, an unknown one: not found, never an empty list.
	for _, id := range []string{globexUser, "0196a1b2-9999-7e5f-8a9b-0c1d2e3f4a5b", "x"} {
		if code := problemCode(t, e.get("/users/"+id+"/consents", acmeKey), http.StatusNotFound); code != httpquery.CodeUserNotFound {
			t.Errorf("%s: %s", id, code)
		}
	}
}

// TestConsentQueriesAreNotInOlderVersions: older versions have no consents.
func TestConsentQueriesAreNotInOlderVersions(t *testing.T) {
	e := newConsentsEnv(t)
	for _, path := range []string{"/consents/" + awaitingConsent, "/consents/" + awaitingConsent + "/status", "/users/" + liveUser + "/consents"} {
		for _, version := range []string{"2025-01-01", ""} {
			if code := problemCode(t, httpapitest.Get(e.engine, path, acmeKey, version), http.StatusNotFound); code != httpapi.CodeNotFound {
				t.Errorf("%s in %q: %s", path, version, code)
			}
		}
	}
}

// TestConsentQueriesOfASession: a user's session reads its own user's consents, and is refused
// another user's (403), while unknown ones stay not found.
func TestConsentQueriesOfASession(t *testing.T) {
	e := newConsentsEnv(t)
	for _, path := range []string{"/consents/" + awaitingConsent, "/consents/" + awaitingConsent + "/status", "/users/" + liveUser + "/consents"} {
		if w := e.sessionGet(path); w.Code != http.StatusOK {
			t.Errorf("own %s: %d %s", path, w.Code, w.Body)
		}
	}
	for _, path := range []string{"/consents/" + otherUserConsent, "/consents/" + otherUserConsent + "/status",
		"/users/" + deletedUser + "/consents", "/users/" + globexUser + "/consents"} {
		if code := problemCode(t, e.sessionGet(path), http.StatusForbidden); code != httpapi.CodeForbiddenForSession {
			t.Errorf("%s: %s", path, code)
		}
	}
	for _, path := range []string{"/consents/" + unknownConsent, "/consents/" + globexConsent + "/status"} {
		if code := problemCode(t, e.sessionGet(path), http.StatusNotFound); code != httpquery.CodeConsentNotFound {
			t.Errorf("%s: %s", path, code)
		}
	}
}
