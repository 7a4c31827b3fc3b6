package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/collection"
	dcompany "github.com/samla/samla/domain/company"
)

// Persona numbers of SANDBOX.md used below.
const (
	pnPartial         = "199001010025"
	pnEmpty           = "199001010033"
	pnTwoFactor       = "199001010058"
	pnContactForm     = "199001010066"
	pnEmailForm       = "199001010215"
	pnInput           = "199001010074"
	pnMismatch        = "199001010082"
	pnNeverSigns      = "199001010108"
	pnThirdParty      = "199001010157"
	pnMethodSelection = "199001010181"
	pnWrongCode       = "199001010199"
	// Any other valid number behaves like 199001010017; real (non-mock) EID orders conflict per
	// person, so the tests of those use numbers of their own.
	pnOtherDevice = "198005051233"
	pnSameDevice  = "198106061230"
)

var (
	sOther = struct {
		TwoFactor, ContactFormPending, InputPending, EnrollmentCheck collection.Status
	}{collection.StatusTwoFactorPending, collection.StatusContactFormPending, collection.StatusCollectionInputPending, collection.StatusCustomerEnrollmentCheck}
	email = collection.Input{Type: collection.InputEmail, Value: "kontakta@example.se"}
	phone = collection.Input{Type: collection.InputMobilePhoneNumber, Value: "46701234567"}
)

// fastSandbox makes the companies' own steps and the simulated user quick.
func fastSandbox(extra ...sandbox.Option) envOptions {
	return envOptions{sandbox: append([]sandbox.Option{sandbox.WithStepDelay(20 * time.Millisecond),
		sandbox.WithUserDelay(100 * time.Millisecond), sandbox.WithProductTimeout(50 * time.Millisecond)}, extra...)}
}

// shortDeadlines is a worker configuration whose user deadlines pass within a test.
func (e *env) shortDeadlines(workerID string, d time.Duration) worker.Config {
	cfg := e.config(workerID)
	cfg.ContactFormTimeout, cfg.InputTimeout, cfg.MethodSelectionTimeout = d, d, d
	return cfg
}

func last[T any](s []T) T { return s[len(s)-1] }

// noPersonalData fails when the logs contain any of the values.
func noPersonalData(t *testing.T, e *env, values ...string) {
	t.Helper()
	logs := e.logs.String()
	for _, v := range values {
		if v != "" && strings.Contains(logs, v) {
			t.Errorf("logs contain personal data %q", v)
		}
	}
}

func TestOtherDeviceShowsTheEIDOrderOnceAndCompletesWhenSigned(t *testing.T) {
	e := newEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithEIDOrderTimeout(5 * time.Second)}})
	cfg := e.config("w1")
	cfg.EIDOrderTimeout = 5 * time.Second
	w := e.worker(cfg)
	id, started := e.start(insurer, dcompany.LoginEIDOtherDevice, pnOtherDevice)
	e.handle(w, started)

	c := e.waitFor(id, "WAITING_FOR_USER_ACTION", func(c *collection.Collection) bool { return c.Status() == S.Waiting })
	cur := c.Current()
	o := cur.EIDOrder
	if o == nil || o.QRStartToken == "" || o.AutoStartToken == "" || o.StartedAt.IsZero() {
		t.Fatalf("EID order %+v", o)
	}
	if cur.Personal == nil || cur.Personal.QRStartSecret == "" {
		t.Fatal("the QR start secret must be recorded (in the personal part) for the query side")
	}
	if d := cur.Deadline; d == nil || d.Kind != collection.DeadlineEIDOrder || !d.DueAt.Equal(o.StartedAt.Add(5*time.Second)) {
		t.Fatalf("deadline %+v, want EID_ORDER at the order's start + 5s (%s)", d, o.StartedAt)
	}
	// The QR code changes every second, but the order does not: polling records nothing more.
	time.Sleep(300 * time.Millisecond)
	if got := e.statuses(id); !slices.Equal(got, []collection.Status{S.Login, S.Waiting}) {
		t.Fatalf("statuses while the user has not signed: %v", got)
	}
	for _, env := range e.envelopes(id) {
		if env.Type != collection.EventStatusChanged {
			continue
		}
		var p map[string]json.RawMessage
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			t.Fatal(err)
		}
		delete(p, "personal")
		if b, _ := json.Marshal(p); strings.Contains(string(b), cur.Personal.QRStartSecret) {
			t.Fatalf("the QR secret is outside the personal part: %s", env.Payload)
		}
	}

	if _, err := e.sb.EID().SignByReference(id, time.Now()); err != nil {
		t.Fatal(err)
	}
	if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
		t.Fatalf("status %s (%v)", c.Status(), e.statuses(id))
	}
	if got := e.statuses(id); !slices.Equal(got, happyPath) {
		t.Fatalf("statuses %v, want %v", got, happyPath)
	}
	// COLLECTING no longer shows the order.
	if ch := e.changes(id)[2]; ch.EIDOrder != nil || ch.Deadline != nil || ch.Personal != nil {
		t.Errorf("COLLECTING carries %+v", ch)
	}
	noPersonalData(t, e, pnOtherDevice, cur.Personal.QRStartSecret)
}

func TestUnsignedEIDOrderEndsAtSamlasDeadline(t *testing.T) {
	// The company would wait an hour; Samla's deadline ends the collection first.
	e := newEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithEIDOrderTimeout(time.Hour)}})
	cfg := e.config("w1")
	cfg.EIDOrderTimeout = 300 * time.Millisecond
	w := e.worker(cfg)
	id, started := e.start(insurer, dcompany.LoginEIDOtherDevice, pnOtherDevice)
	e.handle(w, started)
	c := e.waitFinal(id)
	want := []collection.Status{S.Login, S.Waiting, collection.StatusAuthenticationTimeout}
	if got := e.statuses(id); !slices.Equal(got, want) || c.Status() != collection.StatusAuthenticationTimeout {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	waiting, final := e.changes(id)[1], e.changes(id)[2]
	if final.ChangedAt.Before(waiting.Deadline.DueAt) {
		t.Fatalf("ended at %s, before the deadline %s", final.ChangedAt, waiting.Deadline.DueAt)
	}
	if final.ChangedAt.Sub(waiting.Deadline.DueAt) > time.Second {
		t.Errorf("ended %s after the deadline", final.ChangedAt.Sub(waiting.Deadline.DueAt))
	}
	if got := value(t, e.metrics.ConnectorOutcomes.WithLabelValues(insurer, "AUTHENTICATION_TIMEOUT")); got != 1 {
		t.Errorf("outcome counter %v", got)
	}
}

// device runs a status's instructions as the client app does on the user's phone.
func device(t *testing.T, instructions []collection.Instruction) []collection.ClientResponse {
	t.Helper()
	var out []collection.ClientResponse
	for _, in := range instructions {
		var body io.Reader
		if in.Body != nil {
			body = strings.NewReader(*in.Body)
		}
		req, err := http.NewRequest(in.Method, in.URL, body)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range in.Headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("instruction %s: %v", in.RequestID, err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		headers := map[string]string{}
		for k := range resp.Header {
			headers[k] = resp.Header.Get(k)
		}
		out = append(out, collection.ClientResponse{RequestID: in.RequestID, Status: resp.StatusCode, Headers: headers, Body: string(b)})
	}
	return out
}

func TestSameDeviceInstructionsAndClientResponses(t *testing.T) {
	e := newEnv(t, envOptions{})
	cfg := e.config("w1")
	cfg.EIDOrderTimeout = 5 * time.Second
	w := e.worker(cfg)

	t.Run("responses forwarded: completed", func(t *testing.T) {
		id, started := e.start(insurer, dcompany.LoginEIDSameDeviceClientSide, pnSameDevice)
		e.handle(w, started)
		c := e.waitFor(id, "instructions", func(c *collection.Collection) bool { return len(c.Current().Instructions) > 0 })
		cur := c.Current()
		if c.Status() != S.Waiting || len(cur.Instructions) != 2 || cur.EIDOrder != nil {
			t.Fatalf("status %s with %+v", c.Status(), cur)
		}
		if d := cur.Deadline; d == nil || d.Kind != collection.DeadlineEIDOrder || !d.DueAt.Equal(cur.ChangedAt.Add(10*time.Second)) {
			t.Fatalf("deadline %+v, want EID_ORDER two order timeouts after %s", d, cur.ChangedAt)
		}
		responses := device(t, cur.Instructions)
		// A response to a request Samla did not hand out is tolerated (and dropped).
		responses = append(responses, collection.ClientResponse{RequestID: "from-a-newer-app", Status: 200})
		e.supplyResponses(id, responses...)
		if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
			t.Fatalf("status %s (%v)", c.Status(), e.statuses(id))
		}
		if got := e.statuses(id); !slices.Equal(got, happyPath) {
			t.Fatalf("statuses %v, want %v", got, happyPath)
		}
		noPersonalData(t, e, pnSameDevice, "loginTicket")
	})
	t.Run("responses the company cannot use: AUTHENTICATION_ERROR", func(t *testing.T) {
		id, started := e.start(insurer, dcompany.LoginEIDSameDeviceClientSide, "198207071237")
		e.handle(w, started)
		c := e.waitFor(id, "instructions", func(c *collection.Collection) bool { return len(c.Current().Instructions) > 0 })
		// Every instruction is answered (Samla refuses a ResponseObject that lacks one), the login
		// result with a forged ticket.
		responses := device(t, c.Current().Instructions[:1])
		responses = append(responses, collection.ClientResponse{RequestID: c.Current().Instructions[1].RequestID, Status: 200, Body: `{"status":"COMPLETE","loginTicket":"forged"}`})
		e.supplyResponses(id, responses...)
		e.waitFinal(id)
		want := []collection.Status{S.Login, S.Waiting, collection.StatusAuthenticationError}
		if got := e.statuses(id); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	})
	t.Run("the client never runs them: the deadline ends it", func(t *testing.T) {
		cfg := e.config("w2")
		cfg.EIDOrderTimeout = 150 * time.Millisecond
		w2 := e.worker(cfg)
		id, started := e.start(insurer, dcompany.LoginEIDSameDeviceClientSide, "198308081234")
		e.handle(w2, started)
		e.waitFinal(id)
		want := []collection.Status{S.Login, S.Waiting, collection.StatusAuthenticationTimeout}
		if got := e.statuses(id); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	})
}

// TestPersonaPaths plays the personas whose paths go through the user's steps, with
// deadlines short enough to pass.
func TestPersonaPaths(t *testing.T) {
	e := newEnv(t, fastSandbox(sandbox.WithEIDOrderTimeout(300*time.Millisecond)))
	w := e.worker(e.shortDeadlines("w1", 300*time.Millisecond))
	cases := []struct {
		pn   string
		path []collection.Status
	}{
		{tolvan, happyPath},
		{pnTwoFactor, []collection.Status{S.Login, sOther.TwoFactor, S.Collecting, S.Completed}},
		{pnWrongCode, []collection.Status{S.Login, sOther.TwoFactor, collection.StatusIncorrectTwoFactorCode}},
		{pnMethodSelection, []collection.Status{S.Login, S.Login, collection.StatusTwoFactorMethodSelectionTimeout}},
		{pnContactForm, []collection.Status{S.Login, sOther.ContactFormPending, collection.StatusContactForm}},
		{pnInput, []collection.Status{S.Login, sOther.InputPending, collection.StatusCollectionInputTimeout}},
		{pnPartial, []collection.Status{S.Login, S.Waiting, S.Collecting, collection.StatusCompletedPartial}},
		{pnEmpty, []collection.Status{S.Login, S.Waiting, S.Collecting, collection.StatusCompletedEmpty}},
		{pnNeverSigns, []collection.Status{S.Login, S.Waiting, collection.StatusAuthenticationTimeout}},
	}
	ids := map[string]string{}
	for _, tc := range cases {
		id, started := e.start(insurer, mock, tc.pn)
		ids[tc.pn] = id
		e.handle(w, started)
	}
	for _, tc := range cases {
		id := ids[tc.pn]
		e.waitFinal(id)
		if got := e.statuses(id); !slices.Equal(got, tc.path) {
			t.Errorf("persona %s: path %v, want %v", tc.pn, got, tc.path)
		}
	}

	// What the waiting statuses asked for.
	sel := e.changes(ids[pnMethodSelection])[1]
	if sel.Deadline == nil || sel.Deadline.Kind != collection.DeadlineMethodSelection || !sel.Deadline.DueAt.Equal(sel.ChangedAt.Add(300*time.Millisecond)) {
		t.Errorf("method selection: %+v", sel)
	}
	form := e.changes(ids[pnContactForm])[1]
	if !slices.Equal(form.RequiredInputTypes, []string{collection.InputEmail, collection.InputMobilePhoneNumber}) ||
		form.Deadline == nil || form.Deadline.Kind != collection.DeadlineContactForm || !form.Deadline.DueAt.Equal(form.ChangedAt.Add(300*time.Millisecond)) {
		t.Errorf("contact form: %+v", form)
	}
	input := e.changes(ids[pnInput])[1]
	if !slices.Equal(input.RequiredInputTypes, []string{collection.InputEmail}) || input.Deadline == nil || input.Deadline.Kind != collection.DeadlineCollectionInput {
		t.Errorf("input: %+v", input)
	}
	if got := len(e.load(ids[pnPartial]).Insurances()); got != 1 {
		t.Errorf("partial persona: %d insurances recorded, want the one that did not time out", got)
	}
	if slices.Contains(e.types(ids[pnEmpty]), collection.EventInsurancesCollected) {
		t.Error("an empty collection records no insurances")
	}
	for _, st := range []string{"TWO_FACTOR_METHOD_SELECTION_TIMEOUT", "CONTACT_FORM", "COLLECTION_INPUT_TIMEOUT", "COMPLETED_PARTIAL", "COMPLETED_EMPTY"} {
		if got := value(t, e.metrics.ConnectorOutcomes.WithLabelValues(insurer, st)); got != 1 {
			t.Errorf("outcome %s counted %v times", st, got)
		}
	}
}

func TestSuppliedInputIsForwarded(t *testing.T) {
	e := newEnv(t, fastSandbox())
	w := e.worker(e.shortDeadlines("w1", 5*time.Second))
	t.Run("contact form", func(t *testing.T) {
		id, started := e.start(insurer, mock, pnContactForm)
		e.handle(w, started)
		e.waitFor(id, "CONTACT_FORM_PENDING", func(c *collection.Collection) bool { return c.Status() == sOther.ContactFormPending })
		e.supply(id, email, phone)
		if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
			t.Fatalf("status %s", c.Status())
		}
		want := []collection.Status{S.Login, sOther.ContactFormPending, S.Collecting, S.Completed}
		if got := e.statuses(id); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	})
	t.Run("contact form that asks for the e-mail address alone", func(t *testing.T) {
		id, started := e.start(insurer, mock, pnEmailForm)
		e.handle(w, started)
		e.waitFor(id, "CONTACT_FORM_PENDING", func(c *collection.Collection) bool { return c.Status() == sOther.ContactFormPending })
		if form := e.changes(id)[1]; !slices.Equal(form.RequiredInputTypes, []string{collection.InputEmail}) {
			t.Fatalf("REQUIRED_INPUT_TYPES %v, want EMAIL alone", form.RequiredInputTypes)
		}
		e.supply(id, email)
		if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
			t.Fatalf("status %s", c.Status())
		}
	})
	t.Run("collection input", func(t *testing.T) {
		id, started := e.start(insurer, mock, pnInput)
		e.handle(w, started)
		e.waitFor(id, "COLLECTION_INPUT_PENDING", func(c *collection.Collection) bool { return c.Status() == sOther.InputPending })
		e.supply(id, email)
		if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
			t.Fatalf("status %s", c.Status())
		}
		want := []collection.Status{S.Login, sOther.InputPending, S.Collecting, S.Completed}
		if got := e.statuses(id); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	})
	noPersonalData(t, e, email.Value, phone.Value, pnContactForm, pnEmailForm, pnInput)
}

// hooked wraps the HTTP adapter to provoke what the sandbox does not do by itself.
type hooked struct {
	worker.Companies
	mu sync.Mutex
	// hideIdentity drops who authenticated from the sessions (a company and a flow that do
	// not tell), so that only the personal information can say.
	hideIdentity bool
	// rejectInputs is how many SubmitInputs calls the company refuses.
	rejectInputs int
	fetches      map[worker.DataProduct]int
}

func (h *hooked) strip(cs worker.CompanySession, err error) (worker.CompanySession, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hideIdentity {
		cs.EIDCompletion, cs.AuthenticatedPersonalNumber = nil, ""
	}
	return cs, err
}

func (h *hooked) StartLogin(ctx context.Context, companyID string, req worker.LoginRequest) (worker.CompanySession, error) {
	return h.strip(h.Companies.StartLogin(ctx, companyID, req))
}

func (h *hooked) PollLogin(ctx context.Context, companyID string, s worker.CompanySession) (worker.CompanySession, error) {
	return h.strip(h.Companies.PollLogin(ctx, companyID, s))
}

func (h *hooked) SubmitInputs(ctx context.Context, companyID string, s worker.CompanySession, inputs []collection.Input) (worker.CompanySession, error) {
	h.mu.Lock()
	reject := h.rejectInputs > 0
	if reject {
		h.rejectInputs--
	}
	h.mu.Unlock()
	if reject {
		return worker.CompanySession{}, &worker.InputRejectedError{Fields: []worker.FieldError{{Field: "inputs[0].value", Message: "is not an address we can deliver to"}}}
	}
	return h.strip(h.Companies.SubmitInputs(ctx, companyID, s, inputs))
}

func (h *hooked) SubmitClientResponses(ctx context.Context, companyID string, s worker.CompanySession, r []collection.ClientResponse) (worker.CompanySession, error) {
	return h.strip(h.Companies.SubmitClientResponses(ctx, companyID, s, r))
}

// fetched is how many times product was read.
func (h *hooked) fetched(p worker.DataProduct) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fetches[p]
}

func (h *hooked) FetchProduct(ctx context.Context, companyID string, s worker.CompanySession, p worker.DataProduct) (worker.ProductData, error) {
	h.mu.Lock()
	if h.fetches == nil {
		h.fetches = map[worker.DataProduct]int{}
	}
	h.fetches[p]++
	h.mu.Unlock()
	return h.Companies.FetchProduct(ctx, companyID, s, p)
}

func TestInputTheCompanyRejectsCanBePostedAgain(t *testing.T) {
	e := newEnv(t, fastSandbox())
	cfg := e.shortDeadlines("w1", 5*time.Second)
	cfg.Companies = &hooked{Companies: e.companies, rejectInputs: 1}
	w := e.worker(cfg)
	id, started := e.start(insurer, mock, pnInput)
	e.handle(w, started)
	c := e.waitFor(id, "COLLECTION_INPUT_PENDING", func(c *collection.Collection) bool { return c.Status() == sOther.InputPending })
	due := c.Deadline().DueAt
	e.supply(id, email)

	c = e.waitFor(id, "the input request again", func(c *collection.Collection) bool { return c.AwaitsInput() && len(e.changes(id)) == 3 })
	again := c.Current()
	if again.To != sOther.InputPending || !strings.Contains(again.Message, "did not accept") || !strings.Contains(again.Message, "inputs[0].value") {
		t.Fatalf("status %s message %q", again.To, again.Message)
	}
	if again.Deadline == nil || !again.Deadline.DueAt.Equal(due) || !slices.Equal(again.RequiredInputTypes, []string{collection.InputEmail}) {
		t.Fatalf("the new request must keep the kinds and the deadline: %+v", again)
	}
	time.Sleep(100 * time.Millisecond) // polls in between must not overwrite the reason
	if got := e.load(id).Current().Message; got != again.Message {
		t.Fatalf("message %q replaced by %q", again.Message, got)
	}
	e.supply(id, email)
	if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
		t.Fatalf("status %s (%v)", c.Status(), e.statuses(id))
	}
	want := []collection.Status{S.Login, sOther.InputPending, sOther.InputPending, S.Collecting, S.Completed}
	if got := e.statuses(id); !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
}

// stopAt starts a contact-form persona's collection, runs a worker until the collection
// reaches status, then stops the worker as a shutdown does.
func (e *env) stopAt(cfg worker.Config, status collection.Status) (string, *collection.Collection) {
	e.t.Helper()
	id, started := e.start(insurer, mock, pnContactForm)
	w := worker.New(cfg)
	e.handle(w, started)
	e.waitFor(id, string(status), func(c *collection.Collection) bool { return c.Status() == status })
	w.Stop()
	return id, e.load(id)
}

func TestDeadlinesAcrossRestarts(t *testing.T) {
	t.Run("passed while stopped: fires at once on the sweep, without the company", func(t *testing.T) {
		e := newEnv(t, fastSandbox())
		cfg := e.shortDeadlines("w1", 300*time.Millisecond)
		id, c := e.stopAt(cfg, sOther.ContactFormPending)
		due := c.Deadline().DueAt
		time.Sleep(time.Until(due) + 100*time.Millisecond)
		requests := e.sb.Stats().Requests

		cfg.Active = e.nonFinal()
		again := e.worker(cfg)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _ = again.Run(ctx) }()
		if c := e.waitFinal(id); c.Status() != collection.StatusContactForm {
			t.Fatalf("status %s (%v)", c.Status(), e.statuses(id))
		}
		want := []collection.Status{S.Login, sOther.ContactFormPending, collection.StatusContactForm}
		if got := e.statuses(id); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
		if n := e.sb.Stats().Requests - requests; n != 0 {
			t.Errorf("the company was called %d times for an expired collection", n)
		}
		if got := e.claims(id); !slices.Equal(got, []string{"w1"}) {
			t.Errorf("claims %v: expiring needs no claim", got)
		}
		if got := value(t, e.metrics.ConnectorOutcomes.WithLabelValues(insurer, "CONTACT_FORM")); got != 1 {
			t.Errorf("outcome counter %v", got)
		}
	})
	t.Run("not yet passed: the new login keeps the old deadline", func(t *testing.T) {
		e := newEnv(t, fastSandbox())
		cfg := e.shortDeadlines("w1", 700*time.Millisecond)
		id, c := e.stopAt(cfg, sOther.ContactFormPending)
		due := c.Deadline().DueAt
		again := e.worker(cfg)
		if err := again.Resume(context.Background(), []string{id}); err != nil {
			t.Fatal(err)
		}
		if c := e.waitFinal(id); c.Status() != collection.StatusContactForm {
			t.Fatalf("status %s (%v)", c.Status(), e.statuses(id))
		}
		want := []collection.Status{S.Login, sOther.ContactFormPending, S.Login, sOther.ContactFormPending, collection.StatusContactForm}
		if got := e.statuses(id); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
		ch := e.changes(id)
		if d := ch[3].Deadline; d == nil || !d.DueAt.Equal(due) {
			t.Fatalf("deadline after the restart %+v, want the first one %s", d, due)
		}
		if last(ch).ChangedAt.Before(due) {
			t.Fatalf("ended at %s, before the deadline %s", last(ch).ChangedAt, due)
		}
	})
	t.Run("input supplied while stopped is forwarded to the new login", func(t *testing.T) {
		e := newEnv(t, fastSandbox())
		cfg := e.shortDeadlines("w1", 5*time.Second)
		id, _ := e.stopAt(cfg, sOther.ContactFormPending)
		e.supply(id, email, phone)
		again := e.worker(cfg)
		if err := again.Resume(context.Background(), []string{id}); err != nil {
			t.Fatal(err)
		}
		if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
			t.Fatalf("status %s (%v)", c.Status(), e.statuses(id))
		}
		want := []collection.Status{S.Login, sOther.ContactFormPending, S.Login, S.Collecting, S.Completed}
		if got := e.statuses(id); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
		noPersonalData(t, e, email.Value, phone.Value)
	})
	t.Run("another worker's live claim does not hold a passed deadline", func(t *testing.T) {
		e := newEnv(t, fastSandbox())
		id, c := e.stopAt(e.shortDeadlines("w1", 200*time.Millisecond), sOther.ContactFormPending)
		time.Sleep(time.Until(c.Deadline().DueAt) + 50*time.Millisecond)
		w2 := e.worker(e.shortDeadlines("w2", 200*time.Millisecond)) // w1's claim is a minute from stale
		if err := w2.Resume(context.Background(), []string{id}); err != nil {
			t.Fatal(err)
		}
		if c := e.waitFinal(id); c.Status() != collection.StatusContactForm {
			t.Fatalf("status %s", c.Status())
		}
		if got := e.claims(id); !slices.Equal(got, []string{"w1"}) {
			t.Errorf("claims %v", got)
		}
	})
	t.Run("a deadline is kept while the worker runs, without a restart", func(t *testing.T) {
		e := newEnv(t, fastSandbox())
		w := e.worker(e.shortDeadlines("w1", 250*time.Millisecond))
		id, started := e.start(insurer, mock, pnContactForm)
		e.handle(w, started)
		c := e.waitFinal(id)
		ch := e.changes(id)
		due := ch[1].Deadline.DueAt
		if c.Status() != collection.StatusContactForm || ch[2].ChangedAt.Before(due) || ch[2].ChangedAt.Sub(due) > 500*time.Millisecond {
			t.Fatalf("status %s at %s, deadline %s", c.Status(), ch[2].ChangedAt, due)
		}
	})
}

func TestShutdownWhileWaitingForInputAppendsNothing(t *testing.T) {
	e := newEnv(t, fastSandbox())
	cfg := e.shortDeadlines("w1", 300*time.Millisecond)
	id, _ := e.stopAt(cfg, sOther.ContactFormPending)
	before := len(e.envelopes(id))
	time.Sleep(500 * time.Millisecond) // past the deadline: a session still running would end it
	if n := len(e.envelopes(id)); n != before {
		t.Fatalf("%d events appended after the shutdown", n-before)
	}
	if c := e.load(id); c.Status() != sOther.ContactFormPending {
		t.Fatalf("status %s", c.Status())
	}
}

func TestIncorrectTwoFactorCodeReportedOutsideTheTwoFactorStep(t *testing.T) {
	// The simulated user is so quick that the worker never sees the two-factor step: the
	// outcome still ends the collection as the company says, through that step.
	e := newEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithStepDelay(0), sandbox.WithUserDelay(0)}})
	cfg := e.config("w1")
	cfg.PollInterval = 100 * time.Millisecond
	w := e.worker(cfg)
	id, started := e.start(insurer, mock, pnWrongCode)
	e.handle(w, started)
	if c := e.waitFinal(id); c.Status() != collection.StatusIncorrectTwoFactorCode {
		t.Fatalf("status %s (%v)", c.Status(), e.statuses(id))
	}
	if got := last(e.statuses(id)[:len(e.statuses(id))-1]); got != sOther.TwoFactor {
		t.Fatalf("statuses %v", e.statuses(id))
	}
}

func TestDeadlineCountsWhatTheUserDidBeforeTheWorkerNoticed(t *testing.T) {
	// The user signs; before the worker's next poll its clock jumps past the deadline. The
	// one last look at the company shows the signature, so the collection goes on.
	e := newEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithEIDOrderTimeout(time.Hour)}})
	var mu sync.Mutex
	skew := time.Duration(0)
	cfg := e.config("w1")
	cfg.Clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(skew) }
	cfg.EIDOrderTimeout, cfg.MaxSessionDuration = time.Hour, 10*time.Hour
	cfg.PollInterval = 500 * time.Millisecond
	w := e.worker(cfg)
	id, started := e.start(insurer, dcompany.LoginEIDOtherDevice, pnOtherDevice)
	e.handle(w, started)
	e.waitFor(id, "WAITING_FOR_USER_ACTION", func(c *collection.Collection) bool { return c.Status() == S.Waiting })
	if _, err := e.sb.EID().SignByReference(id, time.Now()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	skew = 2 * time.Hour
	mu.Unlock()
	if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
		t.Fatalf("status %s (%v)", c.Status(), e.statuses(id))
	}
}
