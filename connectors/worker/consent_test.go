package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain"
	dcompany "github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
)

const (
	bank        = "se-demo-bank"
	otherDevice = dcompany.LoginEIDOtherDevice
	// Consent personas of SANDBOX.md.
	pnConsentOK        = "199001010017"
	pnConsentCancel    = "199001010090"
	pnConsentTimeout   = "199001010108"
	pnConsentMismatch  = "199001010082"
	pnConsentConflict  = "199001010116"
	pnConsentBankError = "199001010157"
)

// consentEnv is an env whose consents are sealed as the running service seals them, with a
// consent repository and the key store that tells erased users.
type consentEnv struct {
	*env
	crepo *repository.Repository[*consent.Consent]
	keys  *keystore.Memory
}

func newConsentEnv(t *testing.T, o envOptions) *consentEnv {
	t.Helper()
	e := newEnv(t, o)
	keys := keystore.NewMemory()
	return &consentEnv{env: e, crepo: repository.New(e.store, e.reg, consent.Kind, repository.WithKeys(keys)), keys: keys}
}

func (e *consentEnv) config(workerID string) worker.ConsentConfig {
	return worker.ConsentConfig{
		WorkerID: workerID, Repo: e.crepo, Bank: e.companies, Metrics: e.metrics, Logger: e.logger,
		Erasures: keystore.Erasures{Keys: e.keys}, PollInterval: 10 * time.Millisecond,
		StaleClaimAfter: time.Minute, SweepInterval: 50 * time.Millisecond,
		EIDOrderTimeout: 5 * time.Second, Validity: time.Hour,
	}
}

func (e *consentEnv) worker(cfg worker.ConsentConfig) *worker.ConsentWorker {
	w := worker.NewConsentWorker(cfg)
	e.t.Cleanup(w.Stop)
	return w
}

// run runs the worker's sweeps until the test ends.
func (e *consentEnv) run(w *worker.ConsentWorker) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
}

// create records a consent.created as POST /consents does, for a user of its own, and returns
// the consent id and the envelope the Kafka consumer hands to HandleBatch.
func (e *consentEnv) create(pn, loginMethod string, scope ...consent.Scope) (string, eventschema.Envelope) {
	e.t.Helper()
	return e.createFor(uuid.NewString(), pn, loginMethod, scope...)
}

func (e *consentEnv) createFor(userUUID, pn, loginMethod string, scope ...consent.Scope) (string, eventschema.Envelope) {
	e.t.Helper()
	co, err := sandbox.Catalog().Get(bank)
	if err != nil {
		e.t.Fatal(err)
	}
	n, err := personnummer.Parse(pn, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	id := uuid.NewString()
	req := consent.CreateRequest{ConsentID: id, ClientID: clientID, UserUUID: userUUID, Company: co.ForConsent(),
		LoginMethod: loginMethod, Scope: scope, PersonalNumber: n, RequestHash: "h"}
	meta := repository.Meta{Tenant: clientID, CorrelationID: "req-" + id, Actor: "client:" + clientID}
	if _, _, err := e.crepo.Update(context.Background(), id, meta, func(c *consent.Consent) error { return c.Create(req, time.Now()) }, repository.NewID()); err != nil {
		e.t.Fatal(err)
	}
	return id, e.consentEnvelopes(id)[0]
}

func (e *consentEnv) loadConsent(id string) *consent.Consent {
	e.t.Helper()
	c, err := e.crepo.Load(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// change changes the consent as the command side would (DELETE /consents/{id}).
func (e *consentEnv) change(id string, decide func(*consent.Consent) error) eventschema.Envelope {
	e.t.Helper()
	meta := repository.Meta{Tenant: clientID, CorrelationID: id, Actor: "test"}
	if _, _, err := e.crepo.Update(context.Background(), id, meta, decide); err != nil {
		e.t.Fatal(err)
	}
	envs := e.consentEnvelopes(id)
	return envs[len(envs)-1]
}

func (e *consentEnv) revoke(id string) eventschema.Envelope {
	e.t.Helper()
	return e.change(id, func(c *consent.Consent) error { return c.Revoke(consent.RevokedByClient, time.Now()) })
}

func (e *consentEnv) waitConsent(id, what string, cond func(*consent.Consent) bool) *consent.Consent {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := e.loadConsent(id)
		if cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("consent %s: timed out waiting for %s; status %s, events %v", id, what, c.Status(), e.consentTypes(id))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *consentEnv) waitStatus(id string, st consent.Status) *consent.Consent {
	e.t.Helper()
	return e.waitConsent(id, string(st), func(c *consent.Consent) bool { return c.Status() == st })
}

// waitSettled waits for AUTHORIZED or a final status.
func (e *consentEnv) waitSettled(id string) *consent.Consent {
	e.t.Helper()
	return e.waitConsent(id, "AUTHORIZED or final", func(c *consent.Consent) bool {
		return c.Status() == consent.StatusAuthorized || c.Status().IsFinal()
	})
}

func (e *consentEnv) consentEnvelopes(id string) []eventschema.Envelope {
	e.t.Helper()
	envs, err := e.store.ReadStream(context.Background(), consent.StreamName(id), 0, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return envs
}

func (e *consentEnv) consentTypes(id string) []string {
	var out []string
	for _, env := range e.consentEnvelopes(id) {
		out = append(out, env.Type)
	}
	return out
}

// consentClaims lists the worker ids of the consent's claims, in order.
func (e *consentEnv) consentClaims(id string) []string {
	e.t.Helper()
	var out []string
	for _, env := range e.consentEnvelopes(id) {
		if env.Type != consent.EventClaimed {
			continue
		}
		ev, err := e.reg.Decode(env)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, ev.(consent.Claimed).WorkerID)
	}
	return out
}

func (e *consentEnv) count(id, typ string) int {
	n := 0
	for _, t := range e.consentTypes(id) {
		if t == typ {
			n++
		}
	}
	return n
}

// activeConsents is the ActiveConsents a consents read model would give, read from the store.
func (e *consentEnv) activeConsents() worker.ActiveConsents { return storeActiveConsents{e} }

type storeActiveConsents struct{ e *consentEnv }

func (a storeActiveConsents) ListNonFinal(ctx context.Context, afterCreatedAt time.Time, afterID string, limit int) ([]string, time.Time, error) {
	var open []openRow
	for _, s := range a.e.store.Streams() {
		id, ok := strings.CutPrefix(s, consent.StreamPrefix)
		if !ok {
			continue
		}
		c, err := a.e.crepo.Load(ctx, id)
		if err != nil {
			return nil, time.Time{}, err
		}
		if !c.Status().IsFinal() {
			open = append(open, openRow{createdAt: c.CreatedAt(), id: id})
		}
	}
	ids, last := pageAfter(open, afterCreatedAt, afterID, limit)
	return ids, last, nil
}

// sign is the sandbox's user signing the consent's EID order: POST /sandbox/eid/sign
// {"consentId"} over HTTP. It reports the simulator's answer.
func (e *consentEnv) sign(id string) int {
	e.t.Helper()
	body, _ := json.Marshal(map[string]string{"consentId": id})
	res, err := http.Post(e.sb.URL()+"/sandbox/eid/sign", "application/json", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	_ = res.Body.Close()
	return res.StatusCode
}

// bankStatus is the bank's consentStatus of a bank consent, read over its API.
func (e *consentEnv) bankStatus(bankConsentID string) string {
	e.t.Helper()
	res, err := http.Get(e.sb.BaseURL(bank) + "/v1/consents/" + bankConsentID + "/status")
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var v struct {
		ConsentStatus string `json:"consentStatus"`
	}
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil || res.StatusCode != 200 {
		e.t.Fatalf("bank consent status: HTTP %d, %v", res.StatusCode, err)
	}
	return v.ConsentStatus
}

func (e *consentEnv) handleConsents(w *worker.ConsentWorker, envs ...eventschema.Envelope) {
	e.t.Helper()
	if err := w.HandleBatch(context.Background(), envs); err != nil {
		e.t.Fatal(err)
	}
}

func (e *consentEnv) outcomes(status consent.Status, code consent.FailureCode) float64 {
	return value(e.t, e.metrics.ConsentOutcomes.WithLabelValues(bank, string(status), string(code)))
}

var (
	happyConsent  = []string{consent.EventCreated, consent.EventClaimed, consent.EventAuthorizationStarted, consent.EventAuthorized}
	failedConsent = []string{consent.EventCreated, consent.EventClaimed, consent.EventAuthorizationStarted, consent.EventFailed}
)

// TestConsentPersonas plays every consent persona of SANDBOX.md with both EID methods of the
// bank: the MOCK user acts by itself, the OTHER_DEVICE user signs over the sandbox's HTTP API.
func TestConsentPersonas(t *testing.T) {
	cases := []struct {
		pn     string
		status consent.Status
		code   consent.FailureCode
		events []string
	}{
		{pnConsentOK, consent.StatusAuthorized, "", happyConsent},
		{tolvan, consent.StatusAuthorized, "", happyConsent},
		{pnConsentCancel, consent.StatusFailed, consent.FailureAuthenticationCancelled, failedConsent},
		{pnConsentTimeout, consent.StatusFailed, consent.FailureAuthenticationTimeout, failedConsent},
		{pnConsentMismatch, consent.StatusFailed, consent.FailureAuthenticationMismatch, failedConsent},
		// The person's other order runs already: the bank refuses at once, no order to show.
		{pnConsentConflict, consent.StatusFailed, consent.FailureAuthenticationConflict,
			[]string{consent.EventCreated, consent.EventClaimed, consent.EventFailed}},
		{pnConsentBankError, consent.StatusFailed, consent.FailureThirdPartyError, failedConsent},
	}
	for _, method := range []string{mock, otherDevice} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			e := newConsentEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithEIDOrderTimeout(400 * time.Millisecond)}})
			cfg := e.config("w1")
			cfg.EIDOrderTimeout = 400 * time.Millisecond
			w := e.worker(cfg)
			for _, tc := range cases {
				t.Run(tc.pn, func(t *testing.T) {
					e.t = t
					id, created := e.create(tc.pn, method)
					e.handleConsents(w, created)
					if method == otherDevice && tc.code != consent.FailureAuthenticationConflict {
						e.waitStatus(id, consent.StatusAwaitingAuthorization)
						e.sign(id) // the timeout persona's user will not; the cancel persona's cancels
					}
					c := e.waitSettled(id)
					if c.Status() != tc.status {
						t.Fatalf("status %s %+v, want %s %s (events %v)", c.Status(), c.Error(), tc.status, tc.code, e.consentTypes(id))
					}
					if tc.code != "" && (c.Error() == nil || c.Error().Code != tc.code || c.Error().Message == "") {
						t.Fatalf("error %+v, want %s with a message", c.Error(), tc.code)
					}
					if got := e.consentTypes(id); !slices.Equal(got, tc.events) {
						t.Fatalf("events %v, want %v", got, tc.events)
					}
					if tc.status == consent.StatusAuthorized {
						if !c.ExpiresAt().Equal(c.AuthorizedAt().Add(time.Hour)) {
							t.Fatalf("expiresAt %s, want authorizedAt %s + the validity", c.ExpiresAt(), c.AuthorizedAt())
						}
						if st := e.bankStatus(c.BankConsentID()); st != "valid" {
							t.Fatalf("bank consent %s", st)
						}
					}
					for _, env := range e.consentEnvelopes(id)[1:] {
						if env.Actor != "connector:w1" || env.CorrelationID != id || env.CausationID != created.EventID || env.Tenant != clientID {
							t.Errorf("%s meta: actor %q correlation %q causation %q tenant %q", env.Type, env.Actor, env.CorrelationID, env.CausationID, env.Tenant)
						}
					}
				})
			}
			e.t = t
			if got := e.outcomes(consent.StatusAuthorized, ""); got != 2 {
				t.Errorf("AUTHORIZED outcomes %v, want 2", got)
			}
			for _, tc := range cases[2:] {
				if got := e.outcomes(consent.StatusFailed, tc.code); got != 1 {
					t.Errorf("FAILED %s outcomes %v, want 1", tc.code, got)
				}
			}
			if got := w.Armed(); got != 2 {
				t.Errorf("%d expiries armed, want the 2 authorized consents'", got)
			}
			waitUntil(t, "sessions to end", func() bool { return w.Running() == 0 })
			noPersonalData(t, e.env, pnConsentOK, tolvan, pnConsentCancel, pnConsentTimeout, pnConsentMismatch, pnConsentConflict, pnConsentBankError)
		})
	}
}

// TestConsentAuthorizationStartedKeepsTheOrderSealed: the EID order's tokens and QR secret go
// to the sealed personal part; the bank's consent id and the deadline are public.
func TestConsentAuthorizationStartedKeepsTheOrderSealed(t *testing.T) {
	e := newConsentEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithEIDOrderTimeout(time.Minute)}})
	cfg := e.config("w1")
	cfg.EIDOrderTimeout = 45 * time.Second
	w := e.worker(cfg)
	id, created := e.create(pnConsentOK, otherDevice)
	e.handleConsents(w, created)
	c := e.waitStatus(id, consent.StatusAwaitingAuthorization)
	o := c.AuthorizationOrder()
	if o == nil || o.BankConsentID == "" || o.QRStartToken == "" || o.QRStartSecret == "" || o.AutoStartToken == "" {
		t.Fatalf("order %+v", o)
	}
	if d := o.Deadline.Sub(o.StartedAt); d < 44*time.Second || d > 46*time.Second {
		t.Fatalf("deadline %s after the start, want the EID order timeout (45s)", d)
	}
	var started eventschema.Envelope
	for _, env := range e.consentEnvelopes(id) {
		if env.Type == consent.EventAuthorizationStarted {
			started = env
		}
	}
	for _, secret := range []string{o.QRStartSecret, o.QRStartToken, o.AutoStartToken} {
		if bytes.Contains(started.Payload, []byte(secret)) {
			t.Fatalf("the EID order's %q is in the public payload: %s", secret, started.Payload)
		}
	}
	if !bytes.Contains(started.Payload, []byte(o.BankConsentID)) {
		t.Fatalf("the bank consent id is not public: %s", started.Payload)
	}
	if code := e.sign(id); code != 200 {
		t.Fatalf("sign: HTTP %d", code)
	}
	if c := e.waitSettled(id); c.Status() != consent.StatusAuthorized {
		t.Fatalf("status %s", c.Status())
	}
}

// TestConsentExpiresAtExpiresAt: an authorized consent is EXPIRED by the worker at its
// expiresAt, and withdrawn at the bank.
func TestConsentExpiresAtExpiresAt(t *testing.T) {
	e := newConsentEnv(t, envOptions{})
	cfg := e.config("w1")
	cfg.Validity = 300 * time.Millisecond
	w := e.worker(cfg)
	id, created := e.create(pnConsentOK, mock)
	e.handleConsents(w, created)
	c := e.waitStatus(id, consent.StatusAuthorized)
	expiresAt := c.ExpiresAt()
	c = e.waitStatus(id, consent.StatusExpired)
	if c.EndedAt().Before(expiresAt) || c.EndedAt().Sub(expiresAt) > 500*time.Millisecond {
		t.Fatalf("expired at %s, expiresAt %s", c.EndedAt(), expiresAt)
	}
	waitUntil(t, "the bank consent withdrawn", func() bool { return e.bankStatus(c.BankConsentID()) == "terminatedByTpp" })
	if got := e.outcomes(consent.StatusExpired, ""); got != 1 {
		t.Errorf("EXPIRED outcomes %v", got)
	}
	waitUntil(t, "revocation metric", func() bool {
		return value(t, e.metrics.BankConsentRevocations.WithLabelValues(bank, "ok")) == 1
	})
	if w.Armed() != 0 {
		t.Errorf("%d expiries still armed", w.Armed())
	}
}

// TestConsentExpiryAfterARestart: the expiry is a durable deadline in the consent's events: a
// worker that starts after expiresAt passed (nobody ran meanwhile) expires the consent at once,
// without a claim.
func TestConsentExpiryAfterARestart(t *testing.T) {
	e := newConsentEnv(t, envOptions{})
	cfg := e.config("w1")
	cfg.Validity = 400 * time.Millisecond
	w1 := worker.NewConsentWorker(cfg)
	id, created := e.create(pnConsentOK, mock)
	e.handleConsents(w1, created)
	c := e.waitStatus(id, consent.StatusAuthorized)
	w1.Stop() // before the expiry: its timer dies with it
	before := len(e.consentEnvelopes(id))
	time.Sleep(time.Until(c.ExpiresAt()) + 200*time.Millisecond)
	if got := len(e.consentEnvelopes(id)); got != before {
		t.Fatalf("a stopped worker recorded %d events", got-before)
	}

	cfg = e.config("w2")
	cfg.Active = e.activeConsents()
	w2 := e.worker(cfg)
	started := time.Now()
	e.run(w2)
	c = e.waitStatus(id, consent.StatusExpired)
	if c.EndedAt().Before(c.ExpiresAt()) || time.Since(started) > 2*time.Second {
		t.Fatalf("expired at %s (expiresAt %s), %s after the restart", c.EndedAt(), c.ExpiresAt(), time.Since(started))
	}
	if got := e.consentClaims(id); !slices.Equal(got, []string{"w1"}) {
		t.Fatalf("claims %v: expiring needs none", got)
	}
	waitUntil(t, "the bank consent withdrawn", func() bool { return e.bankStatus(c.BankConsentID()) == "terminatedByTpp" })
}

// TestConsentExpiryArmedBySweep: a restarted worker re-arms the expiry of an authorized consent
// that is not due yet, and records it on time.
func TestConsentExpiryArmedBySweep(t *testing.T) {
	e := newConsentEnv(t, envOptions{})
	cfg := e.config("w1")
	cfg.Validity = 700 * time.Millisecond
	w1 := worker.NewConsentWorker(cfg)
	id, created := e.create(pnConsentOK, mock)
	e.handleConsents(w1, created)
	c := e.waitStatus(id, consent.StatusAuthorized)
	w1.Stop()

	cfg.Active = e.activeConsents()
	w2 := e.worker(cfg)
	e.run(w2)
	waitUntil(t, "the expiry armed", func() bool { return w2.Armed() == 1 })
	if st := e.loadConsent(id).Status(); st != consent.StatusAuthorized {
		t.Fatalf("status %s before expiresAt", st)
	}
	c = e.waitStatus(id, consent.StatusExpired)
	if c.EndedAt().Before(c.ExpiresAt()) {
		t.Fatalf("expired at %s, before expiresAt %s", c.EndedAt(), c.ExpiresAt())
	}
}

// TestConsentRestartSweepsEveryPage: a consent worker that starts with more open consents than
// SweepLimit drives every one of them from Run's first sweep, a page at a time.
func TestConsentRestartSweepsEveryPage(t *testing.T) {
	e := newConsentEnv(t, envOptions{})
	var ids []string
	for range 3 {
		id, _ := e.create(pnConsentOK, mock)
		ids = append(ids, id)
	}
	cfg := e.config("w1")
	cfg.Active, cfg.SweepLimit, cfg.SweepInterval = e.activeConsents(), 1, time.Hour
	e.run(e.worker(cfg))
	for _, id := range ids {
		e.waitStatus(id, consent.StatusAuthorized)
	}
}

// TestConsentClaimTakenOverAfterACrash: a worker dies while the person has the EID order; a
// fresh claim keeps other workers off, a stale one is taken over, and the new worker goes on
// with the same bank consent and order: the person's signature counts.
func TestConsentClaimTakenOverAfterACrash(t *testing.T) {
	e := newConsentEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithEIDOrderTimeout(time.Hour)}})
	cfg := e.config("w1")
	cfg.EIDOrderTimeout = time.Hour // w3's clock runs ahead: the order's deadline must not pass on it
	w1 := worker.NewConsentWorker(cfg)
	id, created := e.create(pnConsentOK, otherDevice)
	e.handleConsents(w1, created)
	awaiting := e.waitStatus(id, consent.StatusAwaitingAuthorization)
	w1.Stop() // the worker dies without a trace

	w2 := e.worker(e.config("w2"))
	if err := w2.Resume(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "w2 to give up", func() bool { return w2.Running() == 0 })
	if got := e.consentClaims(id); !slices.Equal(got, []string{"w1"}) {
		t.Fatalf("a fresh claim must block: claims %v", got)
	}

	cfg3 := e.config("w3")
	cfg3.Clock = func() time.Time { return time.Now().Add(2 * time.Minute) } // w1's claim is stale
	w3 := e.worker(cfg3)
	if err := w3.Resume(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	e.waitConsent(id, "w3's claim", func(c *consent.Consent) bool { return c.ClaimedBy() == "w3" })
	if code := e.sign(id); code != 200 {
		t.Fatalf("sign: HTTP %d", code)
	}
	c := e.waitSettled(id)
	if c.Status() != consent.StatusAuthorized || c.BankConsentID() != awaiting.BankConsentID() {
		t.Fatalf("status %s, bank consent %s (was %s)", c.Status(), c.BankConsentID(), awaiting.BankConsentID())
	}
	if n := e.count(id, consent.EventAuthorizationStarted); n != 1 {
		t.Fatalf("%d EID orders recorded; the new worker must go on with the first", n)
	}
	if got := e.consentClaims(id); !slices.Equal(got, []string{"w1", "w3"}) {
		t.Fatalf("claims %v", got)
	}
}

// TestConsentShutdownThenTheSameWorkerResumes: a shutdown records nothing; the same worker id
// resumes at once (its own claim does not block it) with the same order.
func TestConsentShutdownThenTheSameWorkerResumes(t *testing.T) {
	e := newConsentEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithEIDOrderTimeout(time.Minute)}})
	cfg := e.config("w1")
	cfg.EIDOrderTimeout = time.Minute
	w1 := worker.NewConsentWorker(cfg)
	id, created := e.create(pnConsentOK, otherDevice)
	e.handleConsents(w1, created)
	e.waitStatus(id, consent.StatusAwaitingAuthorization)
	w1.Stop()
	if err := w1.HandleBatch(context.Background(), []eventschema.Envelope{created}); err != worker.ErrStopped {
		t.Fatalf("HandleBatch after Stop: %v, want ErrStopped", err)
	}
	before := len(e.consentEnvelopes(id))
	if code := e.sign(id); code != 200 {
		t.Fatalf("sign: HTTP %d", code)
	}
	time.Sleep(100 * time.Millisecond) // a session still running would record the authorization
	if got := len(e.consentEnvelopes(id)); got != before {
		t.Fatalf("%d events after the shutdown", got-before)
	}

	again := e.worker(cfg)
	if err := again.Resume(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	if c := e.waitSettled(id); c.Status() != consent.StatusAuthorized {
		t.Fatalf("status %s", c.Status())
	}
	if got := e.consentClaims(id); !slices.Equal(got, []string{"w1", "w1"}) {
		t.Fatalf("claims %v", got)
	}
	if !strings.Contains(e.logs.String(), "consent session paused by shutdown") {
		t.Error("the shutdown should be logged as a pause")
	}
}

// TestConsentDeadlinePassedWhileStopped: the EID order's deadline is in the consent's events;
// a worker that starts after it passed ends the consent AUTHENTICATION_TIMEOUT at once, without
// a claim, and withdraws the order at the bank.
func TestConsentDeadlinePassedWhileStopped(t *testing.T) {
	e := newConsentEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithEIDOrderTimeout(time.Minute)}})
	cfg := e.config("w1")
	cfg.EIDOrderTimeout = 300 * time.Millisecond // Samla's deadline, well before the bank's own
	w1 := worker.NewConsentWorker(cfg)
	id, created := e.create(pnConsentOK, otherDevice)
	e.handleConsents(w1, created)
	c := e.waitStatus(id, consent.StatusAwaitingAuthorization)
	w1.Stop()
	time.Sleep(time.Until(c.AuthorizationDeadline()) + 100*time.Millisecond)

	cfg2 := e.config("w2")
	cfg2.Active = e.activeConsents()
	e.run(e.worker(cfg2))
	c = e.waitSettled(id)
	if c.Status() != consent.StatusFailed || c.Error().Code != consent.FailureAuthenticationTimeout {
		t.Fatalf("status %s %+v", c.Status(), c.Error())
	}
	if c.EndedAt().Before(c.AuthorizationDeadline()) {
		t.Fatalf("failed at %s, before the deadline %s", c.EndedAt(), c.AuthorizationDeadline())
	}
	if got := e.consentClaims(id); !slices.Equal(got, []string{"w1"}) {
		t.Fatalf("claims %v: a passed deadline needs none", got)
	}
	waitUntil(t, "the order withdrawn at the bank", func() bool { return e.bankStatus(c.BankConsentID()) == "terminatedByTpp" })
	if code := e.sign(id); code == 200 {
		t.Fatal("the withdrawn order could still be signed")
	}
}

// TestConsentDeadlineWhileRunning: an unsigned order ends at Samla's deadline, not a poll
// interval later.
func TestConsentDeadlineWhileRunning(t *testing.T) {
	e := newConsentEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithEIDOrderTimeout(time.Minute)}})
	cfg := e.config("w1")
	cfg.EIDOrderTimeout = 250 * time.Millisecond
	cfg.PollInterval = time.Second
	w := e.worker(cfg)
	id, created := e.create(pnConsentOK, otherDevice)
	e.handleConsents(w, created)
	c := e.waitSettled(id)
	if c.Status() != consent.StatusFailed || c.Error().Code != consent.FailureAuthenticationTimeout {
		t.Fatalf("status %s %+v", c.Status(), c.Error())
	}
	if late := c.EndedAt().Sub(c.AuthorizationDeadline()); late < 0 || late > 500*time.Millisecond {
		t.Fatalf("failed %s after the deadline", late)
	}
	waitUntil(t, "the order withdrawn at the bank", func() bool { return e.bankStatus(c.BankConsentID()) == "terminatedByTpp" })
}

// TestRevokedConsentIsWithdrawnAtTheBank: the client's revocation of an awaiting or an
// authorized consent reaches the bank: the order cannot be signed any more, the bank consent
// is ended, and the expiry timer goes.
func TestRevokedConsentIsWithdrawnAtTheBank(t *testing.T) {
	t.Run("awaiting", func(t *testing.T) {
		e := newConsentEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithEIDOrderTimeout(time.Minute)}})
		w := e.worker(e.config("w1"))
		id, created := e.create(pnConsentOK, otherDevice)
		e.handleConsents(w, created)
		c := e.waitStatus(id, consent.StatusAwaitingAuthorization)
		revoked := e.revoke(id)
		e.handleConsents(w, revoked)
		if st := e.bankStatus(c.BankConsentID()); st != "terminatedByTpp" {
			t.Fatalf("bank consent %s once HandleBatch returned", st)
		}
		if code := e.sign(id); code == 200 {
			t.Fatal("the revoked consent's order could still be signed")
		}
		waitUntil(t, "the session to stop", func() bool { return w.Running() == 0 })
		if got := e.consentTypes(id); got[len(got)-1] != consent.EventRevoked {
			t.Fatalf("events %v: nothing may follow the revocation", got)
		}
	})
	t.Run("authorized", func(t *testing.T) {
		e := newConsentEnv(t, envOptions{})
		w := e.worker(e.config("w1"))
		id, created := e.create(pnConsentOK, mock)
		e.handleConsents(w, created)
		c := e.waitStatus(id, consent.StatusAuthorized)
		if w.Armed() != 1 {
			t.Fatalf("%d expiries armed", w.Armed())
		}
		e.handleConsents(w, e.revoke(id))
		if st := e.bankStatus(c.BankConsentID()); st != "terminatedByTpp" {
			t.Fatalf("bank consent %s", st)
		}
		if w.Armed() != 0 {
			t.Fatalf("the revoked consent's expiry is still armed")
		}
		if got := value(t, e.metrics.BankConsentRevocations.WithLabelValues(bank, "ok")); got != 1 {
			t.Fatalf("revocations %v", got)
		}
	})
	t.Run("a bank that is down is tried again", func(t *testing.T) {
		e := newConsentEnv(t, envOptions{maxAttempts: 1})
		w := e.worker(e.config("w1"))
		id, created := e.create(pnConsentOK, mock)
		e.handleConsents(w, created)
		c := e.waitStatus(id, consent.StatusAuthorized)
		e.sb.SetFailureRate(1)
		e.handleConsents(w, e.revoke(id)) // the first try fails; HandleBatch does not wait for more
		time.Sleep(200 * time.Millisecond)
		e.sb.SetFailureRate(0)
		deadline := time.Now().Add(10 * time.Second)
		for e.bankStatus(c.BankConsentID()) != "terminatedByTpp" {
			if time.Now().After(deadline) {
				t.Fatal("the withdrawal was not tried again")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// TestErasedUsersConsent: a consent whose user was deleted is never driven: it ends REVOKED
// (USER_DELETED), as the user's deletion ends the consents it finds, without a claim, without
// its personal number and without the bank; one that awaits the signature ends at the next
// poll and its order is withdrawn.
func TestErasedUsersConsent(t *testing.T) {
	t.Run("before a worker took it", func(t *testing.T) {
		e := newConsentEnv(t, envOptions{})
		user := uuid.NewString()
		id, created := e.createFor(user, pnConsentOK, mock)
		if err := e.keys.Destroy(context.Background(), domain.UserSubject(user)); err != nil {
			t.Fatal(err)
		}
		requests := e.sb.Stats().Requests
		w := e.worker(e.config("w1"))
		e.handleConsents(w, created)
		c := e.waitSettled(id)
		if c.Status() != consent.StatusRevoked || c.RevokeReason() != consent.RevokedUserDeleted {
			t.Fatalf("status %s %s", c.Status(), c.RevokeReason())
		}
		if got := e.consentTypes(id); !slices.Equal(got, []string{consent.EventCreated, consent.EventRevoked}) {
			t.Fatalf("events %v", got)
		}
		if n := e.sb.Stats().Requests - requests; n != 0 {
			t.Fatalf("the bank was called %d times", n)
		}
		if got := e.outcomes(consent.StatusRevoked, ""); got != 1 {
			t.Errorf("REVOKED outcomes %v", got)
		}
	})
	t.Run("while it awaits the signature", func(t *testing.T) {
		e := newConsentEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithEIDOrderTimeout(time.Minute)}})
		user := uuid.NewString()
		w := e.worker(e.config("w1"))
		id, created := e.createFor(user, pnConsentOK, otherDevice)
		e.handleConsents(w, created)
		awaiting := e.waitStatus(id, consent.StatusAwaitingAuthorization)
		if err := e.keys.Destroy(context.Background(), domain.UserSubject(user)); err != nil {
			t.Fatal(err)
		}
		c := e.waitSettled(id)
		if c.Status() != consent.StatusRevoked || c.RevokeReason() != consent.RevokedUserDeleted {
			t.Fatalf("status %s %s", c.Status(), c.RevokeReason())
		}
		if c.PersonalNumber() != nil {
			t.Fatal("the erased user's personal number is still readable")
		}
		waitUntil(t, "the order withdrawn", func() bool { return e.bankStatus(awaiting.BankConsentID()) == "terminatedByTpp" })
	})
	t.Run("a revoked consent stays revoked", func(t *testing.T) {
		e := newConsentEnv(t, envOptions{})
		user := uuid.NewString()
		id, created := e.createFor(user, pnConsentOK, mock)
		e.revoke(id)
		if err := e.keys.Destroy(context.Background(), domain.UserSubject(user)); err != nil {
			t.Fatal(err)
		}
		cfg := e.config("w1")
		cfg.Active = e.activeConsents()
		w := e.worker(cfg)
		e.handleConsents(w, created)
		e.run(w)
		time.Sleep(100 * time.Millisecond)
		if got := e.consentTypes(id); !slices.Equal(got, []string{consent.EventCreated, consent.EventRevoked}) {
			t.Fatalf("events %v", got)
		}
	})
}

// TestTwoConsentWorkersOnTheSameEventOnlyOneClaims: two workers fed the same consent.created
// (a redelivery, a sweep) drive it once.
func TestTwoConsentWorkersOnTheSameEventOnlyOneClaims(t *testing.T) {
	e := newConsentEnv(t, envOptions{})
	w1, w2 := e.worker(e.config("w1")), e.worker(e.config("w2"))
	var ids []string
	for range 5 {
		id, created := e.create(pnConsentOK, mock)
		ids = append(ids, id)
		e.handleConsents(w1, created)
		e.handleConsents(w2, created)
	}
	for _, id := range ids {
		if c := e.waitSettled(id); c.Status() != consent.StatusAuthorized {
			t.Fatalf("status %s", c.Status())
		}
		if n := e.count(id, consent.EventAuthorizationStarted); n != 1 {
			t.Fatalf("consent %s: %d EID orders (claims %v)", id, n, e.consentClaims(id))
		}
		if got := e.consentClaims(id); len(got) != 1 {
			t.Fatalf("claims %v", got)
		}
	}
}

// TestConsentBankDown: a bank that cannot be reached fails the consent THIRD_PARTY_ERROR after
// the adapter's retries, rather than leaving the client polling until the deadline.
func TestConsentBankDown(t *testing.T) {
	e := newConsentEnv(t, envOptions{maxAttempts: 2})
	e.sb.SetFailureRate(1)
	w := e.worker(e.config("w1"))
	id, created := e.create(pnConsentOK, mock)
	e.handleConsents(w, created)
	c := e.waitSettled(id)
	if c.Status() != consent.StatusFailed || c.Error().Code != consent.FailureThirdPartyError {
		t.Fatalf("status %s %+v", c.Status(), c.Error())
	}
	if got := e.consentTypes(id); !slices.Equal(got, []string{consent.EventCreated, consent.EventClaimed, consent.EventFailed}) {
		t.Fatalf("events %v", got)
	}
}

// TestConsentStoreOutage: a failing event store leaves the consent for a later sweep, which
// finishes it once the store is back.
func TestConsentStoreOutage(t *testing.T) {
	e := newConsentEnv(t, envOptions{})
	id, created := e.create(pnConsentOK, mock)
	e.store.setFailAppends(true)
	cfg := e.config("w1")
	cfg.Active = e.activeConsents()
	w := e.worker(cfg)
	e.handleConsents(w, created)
	waitUntil(t, "the session to give up", func() bool { return strings.Contains(e.logs.String(), "consent left for a later sweep") })
	if got := e.consentTypes(id); !slices.Equal(got, []string{consent.EventCreated}) {
		t.Fatalf("events %v", got)
	}
	e.store.setFailAppends(false)
	e.run(w)
	if c := e.waitSettled(id); c.Status() != consent.StatusAuthorized {
		t.Fatalf("status %s", c.Status())
	}
}
