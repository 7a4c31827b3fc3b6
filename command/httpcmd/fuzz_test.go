package httpcmd_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
	"github.com/samla/samla/platform/keystore"
)

// The request-body fuzz targets send arbitrary bodies to the real engine, middleware and
// handlers, over the real application services and an in-memory event store, and require of
// every answer: no 5xx (a panic the engine recovers is a 500, and its stack is in the failure),
// a problem (application/problem+json with its status and a code) for every refusal, and at
// most fuzzMaxAlloc bytes allocated on the heap for one request. Bodies longer than
// fuzzMaxBody are skipped: the limits of large bodies (MaxBody, the PDF) have tests of their
// own, and the bound is about what a small body can make the server do.
const (
	fuzzMaxBody = 64 << 10
	// fuzzMaxAlloc is a thousand times fuzzMaxBody: a request that decodes, validates, records
	// and answers a body takes a few times its size plus the engine's fixed cost (well under a
	// MiB); only a body that makes the server allocate what it asks for (a length, a count, a
	// nesting) comes near this.
	fuzzMaxAlloc = 64 << 20
	// fuzzRebuildEvery is how many requests one world serves before it is rebuilt, so that its
	// event store does not grow without bound over a long run.
	fuzzRebuildEvery = 500
)

// fuzzRegistry is the event registry every world shares (building it compiles every schema).
var fuzzRegistry = sync.OnceValues(eventschema.NewRegistry)

// fuzzWorld is one engine over one event store, with what its target needs besides.
type fuzzWorld struct {
	*env
	reg    *eventschema.Registry
	logs   *bytes.Buffer // the engine's log: a recovered panic's stack
	served int
	// next is the collection the next supplement-info goes to; "" when one must be prepared.
	next string
}

// fuzzRig rebuilds its world every fuzzRebuildEvery requests.
type fuzzRig struct {
	build func(t *testing.T) *fuzzWorld
	world *fuzzWorld
}

func (r *fuzzRig) current(t *testing.T) *fuzzWorld {
	if r.world == nil || r.world.served >= fuzzRebuildEvery {
		r.world = r.build(t)
	}
	r.world.served++
	return r.world
}

// newFuzzWorld builds the store and, with mount, the engine: no rate limit (a fuzzer is one
// very busy client), its log in a buffer.
func newFuzzWorld(t *testing.T, mount func(w *fuzzWorld, clock func() time.Time) httpcmd.Deps) *fuzzWorld {
	t.Helper()
	reg, err := fuzzRegistry()
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return testNow }
	store := memstore.New()
	w := &fuzzWorld{reg: reg, logs: &bytes.Buffer{},
		env: &env{store: store, repo: repository.New(store, reg, collection.Kind, repository.WithClock(clock))}}
	e := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme", globexKey: "globex"},
		RateLimit: httpapi.RateLimit{Disabled: true}, Logger: slog.New(slog.NewTextHandler(w.logs, nil))})
	deps := mount(w, clock)
	deps.FingerprintKey, deps.Now = fingerprintKey, clock
	httpcmd.RegisterRoutes(e, deps)
	w.engine = e
	return w
}

// given appends events to a stream of the world's store.
func (w *fuzzWorld) given(t *testing.T, stream string, events ...domain.Event) {
	t.Helper()
	envs := make([]eventschema.Envelope, len(events))
	for i, ev := range events {
		typ, version, payload, err := w.reg.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		envs[i] = eventschema.Envelope{EventID: uuid.NewString(), Type: typ, SchemaVersion: version, OccurredAt: testNow, Payload: payload}
	}
	if _, err := w.store.Append(context.Background(), stream, eventstore.Any(), envs); err != nil {
		t.Fatal(err)
	}
}

// collectionsWorld serves the collection commands: the real CollectionService, with consents,
// over a store that knows alice, a live user of acme, and her authorized consent at the bank.
func collectionsWorld(t *testing.T) *fuzzWorld {
	return newFuzzWorld(t, func(w *fuzzWorld, clock func() time.Time) httpcmd.Deps {
		w.given(t, user.StreamName(alice), user.Created{UserUUID: alice, ClientID: "acme", CreatedAt: testNow,
			Personal: &user.CreatedPerson{ExternalID: "alice", RequestHash: "h"}})
		w.given(t, consent.StreamName(aliceConsent), aliceAuthorized(aliceConsent, alice, "se-demo-bank")...)
		svc := app.NewCollectionService(companytest.Catalog(), w.repo, repository.New(w.store, w.reg, user.Kind), clock).
			WithConsents(repository.New(w.store, w.reg, consent.Kind, repository.WithClock(clock)), listedConsents{alice: {aliceConsent}})
		return httpcmd.Deps{Collections: svc}
	})
}

// fuzzRequest serves one request with acme's key in version, measuring what it allocates, and
// holds the answer to the rules above.
func (w *fuzzWorld) fuzzRequest(t *testing.T, method, path, version string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	r.Header.Set(httpapi.HeaderAPIKey, acmeKey)
	r.Header.Set(httpapi.HeaderServiceVersion, version)
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	w.logs.Reset()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w.engine.ServeHTTP(rec, r)
	runtime.ReadMemStats(&after)
	if rec.Code >= 500 {
		t.Fatalf("%s %s (%s) with %q: %d %s\n%s", method, path, version, body, rec.Code, rec.Body, w.logs)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > fuzzMaxAlloc {
		t.Fatalf("%s %s with a body of %d bytes allocated %d MiB, more than %d MiB", method, path, len(body), n>>20, fuzzMaxAlloc>>20)
	}
	if rec.Code >= 300 {
		var p httpapi.Problem
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
			t.Fatalf("%s %s with %q: %d with Content-Type %q: %s", method, path, body, rec.Code, ct, rec.Body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != rec.Code || p.Code == "" {
			t.Fatalf("%s %s with %q: %d with problem %s (%v)", method, path, body, rec.Code, rec.Body, err)
		}
	}
	return rec
}

// fuzzBodies adds every seed body to f.
func fuzzBodies(f *testing.F, bodies ...string) {
	for _, b := range bodies {
		f.Add([]byte(b))
	}
}

// hostileBodies are seeds of every target: malformed, deep, long, repeated and not UTF-8.
func hostileBodies() []string {
	return []string{
		``, `null`, `[]`, `{}`, `{"a":1}}`, `{"company":"a","company":"b"}`, `{"Company":"x"}`,
		strings.Repeat(`[`, 10000), strings.Repeat(`{"a":`, 3000) + `1` + strings.Repeat(`}`, 3000),
		`{"parameters":[` + strings.Repeat(`{},`, 5000) + `{}]}`, `{"inputs":[` + strings.Repeat(`1,`, 5000) + `1]}`,
		`{"company":"` + strings.Repeat("a", 60000) + `"}`, "{\"company\":\"\xff\xfe\\ud800\"}", `{"a":1e999999}`,
	}
}

// FuzzCreateCollectionV1 fuzzes the 2025-01-01 body of POST /collections (the input map).
func FuzzCreateCollectionV1(f *testing.F) {
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4\n%%EOF\n"))
	fuzzBodies(f,
		`{"company":"se-demo-pension","loginMethod":"`+mock+`","input":{"SWEDISH_PERSONAL_NUMBER":"19121212-1212","ACCOUNT_OWNER_NAME":"Tolvan Tolvansson"}}`,
		`{"company":"se-demo-insurer","loginMethod":"`+mock+`","input":{"SWEDISH_PERSONAL_NUMBER":"900101-0017"}}`,
		`{"company":"se-demo-insurer","loginMethod":"`+mock+`"}`,
		`{"company":"se-demo-insurer","loginMethod":"PDF_UPLOAD","input":{"PDF_DOCUMENT":"`+pdf+`"}}`,
		`{"company":"se-demo-insurer","loginMethod":"`+mock+`","input":{"SWEDISH_PERSONAL_NUMBER":1,"FAX":"x","ACCOUNT_OWNER_NAME":null}}`,
		`{"company":"nope","loginMethod":"SWEDISH_MOBILE_EID","input":{"SWEDISH_PERSONAL_NUMBER":"121212+1212"}}`,
	)
	fuzzBodies(f, hostileBodies()...)
	rig := &fuzzRig{build: collectionsWorld}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > fuzzMaxBody {
			return
		}
		rig.current(t).fuzzRequest(t, http.MethodPost, "/collections", string(httpapi.V20250101), body)
	})
}

// FuzzCreateCollectionV2 fuzzes the 2026-04-01 body of POST /collections (typed parameters).
func FuzzCreateCollectionV2(f *testing.F) {
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4\n%%EOF\n"))
	fuzzBodies(f,
		v2Body("se-demo-insurer", mock, pnParam("199001010017"), `{"type":"AccountOwnerNameParameter","name":"Tolvan Tolvansson"}`),
		v2Body("se-demo-insurer", mock, pnParam("19900101-0017"), `{"type":"SwedishEidParameter","personalNumber":"900101-0017"}`),
		v2Body("se-demo-insurer", "PDF_UPLOAD", `{"type":"PdfDocumentParameter","contentBase64":"`+pdf+`","fileName":"policy.pdf"}`),
		bankBody(alice, `{"type":"Psd2AisConsentParameter","consentId":"`+aliceConsent+`"}`),
		bankBody(alice, `{"type":"Psd2AisConsentParameter","reuseStoredConsent":true}`),
		bankBody("", `{"type":"Psd2AisConsentParameter","reuseStoredConsent":false}`),
		`{"company":"se-demo-insurer","loginMethod":"`+mock+`","userUuid":"`+strings.ToUpper(alice)+`","parameters":[]}`,
		v2Body("se-demo-insurer", mock, pnParam("199001010017"), pnParam("199001010025"), `{"type":"Unknown"}`, `{"type":1}`, `null`),
	)
	fuzzBodies(f, hostileBodies()...)
	rig := &fuzzRig{build: collectionsWorld}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > fuzzMaxBody {
			return
		}
		rig.current(t).fuzzRequest(t, http.MethodPost, "/collections", string(httpapi.V20260401), body)
	})
}

// fuzzSupplement sends a fuzzed supplement-info to a collection of acme in status, prepared
// afresh after an input it accepted (which moves it on).
func fuzzSupplement(t *testing.T, rig *fuzzRig, status collection.Status, details collection.StatusDetails, body []byte) {
	w := rig.current(t)
	if w.next == "" {
		w.next = w.startIn(t, status, details)
	}
	rec := w.fuzzRequest(t, http.MethodPost, "/collections/"+w.next+"/supplement-info", string(httpapi.V20260401), body)
	if rec.Code < 300 {
		w.next = ""
	}
}

// FuzzSupplementInfoCollectionInput fuzzes POST /collections/{id}/supplement-info in the
// CollectionInput shape ({"inputs":[…]}), at a collection that asks for contact details.
func FuzzSupplementInfoCollectionInput(f *testing.F) {
	fuzzBodies(f, contactBody,
		`{"inputs":[{"type":"EMAIL","value":"a.b.se"},{"type":"MOBILE_PHONE_NUMBER","value":"+46 70 123"}]}`,
		`{"inputs":[{"type":"EMAIL"},{"value":"x"},{"type":"","value":""},{"type":"FAX","value":"1"}]}`,
		`{"inputs":[]}`, `{"inputs":null}`, `{"inputs":[{"type":"EMAIL","value":"a@b.se","extra":1}]}`,
		`{"inputs":[{"type":"EMAIL","value":"a@b.se"}],"responses":[]}`,
	)
	fuzzBodies(f, hostileBodies()...)
	rig := &fuzzRig{build: collectionsWorld}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > fuzzMaxBody {
			return
		}
		fuzzSupplement(t, rig, collection.StatusContactFormPending, collection.StatusDetails{}, body)
	})
}

// FuzzSupplementInfoResponseObject fuzzes POST /collections/{id}/supplement-info in the
// ResponseObject shape ({"responses":[…]}), at a collection waiting for the client's answers
// to two requests.
func FuzzSupplementInfoResponseObject(f *testing.F) {
	fuzzBodies(f,
		`{"responses":[{"requestId":"r1","status":200,"headers":{"Content-Type":"application/json"},"body":"{\"autoStartToken\":\"x\"}"},`+
			`{"requestId":"some-new-url","status":404,"headers":{},"body":""}]}`,
		`{"responses":[{"requestId":"r2","status":302,"headers":{"Location":"https://company.example/next"}}]}`,
		`{"responses":[{"requestId":"","status":99999999999},{"status":"200"},{"requestId":"r1","headers":{"":"x"}}]}`,
		`{"responses":[{"requestId":"r1","status":200,"headers":{"A":"b","a":"c"}}]}`,
		`{"responses":[{"requestId":"r1","status":200,"body":"`+strings.Repeat("x", 70000)+`"}]}`,
		`{"responses":[]}`,
	)
	fuzzBodies(f, hostileBodies()...)
	rig := &fuzzRig{build: collectionsWorld}
	details := collection.StatusDetails{Instructions: []collection.Instruction{
		{RequestID: "r1", Method: "POST", URL: "https://company.example/eid/start"},
		{RequestID: "r2", Method: "GET", URL: "https://company.example/eid/collect"}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > fuzzMaxBody {
			return
		}
		fuzzSupplement(t, rig, collection.StatusWaitingForUserAction, details, body)
	})
}

// usersWorld serves the user and consent commands: the real UserService and ConsentService,
// over a store that knows alice, a live user of acme.
func usersWorld(t *testing.T) *fuzzWorld {
	return newFuzzWorld(t, func(w *fuzzWorld, clock func() time.Time) httpcmd.Deps {
		w.given(t, user.StreamName(alice), user.Created{UserUUID: alice, ClientID: "acme", CreatedAt: testNow,
			Personal: &user.CreatedPerson{ExternalID: "alice", RequestHash: "h"}})
		users := repository.New(w.store, w.reg, user.Kind, repository.WithClock(clock))
		userService := app.NewUserService(users, repository.New(w.store, w.reg, user.ReservationKind, repository.WithClock(clock)),
			fingerprintKey, app.Erasure{Keys: keystore.NewMemory(), Collections: noCollections{}, Ends: w.repo,
				Consents: noConsents{}, Revokes: repository.New(w.store, w.reg, consent.Kind, repository.WithClock(clock))}, clock)
		consents := app.NewConsentService(companytest.Catalog(), repository.New(w.store, w.reg, consent.Kind, repository.WithClock(clock)), users, clock)
		return httpcmd.Deps{Collections: &recordingCommands{}, Users: userService, Consents: consents}
	})
}

// FuzzCreateUser fuzzes the body of POST /users.
func FuzzCreateUser(f *testing.F) {
	fuzzBodies(f, `{"externalId":"customer-42"}`, `{"externalId":"alice"}`, `{"externalId":"`+strings.Repeat("å", 256)+`"}`,
		`{"externalId":null}`, `{"externalId":""}`, `{"externalId":"a\nb"}`, `{"externalId":42}`, `{"externalId":"a","name":"b"}`,
		`{"externalId":"`+strings.Repeat("x", 257)+`"}`)
	fuzzBodies(f, hostileBodies()...)
	rig := &fuzzRig{build: usersWorld}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > fuzzMaxBody {
			return
		}
		rig.current(t).fuzzRequest(t, http.MethodPost, "/users", string(httpapi.V20260401), body)
	})
}

// FuzzCreateConsent fuzzes the body of POST /consents.
func FuzzCreateConsent(f *testing.F) {
	fuzzBodies(f,
		consentBody(alice, "se-demo-bank", bankOtherDevice, tolvan),
		consentBody(alice, "se-demo-bank", bankOtherDevice, "19900101-0017", `"scope":["SAVINGS_ACCOUNTS","CHECKING_ACCOUNTS"]`),
		consentBody(strings.ToUpper(alice), "se-demo-insurer", mock, tolvan, `"scope":["CREDIT_CARDS","CREDIT_CARDS"]`),
		consentBody(bob, "se-demo-bank", "PDF_UPLOAD", "199001010018", `"scope":[]`),
		`{"userUuid":"`+alice+`","company":"se-demo-bank","loginMethod":"`+bankOtherDevice+`","parameters":[{"type":"SwedishPersonalNumberParameter","personalNumber":"`+tolvan+`"}]}`,
		`{"userUuid":"`+alice+`","company":"se-demo-bank","loginMethod":"`+bankOtherDevice+`","parameters":[{"type":"SwedishEidParameter"},{"type":"SwedishEidParameter"}],"scope":null}`,
	)
	fuzzBodies(f, hostileBodies()...)
	rig := &fuzzRig{build: usersWorld}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > fuzzMaxBody {
			return
		}
		rig.current(t).fuzzRequest(t, http.MethodPost, "/consents", string(httpapi.V20260401), body)
	})
}

// cancellationsWorld serves the cancellation commands: the real CancellationService over a
// store with acme's signing configuration and its completed insurance collection cancelColl
// (insurances i1 and i2), as newCancellationEnv has.
func cancellationsWorld(t *testing.T) *fuzzWorld {
	return newFuzzWorld(t, func(w *fuzzWorld, clock func() time.Time) httpcmd.Deps {
		w.given(t, client.StreamName("acme"), client.Registered{ClientID: "acme", Name: "Acme", RegisteredAt: testNow},
			client.SigningConfigured{TemplateVersion: 1, Template: "T", TemplateHash: "sha256:t", ConfiguredAt: testNow,
				Personal: &client.SigningSecret{ProviderKey: "provider-key-0123456789"}})
		w.given(t, collection.StreamName(cancelColl),
			collection.Started{CollectionID: cancelColl, ClientID: "acme", Company: "se-demo-insurer", Product: collection.ProductInsurance,
				LoginMethod: mock, APIVersion: "2026-04-01", UserUUID: aliceUUID, StartedAt: testNow,
				Personal: &collection.StartedPerson{PersonalNumber: "191212121212", RequestHash: "h"}},
			collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusCollecting, ChangedAt: testNow},
			collection.InsurancesCollected{InsuranceCount: 2, CollectedAt: testNow, Personal: &collection.InsuranceRecords{
				Insurances: []collection.Insurance{{ID: "i1"}, {ID: "i2"}}}},
			collection.StatusChanged{From: collection.StatusCollecting, To: collection.StatusCompleted, ChangedAt: testNow})
		svc := app.NewCancellationService(repository.New(w.store, w.reg, cancellation.Kind, repository.WithClock(clock)),
			w.repo, repository.New(w.store, w.reg, client.Kind, repository.WithClock(clock)),
			keystore.Erasures{Keys: keystore.NewMemory()}, clock)
		return httpcmd.Deps{Collections: &recordingCommands{}, Cancellations: svc, CallbackVerifier: fakeVerifier{}}
	})
}

// FuzzRequestCancellations fuzzes the body of POST /cancellations.
func FuzzRequestCancellations(f *testing.F) {
	fuzzBodies(f,
		cancelBody(`"i1","i2"`, ""), cancelBody(`"i2"`, ""), cancelBody(`"i1","i1"`, ""), cancelBody(`"i3"`, ""),
		cancelBody(`"i1"`, `,"fax":"1"`), strings.Replace(cancelBody(`"i1"`, ""), "tolvan@example.se", "tolvan", 1),
		`{"collectionId":"`+cancelColl+`","insuranceIds":["i1"],"deliveryMethod":"SMS","phoneNumber":"46701234567"}`,
		`{"collectionId":"`+strings.ToUpper(cancelColl)+`","insuranceIds":["i2"],"deliveryMethod":"SMS"}`,
		`{"collectionId":"`+noneColl+`","insuranceIds":[],"deliveryMethod":"POST"}`,
		`{"insuranceIds":["i1"],"deliveryMethod":"EMAIL","email":"a@b.se"}`,
		`{"collectionId":"x","insuranceIds":[`+strings.Repeat(`"i1",`, 100)+`"i1"]}`,
	)
	fuzzBodies(f, hostileBodies()...)
	rig := &fuzzRig{build: cancellationsWorld}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > fuzzMaxBody {
			return
		}
		rig.current(t).fuzzRequest(t, http.MethodPost, "/cancellations", string(httpapi.V20260401), body)
	})
}
