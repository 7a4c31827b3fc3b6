package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/collection"
	dcompany "github.com/samla/samla/domain/company"
	"github.com/samla/samla/eventschema"
)

const (
	insurer = "se-demo-insurer"
	mock    = dcompany.LoginEIDOtherDeviceMock
	tolvan  = "191212121212"
)

var (
	S = struct {
		Login, Waiting, Collecting, Completed collection.Status
	}{collection.StatusLogin, collection.StatusWaitingForUserAction, collection.StatusCollecting, collection.StatusCompleted}
	happyPath = []collection.Status{S.Login, S.Waiting, S.Collecting, S.Completed}
)

func value(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatal("unexpected metric kind")
	return 0
}

func TestHappyPathCompletesWithInsurances(t *testing.T) {
	e := newEnv(t, envOptions{})
	w := e.worker(e.config("w1"))
	id, started := e.start(insurer, mock, tolvan)
	before := e.store.appends.Load()

	if err := w.HandleBatch(context.Background(), []eventschema.Envelope{started}); err != nil {
		t.Fatal(err)
	}
	c := e.waitFinal(id)

	if c.Status() != collection.StatusCompleted {
		t.Fatalf("status %s, want COMPLETED", c.Status())
	}
	// The claim with LOGIN, WAITING_FOR_USER_ACTION, COLLECTING, the data with COMPLETED: every
	// append is a commit of the event store and a publish to Kafka.
	if got := e.store.appends.Load() - before; got != 4 {
		t.Errorf("the session appended %d times, want 4", got)
	}
	if got := e.statuses(id); !slices.Equal(got, happyPath) {
		t.Fatalf("statuses %v, want %v", got, happyPath)
	}
	wantTypes := []string{collection.EventStarted, collection.EventClaimed, collection.EventStatusChanged,
		collection.EventStatusChanged, collection.EventStatusChanged, collection.EventInsurancesCollected,
		collection.EventStatusChanged}
	if got := e.types(id); !slices.Equal(got, wantTypes) {
		t.Fatalf("events %v, want %v", got, wantTypes)
	}

	ins := map[string]collection.Insurance{}
	for _, i := range c.Insurances() {
		ins[i.InsuranceType] = i
	}
	for _, typ := range []string{"HOME", "CAR", "ACCIDENT", "PET"} {
		i, ok := ins[typ]
		if !ok {
			t.Fatalf("no %s insurance in %+v", typ, c.Insurances())
		}
		if i.InsuranceNumber == nil || i.Premium == nil || i.PremiumFrequency == nil || i.RenewalDate == nil {
			t.Errorf("%s lacks number, premium, frequency or renewal date: %+v", typ, i)
		}
	}
	if ins["CAR"].StartDate != nil || ins["PET"].DisplayName != nil || ins["LIFE"].Premium != nil || ins["LIFE"].RenewalDate != nil {
		t.Errorf("unknown values must stay unknown: car %+v pet %+v life %+v", ins["CAR"], ins["PET"], ins["LIFE"])
	}
	if got := *ins["HOME"].PremiumFrequency; got != "MONTHLY" {
		t.Errorf("home premium frequency %q", got)
	}

	// Holder names live only in the personal field; the envelopes carry the session's meta.
	for _, env := range e.envelopes(id)[1:] {
		if env.Tenant != clientID || env.Actor != "connector:w1" || env.CorrelationID != id || env.CausationID != started.EventID {
			t.Errorf("%s meta: tenant %q actor %q correlation %q causation %q", env.Type, env.Tenant, env.Actor, env.CorrelationID, env.CausationID)
		}
		if env.Type == collection.EventInsurancesCollected {
			var p struct {
				Personal struct {
					Insurances  []map[string]any  `json:"insurances"`
					HolderNames map[string]string `json:"holderNames"`
				} `json:"personal"`
			}
			if err := json.Unmarshal(env.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if len(p.Personal.HolderNames) != len(p.Personal.Insurances) || p.Personal.HolderNames[ins["HOME"].ID] != "Tolvan Tolvansson" {
				t.Errorf("holder names %v", p.Personal.HolderNames)
			}
			if strings.Contains(string(mustJSON(t, p.Personal.Insurances)), "Tolvan") {
				t.Errorf("a holder name is in an insurance's data: %s", env.Payload)
			}
		}
	}

	if got := value(t, e.metrics.ConnectorOutcomes.WithLabelValues(insurer, "COMPLETED")); got != 1 {
		t.Errorf("outcome counter %v, want 1", got)
	}
	if got := value(t, e.metrics.CompanyRequestTime.WithLabelValues(insurer, "ok").(prometheus.Histogram)); got < 3 {
		t.Errorf("company request samples %v, want at least login, poll and data", got)
	}
	waitUntil(t, "sessions gauge back to 0", func() bool { return value(t, e.metrics.ConnectorSessions) == 0 && w.Running() == 0 })

	logs := e.logs.String()
	if !strings.Contains(logs, id) {
		t.Errorf("logs should name the collection")
	}
	for _, secret := range []string{tolvan, "121212-1212", "Tolvan"} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain personal data %q:\n%s", secret, logs)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPersonas plays every persona the demo insurer knows so far to its final status.
func TestPersonas(t *testing.T) {
	e := newEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithEIDOrderTimeout(300 * time.Millisecond)}})
	w := e.worker(e.config("w1"))
	cases := []struct {
		personalNumber string
		want           collection.Status
		path           []collection.Status
	}{
		{"199001010017", collection.StatusCompleted, happyPath},
		{"198507099805", collection.StatusCompleted, happyPath}, // unknown: behaves like 199001010017
		{"", collection.StatusCompleted, happyPath},             // no number: the user identifies in the app
		{"199001010033", collection.StatusCompletedEmpty, []collection.Status{S.Login, S.Waiting, S.Collecting, collection.StatusCompletedEmpty}},
		{"199001010041", collection.StatusIncorrectCredentials, []collection.Status{S.Login, collection.StatusIncorrectCredentials}},
		{"199001010082", collection.StatusAuthenticationMismatch, nil},
		{"199001010090", collection.StatusAuthenticationCancelled, []collection.Status{S.Login, S.Waiting, collection.StatusAuthenticationCancelled}},
		{"199001010108", collection.StatusAuthenticationTimeout, []collection.Status{S.Login, S.Waiting, collection.StatusAuthenticationTimeout}},
		{"199001010116", collection.StatusAuthenticationConflict, nil},
		{"199001010124", collection.StatusAccountTemporarilyLocked, nil},
		{"199001010132", collection.StatusKYCForm, nil},
		{"199001010140", collection.StatusCustomerEnrollmentRequired, nil},
		{"199001010157", collection.StatusThirdPartyError, []collection.Status{S.Login, S.Waiting, S.Collecting, collection.StatusThirdPartyError}},
		{"199001010165", collection.StatusFailed, nil},
		{"199001010173", collection.StatusAuthenticationError, nil},
		{"199001010207", collection.StatusContactForm, nil},
	}
	ids := make([]string, len(cases))
	var batch []eventschema.Envelope
	for i, tc := range cases {
		id, started := e.start(insurer, mock, tc.personalNumber)
		ids[i] = id
		batch = append(batch, started)
	}
	if err := w.HandleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		c := e.waitFinal(ids[i])
		if c.Status() != tc.want {
			t.Errorf("persona %q: status %s, want %s (path %v)", tc.personalNumber, c.Status(), tc.want, e.statuses(ids[i]))
			continue
		}
		if tc.path != nil && !slices.Equal(e.statuses(ids[i]), tc.path) {
			t.Errorf("persona %q: path %v, want %v", tc.personalNumber, e.statuses(ids[i]), tc.path)
		}
	}
}

func TestTwoWorkersOnTheSameStartedEventOnlyOneClaims(t *testing.T) {
	e := newEnv(t, envOptions{})
	w1, w2 := e.worker(e.config("w1")), e.worker(e.config("w2"))
	var ids []string
	for range 5 {
		id, started := e.start(insurer, mock, tolvan)
		ids = append(ids, id)
		var wg sync.WaitGroup
		for _, w := range []*worker.Worker{w1, w2, w1} { // w1 also gets a redelivery
			wg.Go(func() {
				if err := w.HandleBatch(context.Background(), []eventschema.Envelope{started}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	for _, id := range ids {
		c := e.waitFinal(id)
		if c.Status() != collection.StatusCompleted {
			t.Fatalf("status %s", c.Status())
		}
		if claims := e.claims(id); len(claims) != 1 {
			t.Errorf("claims %v, want exactly one", claims)
		}
		if got := e.statuses(id); !slices.Equal(got, happyPath) {
			t.Errorf("statuses %v, want each step once: %v", got, happyPath)
		}
	}
	if got := value(t, e.metrics.ConnectorOutcomes.WithLabelValues(insurer, "COMPLETED")); got != float64(len(ids)) {
		t.Errorf("outcomes %v, want %d", got, len(ids))
	}
}

func TestShutdownMidSessionThenSameWorkerResumes(t *testing.T) {
	e := newEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithMockSignDelay(400 * time.Millisecond)}})
	id, started := e.start(insurer, mock, tolvan)

	ctx, cancel := context.WithCancel(context.Background())
	w1 := e.worker(e.config("w1"))
	runDone := make(chan error, 1)
	go func() { runDone <- w1.Run(ctx) }()
	if err := w1.HandleBatch(ctx, []eventschema.Envelope{started}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(id, "WAITING_FOR_USER_ACTION", func(c *collection.Collection) bool { return c.Status() == S.Waiting })
	cancel()
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after shutdown")
	}
	if err := w1.HandleBatch(context.Background(), []eventschema.Envelope{started}); !errors.Is(err, worker.ErrStopped) {
		t.Fatalf("HandleBatch after stop: %v, want ErrStopped", err)
	}
	before := len(e.envelopes(id))
	time.Sleep(600 * time.Millisecond) // past the signature: a session still running would move on
	if c := e.load(id); c.Status() != S.Waiting || len(e.envelopes(id)) != before {
		t.Fatalf("after shutdown: status %s, %d events (was %d); nothing may be appended", c.Status(), len(e.envelopes(id)), before)
	}

	w1again := e.worker(e.config("w1"))
	if err := w1again.Resume(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	c := e.waitFinal(id)
	if c.Status() != collection.StatusCompleted {
		t.Fatalf("status %s", c.Status())
	}
	want := []collection.Status{S.Login, S.Waiting, S.Login, S.Waiting, S.Collecting, S.Completed}
	if got := e.statuses(id); !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	if got := e.claims(id); !slices.Equal(got, []string{"w1", "w1"}) {
		t.Fatalf("claims %v", got)
	}
	if !strings.Contains(e.logs.String(), "session paused by shutdown") {
		t.Error("the shutdown should be logged as a pause")
	}
}

func TestAnotherWorkerTakesOverOnlyAStaleClaim(t *testing.T) {
	e := newEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithMockSignDelay(time.Hour)}})
	id, started := e.start(insurer, mock, tolvan)
	cfg1 := e.config("w1")
	// w3's clock runs two minutes ahead; the EID order's deadline must not pass on it, or w3
	// would rightly end the collection AUTHENTICATION_TIMEOUT instead of taking it over.
	cfg1.EIDOrderTimeout = time.Hour
	w1 := e.worker(cfg1)
	if err := w1.HandleBatch(context.Background(), []eventschema.Envelope{started}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(id, "WAITING_FOR_USER_ACTION", func(c *collection.Collection) bool { return c.Status() == S.Waiting })
	w1.Stop() // the worker dies without a trace

	w2 := e.worker(e.config("w2"))
	if err := w2.Resume(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "w2 to give up", func() bool { return w2.Running() == 0 })
	if got := e.claims(id); !slices.Equal(got, []string{"w1"}) {
		t.Fatalf("a fresh claim must block: claims %v", got)
	}

	cfg := e.config("w3")
	cfg.Clock = func() time.Time { return time.Now().Add(2 * time.Minute) } // w1's claim is stale
	cfg.MaxSessionDuration = time.Hour
	cfg.EIDOrderTimeout = time.Hour // the new order's deadline follows the company's clock
	w3 := e.worker(cfg)
	if err := w3.Resume(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(id, "w3's claim", func(c *collection.Collection) bool { return c.ClaimedBy() == "w3" })
	e.waitFor(id, "the new login", func(c *collection.Collection) bool {
		st := e.statuses(id)
		return len(st) == 4 && st[3] == S.Waiting
	})
}

func TestUnsupportedLoginMethod(t *testing.T) {
	t.Run("catalog says so: no company call", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		w := e.worker(e.config("w1"))
		id, started := e.start("ee-demo-insurer", mock, tolvan)
		if err := w.HandleBatch(context.Background(), []eventschema.Envelope{started}); err != nil {
			t.Fatal(err)
		}
		c := e.waitFinal(id)
		if got := e.statuses(id); !slices.Equal(got, []collection.Status{collection.StatusLoginMethodNotApplicable}) || c.Status() != collection.StatusLoginMethodNotApplicable {
			t.Fatalf("statuses %v", got)
		}
		if n := e.sb.Stats().Requests; n != 0 {
			t.Errorf("the company was called %d times", n)
		}
		if got := value(t, e.metrics.ConnectorOutcomes.WithLabelValues("ee-demo-insurer", "LOGIN_METHOD_NOT_APPLICABLE")); got != 1 {
			t.Errorf("outcome counter %v", got)
		}
	})
	t.Run("company refuses it", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		// A stale catalog that believes the Estonian insurer takes the mock EID.
		co, _ := sandbox.Catalog().Get("ee-demo-insurer")
		co.LoginMethods = append(co.LoginMethods, mock)
		e.catalog = dcompany.NewCatalog(co)
		w := e.worker(e.config("w1"))
		id, started := e.start("ee-demo-insurer", mock, tolvan)
		if err := w.HandleBatch(context.Background(), []eventschema.Envelope{started}); err != nil {
			t.Fatal(err)
		}
		e.waitFinal(id)
		want := []collection.Status{S.Login, collection.StatusLoginMethodNotApplicable}
		if got := e.statuses(id); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	})
}

func TestCompanyFailuresAreRetried(t *testing.T) {
	e := newEnv(t, envOptions{
		sandbox:     []sandbox.Option{sandbox.WithFailureRate(0.3), sandbox.WithSeed(42)},
		maxAttempts: 10,
	})
	w := e.worker(e.config("w1"))
	var ids []string
	var batch []eventschema.Envelope
	for range 4 {
		id, started := e.start(insurer, mock, tolvan)
		ids = append(ids, id)
		batch = append(batch, started)
	}
	if err := w.HandleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
			t.Fatalf("status %s (%v)", c.Status(), e.statuses(id))
		}
		if got := e.statuses(id); !slices.Equal(got, happyPath) {
			t.Errorf("statuses %v", got)
		}
	}
	if st := e.sb.Stats(); st.InjectedFailures == 0 {
		t.Fatalf("no failure was injected (%+v): the test proves nothing", st)
	}
	if got := value(t, e.metrics.CompanyRequestTime.WithLabelValues(insurer, "server_error").(prometheus.Histogram)); got == 0 {
		t.Error("failed attempts should be recorded")
	}
}

func TestCompanyPermanentlyDownEndsInThirdPartyError(t *testing.T) {
	t.Run("answers 503", func(t *testing.T) {
		e := newEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithFailureRate(1)}})
		w := e.worker(e.config("w1"))
		id, started := e.start(insurer, mock, tolvan)
		if err := w.HandleBatch(context.Background(), []eventschema.Envelope{started}); err != nil {
			t.Fatal(err)
		}
		e.waitFinal(id)
		want := []collection.Status{S.Login, collection.StatusThirdPartyError}
		if got := e.statuses(id); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
		if st := e.sb.Stats(); st.InjectedFailures != 4 {
			t.Errorf("attempts %d, want 4 (MaxAttempts)", st.InjectedFailures)
		}
	})
	t.Run("goes down while the user signs", func(t *testing.T) {
		e := newEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithMockSignDelay(300 * time.Millisecond)}})
		w := e.worker(e.config("w1"))
		id, started := e.start(insurer, mock, tolvan)
		if err := w.HandleBatch(context.Background(), []eventschema.Envelope{started}); err != nil {
			t.Fatal(err)
		}
		e.waitFor(id, "WAITING_FOR_USER_ACTION", func(c *collection.Collection) bool { return c.Status() == S.Waiting })
		if err := e.sb.Close(); err != nil { // connection refused from now on
			t.Fatal(err)
		}
		e.waitFinal(id)
		want := []collection.Status{S.Login, S.Waiting, collection.StatusThirdPartyError}
		if got := e.statuses(id); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
		if got := value(t, e.metrics.CompanyRequestTime.WithLabelValues(insurer, "transport_error").(prometheus.Histogram)); got == 0 {
			t.Error("transport errors should be recorded")
		}
	})
}

func TestRunSweepsNonFinalCollections(t *testing.T) {
	e := newEnv(t, envOptions{})
	// Started while no worker listened: only the sweep can find them.
	id1, _ := e.start(insurer, mock, tolvan)
	id2, _ := e.start(insurer, mock, "199001010017")
	cfg := e.config("w1")
	cfg.Active = e.nonFinal()
	w := e.worker(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	for _, id := range []string{id1, id2} {
		if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
			t.Fatalf("status %s", c.Status())
		}
	}
	// And one that appears later is found by a periodic sweep.
	id3, _ := e.start(insurer, mock, tolvan)
	if c := e.waitFinal(id3); c.Status() != collection.StatusCompleted {
		t.Fatalf("status %s", c.Status())
	}
	if got := e.envelopes(id3)[1].CausationID; got != "" {
		t.Errorf("a swept session has no triggering event, got causation %q", got)
	}
}

// TestRestartSweepsEveryPageOfOpenCollections: a worker that starts with more open collections
// than SweepLimit drives every one of them from Run's first sweep, a page at a time, without
// waiting an interval per page.
func TestRestartSweepsEveryPageOfOpenCollections(t *testing.T) {
	e := newEnv(t, envOptions{})
	var ids []string
	for range 5 {
		id, _ := e.start(insurer, mock, tolvan)
		ids = append(ids, id)
	}
	cfg := e.config("w1")
	cfg.Active, cfg.SweepLimit, cfg.SweepInterval = e.nonFinal(), 2, time.Hour
	w := e.worker(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	for _, id := range ids {
		if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
			t.Fatalf("%s: status %s", id, c.Status())
		}
	}
}

// TestSweepFindsANewCollectionBehindWaitingOnes: more collections than SweepLimit wait for their
// contact forms, for minutes; a newer one nobody was told about (its event missed) is still
// found by the periodic sweeps, which page past the waiting ones instead of listing them again.
func TestSweepFindsANewCollectionBehindWaitingOnes(t *testing.T) {
	e := newEnv(t, fastSandbox())
	cfg := e.config("w1")
	cfg.Active, cfg.SweepLimit = e.nonFinal(), 2
	cfg.ContactFormTimeout = time.Minute // they wait until the test ends
	var waiting []string
	for range 5 {
		id, _ := e.start(insurer, mock, pnContactForm)
		waiting = append(waiting, id)
	}
	w := e.worker(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	for _, id := range waiting {
		e.waitFor(id, "CONTACT_FORM_PENDING", func(c *collection.Collection) bool { return c.Status() == sOther.ContactFormPending })
	}
	id, _ := e.start(insurer, mock, tolvan)
	if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
		t.Fatalf("status %s", c.Status())
	}
	for _, id := range waiting {
		if c := e.load(id); c.Status() != sOther.ContactFormPending {
			t.Fatalf("a waiting collection moved on: %s", c.Status())
		}
	}
}

func TestDeadlineEndsCollectionsOnResume(t *testing.T) {
	e := newEnv(t, envOptions{})
	old := time.Now().Add(-time.Hour)
	running, _ := e.startAt(insurer, mock, tolvan, old)
	waiting, _ := e.startAt(insurer, mock, tolvan, old)
	// A worker that died long ago left this one waiting for the user's signature.
	e.update(waiting, func(c *collection.Collection) error { return c.Claim("dead", old, time.Minute) })
	for _, to := range []collection.Status{S.Login, S.Waiting} {
		e.update(waiting, func(c *collection.Collection) error { return c.ChangeStatus(to, nil, old) })
	}

	w := e.worker(e.config("w1")) // MaxSessionDuration defaults to 10 minutes
	if err := w.Resume(context.Background(), []string{running, waiting}); err != nil {
		t.Fatal(err)
	}
	if c := e.waitFinal(running); c.Status() != collection.StatusFailed {
		t.Errorf("RUNNING past its deadline: %s, want FAILED", c.Status())
	}
	if c := e.waitFinal(waiting); c.Status() != collection.StatusAuthenticationTimeout {
		t.Errorf("WAITING_FOR_USER_ACTION past its deadline: %s, want AUTHENTICATION_TIMEOUT", c.Status())
	}
	if n := e.sb.Stats().Requests; n != 0 {
		t.Errorf("the company was called %d times for expired collections", n)
	}
}

func TestResumeAtCollectingSignsInAgainQuietly(t *testing.T) {
	e := newEnv(t, envOptions{})
	id, _ := e.start(insurer, mock, tolvan)
	e.update(id, func(c *collection.Collection) error { return c.Claim("w1", time.Now(), time.Minute) })
	for _, to := range []collection.Status{S.Login, S.Waiting, S.Collecting} {
		e.update(id, func(c *collection.Collection) error { return c.ChangeStatus(to, nil, time.Now()) })
	}
	w := e.worker(e.config("w1"))
	if err := w.Resume(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	// Five insurances and the group insurance of the richest persona.
	if c := e.waitFinal(id); c.Status() != collection.StatusCompleted || len(c.Insurances()) != 6 {
		t.Fatalf("status %s with %d insurances", c.Status(), len(c.Insurances()))
	}
	want := []collection.Status{S.Login, S.Waiting, S.Collecting, S.Completed}
	if got := e.statuses(id); !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
}

func TestStoreOutageLeavesTheCollectionForLater(t *testing.T) {
	e := newEnv(t, envOptions{})
	id, started := e.start(insurer, mock, tolvan)
	e.store.setFailAppends(true)
	w := e.worker(e.config("w1"))
	if err := w.HandleBatch(context.Background(), []eventschema.Envelope{started}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the session to give up", func() bool { return w.Running() == 0 })
	if c := e.load(id); c.Status() != collection.StatusRunning {
		t.Fatalf("status %s; a store outage must not end the collection", c.Status())
	}
	e.store.setFailAppends(false)
	if err := w.Resume(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
		t.Fatalf("status %s", c.Status())
	}
}

func TestMaxSessionsBoundsConcurrency(t *testing.T) {
	e := newEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithMockSignDelay(100 * time.Millisecond)}})
	cfg := e.config("w1")
	cfg.MaxSessions = 2
	w := e.worker(cfg)
	var ids []string
	var batch []eventschema.Envelope
	for range 5 {
		id, started := e.start(insurer, mock, tolvan)
		ids = append(ids, id)
		batch = append(batch, started)
	}
	peak := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
			peak = max(peak, w.Running())
			finished := true
			for _, id := range ids {
				if !e.load(id).Status().IsFinal() {
					finished = false
				}
			}
			if finished {
				return
			}
		}
	}()
	if err := w.HandleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	<-done
	for _, id := range ids {
		if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
			t.Fatalf("status %s", c.Status())
		}
	}
	if peak > 2 {
		t.Fatalf("%d sessions ran at once, MaxSessions is 2", peak)
	}
}
