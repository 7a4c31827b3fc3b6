package company_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/connectors/company"
	"github.com/samla/samla/connectors/pdfletter"
	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/collection"
	dcompany "github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/eid"
)

// quick are sandbox delays for real-clock tests over HTTP.
func quick(extra ...sandbox.Option) []sandbox.Option {
	return append([]sandbox.Option{sandbox.WithStepDelay(5 * time.Millisecond), sandbox.WithUserDelay(50 * time.Millisecond),
		sandbox.WithProductTimeout(20 * time.Millisecond), sandbox.WithClientWait(time.Second)}, extra...)
}

// drive polls a login like a worker, answering input requests, until it is authenticated,
// failed or stuck in a state only Samla's deadline ends. It returns the states seen, each once.
func drive(t *testing.T, c *company.Client, companyID string, req worker.LoginRequest) (worker.CompanySession, []worker.LoginState) {
	t.Helper()
	ctx := context.Background()
	s, err := c.StartLogin(ctx, companyID, req)
	if err != nil {
		t.Fatal(err)
	}
	var path []worker.LoginState
	stuckSince := time.Time{}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if len(path) == 0 || path[len(path)-1] != s.State {
			path = append(path, s.State)
		}
		switch s.State {
		case worker.LoginAuthenticated, worker.LoginFailed:
			return s, path
		case worker.LoginContactFormRequired, worker.LoginInputRequired:
			var inputs []collection.Input
			for _, typ := range s.RequiredInputTypes {
				v := map[string]string{"EMAIL": "someone@example.se", "MOBILE_PHONE_NUMBER": "46701234567"}[typ]
				inputs = append(inputs, collection.Input{Type: typ, Value: v})
			}
			if s, err = c.SubmitInputs(ctx, companyID, s, inputs); err != nil {
				t.Fatal(err)
			}
			continue
		case worker.LoginTwoFactorMethodSelection:
			if stuckSince.IsZero() {
				stuckSince = time.Now()
			}
			if time.Since(stuckSince) > 100*time.Millisecond {
				return s, path // Samla's method-selection deadline would end it here
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("login never ended: %v", path)
		}
		time.Sleep(3 * time.Millisecond)
		if s, err = c.PollLogin(ctx, companyID, s); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEveryPersonaThroughTheAdapter(t *testing.T) {
	sb := startSandbox(t, quick()...)
	f := newClient(t, sb.BaseURL, nil)
	const (
		user, auth, failed = worker.LoginAwaitingUser, worker.LoginAuthenticated, worker.LoginFailed
		pending, twoFactor = worker.LoginPending, worker.LoginTwoFactorPending
	)
	cases := []struct {
		pn      string
		path    []worker.LoginState
		outcome collection.Status
	}{
		{"199001010017", []worker.LoginState{user, auth}, ""},
		{"199001010025", []worker.LoginState{user, auth}, ""},
		{"199001010041", []worker.LoginState{failed}, collection.StatusIncorrectCredentials},
		{"199001010058", []worker.LoginState{pending, twoFactor, auth}, ""},
		{"199001010066", []worker.LoginState{pending, worker.LoginContactFormRequired, auth}, ""},
		{"199001010074", []worker.LoginState{pending, worker.LoginInputRequired, auth}, ""},
		{"199001010090", []worker.LoginState{user, failed}, collection.StatusAuthenticationCancelled},
		{"199001010108", []worker.LoginState{user, failed}, collection.StatusAuthenticationTimeout},
		{"199001010116", []worker.LoginState{failed}, collection.StatusAuthenticationConflict},
		{"199001010124", []worker.LoginState{user, failed}, collection.StatusAccountTemporarilyLocked},
		{"199001010132", []worker.LoginState{user, failed}, collection.StatusKYCForm},
		{"199001010140", []worker.LoginState{user, failed}, collection.StatusCustomerEnrollmentRequired},
		{"199001010165", []worker.LoginState{user, failed}, collection.StatusFailed},
		{"199001010173", []worker.LoginState{user, failed}, collection.StatusAuthenticationError},
		{"199001010181", []worker.LoginState{pending, worker.LoginTwoFactorMethodSelection}, ""},
		{"199001010199", []worker.LoginState{pending, twoFactor, failed}, collection.StatusIncorrectTwoFactorCode},
		{"199001010207", []worker.LoginState{user, failed}, collection.StatusContactForm},
		{"199001010215", []worker.LoginState{pending, worker.LoginContactFormRequired, auth}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.pn, func(t *testing.T) {
			t.Parallel()
			s, path := drive(t, f.client, "se-demo-insurer", worker.LoginRequest{PersonalNumber: tc.pn, LoginMethod: mock, Reference: "c-" + tc.pn})
			if !slices.Equal(path, tc.path) || s.Outcome != tc.outcome {
				t.Fatalf("path %v outcome %q, want %v %q", path, s.Outcome, tc.path, tc.outcome)
			}
			if s.State == worker.LoginAuthenticated && (s.AuthenticatedPersonalNumber != tc.pn || len(s.Products) != 3) {
				t.Fatalf("%+v", s)
			}
			if s.State == worker.LoginFailed && s.FailureReason == "" {
				t.Fatal("the company's reason is kept for the logs")
			}
		})
	}
	t.Run("logs carry no personal data", func(t *testing.T) {
		if logs := f.logs.String(); strings.Contains(logs, "1990010") || strings.Contains(logs, "example.se") || strings.Contains(logs, "4670") {
			t.Errorf("personal data in logs:\n%s", logs)
		}
	})
}

func TestOtherDeviceThroughTheAdapter(t *testing.T) {
	sb := startSandbox(t, quick(sandbox.WithEIDOrderTimeout(time.Second))...)
	f := newClient(t, sb.BaseURL, nil)
	ctx := context.Background()
	sign := func(ref string) {
		t.Helper()
		res, err := http.Post(sb.URL()+"/sandbox/eid/sign", "application/json", strings.NewReader(`{"collectionId":"`+ref+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("sign: %d", res.StatusCode)
		}
	}
	for _, tc := range []struct{ pn, signer string }{{"191212121212", "191212121212"}, {"199001010082", "199001010017"}} {
		ref := "col-" + tc.pn
		s, err := f.client.StartLogin(ctx, "se-demo-pension", worker.LoginRequest{PersonalNumber: tc.pn, LoginMethod: dcompany.LoginEIDOtherDevice, Reference: ref})
		if err != nil {
			t.Fatal(err)
		}
		o := s.EIDOrder
		if s.State != worker.LoginAwaitingUser || o == nil || o.QRStartSecret == "" || o.AutoStartToken == "" || o.StartedAt.IsZero() || o.Status != eid.StatusPending {
			t.Fatalf("%+v %+v", s, o)
		}
		if qr := eid.QRData(o.QRStartToken, o.QRStartSecret, o.StartedAt, time.Now()); !strings.HasPrefix(qr, "bankid."+o.QRStartToken+".0.") {
			t.Fatalf("QR %s", qr)
		}
		sign(ref)
		if s, err = f.client.PollLogin(ctx, "se-demo-pension", s); err != nil {
			t.Fatal(err)
		}
		if s.State != worker.LoginAuthenticated || s.EIDCompletion == nil || s.EIDCompletion.PersonalNumber != tc.signer || s.AuthenticatedPersonalNumber != tc.signer {
			t.Fatalf("%+v", s)
		}
		pi, err := f.client.FetchProduct(ctx, "se-demo-pension", s, worker.ProductPersonalInformation)
		if err != nil || pi.PersonalInformation == nil || *pi.PersonalInformation.PersonalNumber != tc.signer {
			t.Fatalf("%+v %v", pi, err)
		}
	}
	s, path := drive(t, f.client, "se-demo-insurer", worker.LoginRequest{PersonalNumber: "199001010017", LoginMethod: dcompany.LoginEIDOtherDevice, Reference: "col-x"})
	if s.Outcome != collection.StatusAuthenticationTimeout || !slices.Equal(path, []worker.LoginState{worker.LoginAwaitingUser, worker.LoginFailed}) {
		t.Fatalf("unsigned: %v %s", path, s.Outcome)
	}
}

func TestClientSideThroughTheAdapter(t *testing.T) {
	sb := startSandbox(t, quick()...)
	f := newClient(t, sb.BaseURL, nil)
	ctx := context.Background()
	run := func(in collection.Instruction) collection.ClientResponse {
		t.Helper()
		var body io.Reader
		if in.Body != nil {
			body = strings.NewReader(*in.Body)
		}
		req, _ := http.NewRequest(in.Method, in.URL, body)
		for k, v := range in.Headers {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return collection.ClientResponse{RequestID: in.RequestID, Status: res.StatusCode, Body: string(b)}
	}
	start := func(ref string) worker.CompanySession {
		s, err := f.client.StartLogin(ctx, "se-demo-insurer", worker.LoginRequest{PersonalNumber: "191212121212",
			LoginMethod: dcompany.LoginEIDSameDeviceClientSide, Reference: ref})
		if err != nil {
			t.Fatal(err)
		}
		if s.State != worker.LoginAwaitingClient || len(s.Instructions) != 2 || s.EIDOrder != nil {
			t.Fatalf("%+v", s)
		}
		return s
	}
	s := start("col-1")
	var responses []collection.ClientResponse
	for _, in := range s.Instructions { // the second waits for the simulated user's signature
		responses = append(responses, run(in))
	}
	responses = append(responses, collection.ClientResponse{RequestID: "from-a-newer-api", Status: 404})
	s, err := f.client.SubmitClientResponses(ctx, "se-demo-insurer", s, responses)
	if err != nil || s.State != worker.LoginAuthenticated || s.AuthenticatedPersonalNumber != "191212121212" {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := f.client.SubmitClientResponses(ctx, "se-demo-insurer", s, responses); !errors.Is(err, worker.ErrNotAwaiting) {
		t.Fatalf("again: %v", err)
	}

	bad := start("col-2")
	got, err := f.client.SubmitClientResponses(ctx, "se-demo-insurer", bad, []collection.ClientResponse{{RequestID: "login-result", Status: 200, Body: `{}`}})
	if err != nil || got.State != worker.LoginFailed || got.Outcome != collection.StatusAuthenticationError {
		t.Fatalf("%+v %v", got, err)
	}
	if polled, err := f.client.PollLogin(ctx, "se-demo-insurer", bad); err != nil || polled.Outcome != collection.StatusAuthenticationError {
		t.Fatalf("%+v %v", polled, err)
	}
}

func TestPDFUploadThroughTheAdapter(t *testing.T) {
	sb := startSandbox(t, quick()...)
	f := newClient(t, sb.BaseURL, nil)
	ctx := context.Background()
	sample := func(opts pdfletter.SampleOptions) *worker.Document {
		var b bytes.Buffer
		if err := pdfletter.WriteSample(&b, opts); err != nil {
			t.Fatal(err)
		}
		return &worker.Document{FileName: "brev.pdf", ContentType: "application/pdf", Content: b.Bytes()}
	}
	s, err := f.client.StartLogin(ctx, "ee-demo-insurer", worker.LoginRequest{LoginMethod: dcompany.LoginPDFUpload, Reference: "c-1",
		Document: sample(pdfletter.SampleOptions{Company: "Demo Kindlustus", Holder: "Jüri Õunapuu", InsuranceType: pdfletter.TypeHome})})
	if err != nil || s.State != worker.LoginAuthenticated || !slices.Equal(s.Products, []worker.DataProduct{worker.ProductInsurances}) {
		t.Fatalf("%+v %v", s, err)
	}
	data, err := f.client.FetchProduct(ctx, "ee-demo-insurer", s, worker.ProductInsurances)
	if err != nil || len(data.Insurances) != 1 {
		t.Fatalf("%+v %v", data, err)
	}
	ins := data.Insurances[0]
	if ins.InsuranceType != "HOME" || *ins.Premium != 289 || *ins.PremiumFrequency != "MONTHLY" || *ins.Currency != "SEK" ||
		data.HolderNames[ins.ID] != "Jüri Õunapuu" || ins.StartDate != nil {
		t.Fatalf("%+v %v", ins, data.HolderNames)
	}
	for name, tc := range map[string]struct {
		doc  *worker.Document
		want collection.Status
	}{
		"broken":       {sample(pdfletter.SampleOptions{Broken: pdfletter.FieldPremium}), collection.StatusFailedPDFParse},
		"not a letter": {sample(pdfletter.SampleOptions{NotALetter: true}), collection.StatusFailedPDFUserInput},
		"not a PDF":    {&worker.Document{Content: []byte("<html>")}, collection.StatusFailedPDFUserInput},
	} {
		s, err := f.client.StartLogin(ctx, "se-demo-insurer", worker.LoginRequest{LoginMethod: dcompany.LoginPDFUpload, Document: tc.doc})
		if err != nil || s.State != worker.LoginFailed || s.Outcome != tc.want {
			t.Errorf("%s: %+v %v", name, s, err)
		}
	}
	if _, err := f.client.StartLogin(ctx, "se-demo-insurer", worker.LoginRequest{LoginMethod: dcompany.LoginPDFUpload}); !errors.Is(err, worker.ErrCompanyFailed) {
		t.Fatalf("without a document: %v", err)
	}
}

func TestProductsThroughTheAdapter(t *testing.T) {
	sb := startSandbox(t, quick()...)
	f := newClient(t, sb.BaseURL, nil)
	ctx := context.Background()
	fetchAll := func(companyID, pn string) map[worker.DataProduct]worker.ProductData {
		t.Helper()
		s, _ := drive(t, f.client, companyID, worker.LoginRequest{PersonalNumber: pn, LoginMethod: mock, Reference: "c-" + companyID + pn})
		if s.State != worker.LoginAuthenticated {
			t.Fatalf("%+v", s)
		}
		out := map[worker.DataProduct]worker.ProductData{}
		for _, p := range s.Products {
			d, err := f.client.FetchProduct(ctx, companyID, s, p)
			if err != nil {
				t.Fatalf("%s %s: %v", companyID, p, err)
			}
			out[p] = d
		}
		return out
	}

	pension := fetchAll("se-demo-pension", "191212121212")
	ps := pension[worker.ProductPensions].Pensions
	if len(ps) != 7 {
		t.Fatalf("pensions %+v", ps)
	}
	for _, p := range ps {
		if (p.ID == "P6") != (p.CompanyOtherInsuredPerson != nil) || (p.ID == "P6" && !*p.CompanyOtherInsuredPerson) || p.InsuredPersonName == "" {
			t.Errorf("%s: %+v", p.ID, p)
		}
		if p.OtherInsuredPerson != nil {
			t.Errorf("%s: the domain decides otherInsuredPerson, not the adapter", p.ID)
		}
	}
	if len(pension[worker.ProductInvestments].Investments) != 3 || pension[worker.ProductPersonalInformation].PersonalInformation == nil {
		t.Errorf("%+v", pension)
	}

	// The bank's accounts and cards are PSD2 products, read under a consent
	// (TestPSD2DataUnderAConsent), never under the login session.
	bank := fetchAll("se-demo-bank", "191212121212")
	for _, p := range []worker.DataProduct{worker.ProductAccounts, worker.ProductCards} {
		if _, ok := bank[p]; ok {
			t.Errorf("the bank's session offers the PSD2 product %s", p)
		}
	}
	if l := bank[worker.ProductLoans].Loans; len(l) != 2 || *l[0].InterestRate != 3.45 || l[1].InterestRate != nil {
		t.Errorf("loans %+v", l)
	}
	if len(bank[worker.ProductSavings].Savings) != 2 {
		t.Errorf("savings %+v", bank[worker.ProductSavings])
	}

	fr := fetchAll("fr-demo-pension-info", "191212121212")
	cs := fr[worker.ProductCareerStatement].CareerStatement
	if cs == nil || !bytes.HasPrefix(cs.Content, []byte("%PDF-")) || cs.ContentType != "application/pdf" {
		t.Fatalf("career statement %+v", cs)
	}
	if pi := fr[worker.ProductPersonalInformation].PersonalInformation; pi == nil || pi.PersonalNumber != nil {
		t.Errorf("%+v", pi)
	}

	empty := fetchAll("se-demo-bank", "199001010033")
	for p, d := range empty {
		if d.Records() != 0 || d.PersonalInformation != nil {
			t.Errorf("%s of the persona without products: %+v", p, d)
		}
	}
	if d := fetchAll("fr-demo-pension-info", "199001010033")[worker.ProductCareerStatement]; d.CareerStatement != nil {
		t.Errorf("no career statement expected: %+v", d)
	}

	t.Run("one product times out", func(t *testing.T) {
		s, _ := drive(t, f.client, "se-demo-bank", worker.LoginRequest{PersonalNumber: "199001010025", LoginMethod: mock, Reference: "c-partial"})
		before := sb.Stats().Requests
		began := time.Now()
		_, err := f.client.FetchProduct(ctx, "se-demo-bank", s, worker.ProductSavings)
		if !errors.Is(err, worker.ErrProductTimeout) || errors.Is(err, worker.ErrCompanyFailed) {
			t.Fatalf("err %v", err)
		}
		if n := sb.Stats().Requests - before; n != 1 || time.Since(began) > time.Second {
			t.Errorf("%d requests in %v: a gateway timeout is final", n, time.Since(began))
		}
		if d, err := f.client.FetchProduct(ctx, "se-demo-bank", s, worker.ProductPersonalInformation); err != nil || d.PersonalInformation == nil {
			t.Fatalf("the other products still answer: %+v %v", d, err)
		}
		// A product that hangs past the adapter's own request timeout is the same outcome.
		slow := startSandbox(t, quick(sandbox.WithProductTimeout(time.Second))...)
		g := newClient(t, slow.BaseURL, func(c *company.Config) { c.RequestTimeout = 30 * time.Millisecond; c.MaxAttempts = 2 })
		s, _ = drive(t, g.client, "se-demo-pension", worker.LoginRequest{PersonalNumber: "199001010025", LoginMethod: mock, Reference: "c-partial-2"})
		if _, err := g.client.FetchProduct(ctx, "se-demo-pension", s, worker.ProductInvestments); !errors.Is(err, worker.ErrProductTimeout) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("the company errors at collection", func(t *testing.T) {
		s, _ := drive(t, f.client, "se-demo-pension", worker.LoginRequest{PersonalNumber: "199001010157", LoginMethod: mock, Reference: "c-157"})
		if _, err := f.client.FetchProduct(ctx, "se-demo-pension", s, worker.ProductPensions); !errors.Is(err, worker.ErrCompanyFailed) || errors.Is(err, worker.ErrProductTimeout) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("a product the adapter does not know", func(t *testing.T) {
		if _, err := f.client.FetchProduct(ctx, "se-demo-bank", worker.CompanySession{ID: "x"}, "horoscope"); !errors.Is(err, worker.ErrCompanyFailed) {
			t.Fatalf("err %v", err)
		}
	})
	if logs := f.logs.String(); strings.Contains(logs, "191212") || strings.Contains(logs, "Tolvan") {
		t.Errorf("personal data in logs:\n%s", logs)
	}
}

func TestMaintenanceIsNotRetried(t *testing.T) {
	sb := startSandbox(t, quick()...)
	f := newClient(t, sb.BaseURL, nil)
	_, err := f.client.StartLogin(context.Background(), "se-demo-maintenance", worker.LoginRequest{PersonalNumber: "199001010017", LoginMethod: mock})
	if !errors.Is(err, worker.ErrCompanyUnavailable) || !errors.Is(err, worker.ErrCompanyFailed) {
		t.Fatalf("err %v", err)
	}
	if n := sb.Stats().Requests; n != 1 {
		t.Errorf("%d requests; maintenance is not worth retrying", n)
	}
}

func TestInputsRejected(t *testing.T) {
	sb := startSandbox(t, quick()...)
	f := newClient(t, sb.BaseURL, nil)
	ctx := context.Background()
	s, err := f.client.StartLogin(ctx, "se-demo-insurer", worker.LoginRequest{PersonalNumber: "199001010066", LoginMethod: mock, Reference: "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.SubmitInputs(ctx, "se-demo-insurer", s, nil); !errors.Is(err, worker.ErrNotAwaiting) {
		t.Fatalf("before the form: %v", err)
	}
	for s.State != worker.LoginContactFormRequired {
		time.Sleep(3 * time.Millisecond)
		if s, err = f.client.PollLogin(ctx, "se-demo-insurer", s); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(s.RequiredInputTypes, []string{"EMAIL", "MOBILE_PHONE_NUMBER"}) {
		t.Fatalf("%v", s.RequiredInputTypes)
	}
	_, err = f.client.SubmitInputs(ctx, "se-demo-insurer", s, []collection.Input{{Type: "EMAIL", Value: "nope"}})
	var rej *worker.InputRejectedError
	if !errors.As(err, &rej) || !errors.Is(err, worker.ErrInputRejected) || len(rej.Fields) != 2 {
		t.Fatalf("err %v", err)
	}
	if strings.Contains(err.Error(), "nope") {
		t.Error("the rejected value must not be echoed into errors (and so logs)")
	}
}

// TestContactFormAsksForEmailAlone: the kinds a contact form asks for are the company's, here
// the e-mail address alone, and that alone completes it.
func TestContactFormAsksForEmailAlone(t *testing.T) {
	sb := startSandbox(t, quick()...)
	f := newClient(t, sb.BaseURL, nil)
	ctx := context.Background()
	s, err := f.client.StartLogin(ctx, "se-demo-insurer", worker.LoginRequest{PersonalNumber: "199001010215", LoginMethod: mock, Reference: "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.State != worker.LoginContactFormRequired {
		if s.State == worker.LoginAuthenticated || s.State == worker.LoginFailed || time.Now().After(deadline) {
			t.Fatalf("no contact form: %+v", s)
		}
		time.Sleep(3 * time.Millisecond)
		if s, err = f.client.PollLogin(ctx, "se-demo-insurer", s); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(s.RequiredInputTypes, []string{"EMAIL"}) {
		t.Fatalf("required %v, want the e-mail address alone", s.RequiredInputTypes)
	}
	s, err = f.client.SubmitInputs(ctx, "se-demo-insurer", s, []collection.Input{{Type: "EMAIL", Value: "epost@example.se"}})
	if err != nil || s.State != worker.LoginAuthenticated {
		t.Fatalf("the e-mail address alone: %+v %v", s, err)
	}
}

func TestFailureTableCoversTheSandboxReasons(t *testing.T) {
	table := company.FailureOutcomes()
	for _, reason := range []string{"INVALID_CREDENTIALS", "USER_CANCELLED", "ORDER_EXPIRED", "ALREADY_IN_PROGRESS",
		"EID_START_FAILED", "ACCOUNT_LOCKED", "KYC_REQUIRED", "NOT_A_CUSTOMER", "CONTACT_DETAILS_REQUIRED",
		"SIGN_IN_REJECTED", "TEMPORARY_ERROR", "INCORRECT_TWO_FACTOR_CODE", "CLIENT_RESPONSE_INVALID",
		"PDF_PARSE_FAILED", "PDF_UNSUPPORTED"} {
		st, ok := table[reason]
		if !ok || !st.IsFinal() {
			t.Errorf("%s → %q", reason, st)
		}
	}
	b, _ := json.Marshal(table)
	if len(b) < 10 {
		t.Fatal("empty table")
	}
}
