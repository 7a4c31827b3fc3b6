package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/domain/poa"
)

// cancellationView is the API's cancellation.
type cancellationView struct {
	DocumentID        string  `json:"documentId"`
	InsuranceID       string  `json:"insuranceId"`
	CollectionID      string  `json:"collectionId"`
	Company           string  `json:"company"`
	Status            string  `json:"status"`
	IsSignedAndSealed bool    `json:"isSignedAndSealed"`
	CreatedAt         string  `json:"createdAt"`
	SignedAt          *string `json:"signedAt"`
}

// cancel asks for cancellations and returns their document ids by insurance id.
func (c apiClient) cancel(body map[string]any) map[string]string {
	c.t.Helper()
	code, b, _ := c.do("POST", "/cancellations", body, nil)
	if code != http.StatusCreated {
		c.t.Fatalf("POST /cancellations %v = %d %s", body, code, b)
	}
	var out struct {
		Cancellations []struct{ DocumentID, InsuranceID, Status string }
	}
	if err := json.Unmarshal(b, &out); err != nil {
		c.t.Fatal(err)
	}
	ids := map[string]string{}
	for _, d := range out.Cancellations {
		if d.Status != "PREPARATION" {
			c.t.Fatalf("a new cancellation is %s", d.Status)
		}
		ids[d.InsuranceID] = d.DocumentID
	}
	return ids
}

// cancellationProblem expects POST /cancellations to be refused with status and code.
func (c apiClient) cancellationProblem(body map[string]any, status int, code string) {
	c.t.Helper()
	got, b, _ := c.do("POST", "/cancellations", body, nil)
	var p struct{ Code string }
	_ = json.Unmarshal(b, &p)
	if got != status || p.Code != code {
		c.t.Errorf("POST /cancellations %v = %d %s, want %d %s", body, got, b, status, code)
	}
}

// waitCancellation polls GET /cancellations/{id} until done holds (a 404 while the read model
// has not shown it yet counts as not done).
func (c apiClient) waitCancellation(id string, timeout time.Duration, done func(cancellationView) bool) cancellationView {
	c.t.Helper()
	var last cancellationView
	deadline := time.Now().Add(timeout)
	for {
		code, b, _ := c.do("GET", "/cancellations/"+id, nil, nil)
		if code == http.StatusOK {
			last = cancellationView{}
			if err := json.Unmarshal(b, &last); err != nil {
				c.t.Fatal(err)
			}
			if done(last) {
				return last
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("cancellation %s: last %d %+v", id, code, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func cancellationIs(status string) func(cancellationView) bool {
	return func(v cancellationView) bool { return v.Status == status }
}

func sealed(v cancellationView) bool { return v.Status == "CLOSED" && v.IsSignedAndSealed }

// outbox reads the sandbox's outbox of one document.
func outbox(t *testing.T, sandboxURL, reference string) []struct{ Channel, To, Body string } {
	t.Helper()
	resp, err := http.Get(sandboxURL + "/sandbox/outbox?reference=" + reference)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Messages []struct{ Channel, To, Body string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

// holderActs signs or rejects at the sandbox's provider, as the holder would.
func holderActs(t *testing.T, sandboxURL, reference, act string) {
	t.Helper()
	resp, err := http.Post(sandboxURL+"/sandbox/signing/"+reference+"/"+act, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s = %d", act, reference, resp.StatusCode)
	}
}

// pdfTool runs one of poppler-utils' tools on file; a missing tool skips the check unless the
// integration tests are required (CI installs poppler-utils).
func pdfTool(t *testing.T, tool string, args ...string) (string, bool) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("SAMLA_REQUIRE_INTEGRATION") != "" {
			t.Fatalf("%s is required (poppler-utils): %v", tool, err)
		}
		t.Logf("%s not installed; that check is skipped", tool)
		return "", false
	}
	out, err := exec.Command(tool, args...).CombinedOutput()
	if err != nil && tool != "pdfsig" { // pdfsig exits non-zero for an untrusted issuer
		t.Fatalf("%s: %v: %s", tool, err, out)
	}
	return string(out), true
}

// TestCancellationsEndToEnd is issue 9's whole flow over HTTP, against a sandbox that runs apart
// from Samla (as a real signing provider does), so that Samla can restart while the provider keeps
// its processes: a client configured with `samla clients signing`, persona 191212121212's
// insurances collected for a user, two cancelled by e-mail and one by SMS (and two more), the
// outbox, one signed, one rejected, one timed out, one withdrawn, one signed while Samla is down;
// the signed PDF verifies with pdfsig and names the holder and the insurance; every refusal;
// isolation by client; the user's erasure withdraws what is live and removes the signed PDFs.
func TestCancellationsEndToEnd(t *testing.T) {
	ctx := context.Background()
	sb, err := sandbox.Start(ctx, sandbox.WithAddr("127.0.0.1:0"), sandbox.WithLatency(time.Millisecond, 2*time.Millisecond),
		sandbox.WithMockSignDelay(100*time.Millisecond), sandbox.WithSigningSealDelay(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()

	dir := t.TempDir()
	config := func() *Config {
		cfg := testConfig(t, dir)
		cfg.Sandbox, cfg.CompaniesURL = false, sb.URL()
		cfg.SigningTimeout, cfg.SigningPoll = 8*time.Second, 300*time.Millisecond
		return cfg
	}
	cfg := config()
	// The operator configures a client of its own (the sandbox client has the example already).
	key, err := CreateClient(ctx, cfg, testLogger(t), "cancel-acme", "Acme Försäkringsförmedling AB")
	if err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	keyFile, templateFile := filepath.Join(files, "key"), filepath.Join(files, "template")
	if err := os.WriteFile(keyFile, []byte("acme-provider-key-0001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(templateFile, []byte(poa.ExampleTemplate), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ConfigureClientSigning(ctx, cfg, testLogger(t), "cancel-acme", keyFile, templateFile, "Göteborg"); err != nil {
		t.Fatal(err)
	}
	unconfigured, err := CreateClient(ctx, cfg, testLogger(t), "cancel-other", "Other")
	if err != nil {
		t.Fatal(err)
	}

	svc := start(t, cfg)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: key}
	other := apiClient{t: t, base: c.base, key: unconfigured}
	waitAuthenticated(t, c)
	waitAuthenticated(t, other)
	user := c.createUser("cancel-holder")
	col := c.completed(collectionRequest{company: "se-demo-insurer", pn: "191212121212", userUUID: user})
	const home, car, pet, accident, life, health = "sdi-home-121212", "sdi-car-121212", "sdi-pet-121212",
		"sdi-accident-121212", "sdi-life-121212", "sdi-health-121212"
	email := func(ids ...string) map[string]any {
		return map[string]any{"collectionId": col, "insuranceIds": ids, "deliveryMethod": "EMAIL", "email": "tolvan@example.se"}
	}

	docs := c.cancel(email(home, car))
	for k, v := range c.cancel(map[string]any{"collectionId": col, "insuranceIds": []string{pet}, "deliveryMethod": "SMS",
		"phoneNumber": "46701234567"}) {
		docs[k] = v
	}
	for k, v := range c.cancel(email(accident, life)) {
		docs[k] = v
	}
	for _, ins := range []string{home, car, pet, accident, life} {
		c.waitCancellation(docs[ins], 10*time.Second, cancellationIs("PENDING"))
	}
	t.Run("the outbox holds the signing links", func(t *testing.T) {
		for ins, want := range map[string][2]string{home: {"EMAIL", "tolvan@example.se"}, car: {"EMAIL", "tolvan@example.se"},
			pet: {"SMS", "46701234567"}} {
			msgs := outbox(t, sb.URL(), docs[ins])
			if len(msgs) != 1 || msgs[0].Channel != want[0] || msgs[0].To != want[1] || !strings.Contains(msgs[0].Body, docs[ins]) {
				t.Errorf("%s: outbox %+v", ins, msgs)
			}
		}
	})

	holderActs(t, sb.URL(), docs[home], "sign")
	holderActs(t, sb.URL(), docs[car], "reject")
	if code, b, _ := c.do("DELETE", "/cancellations/"+docs[life], nil, nil); code != http.StatusOK || !strings.Contains(string(b), `"status":"CANCELED"`) {
		t.Fatalf("DELETE = %d %s", code, b)
	}
	signed := c.waitCancellation(docs[home], 10*time.Second, sealed)
	if signed.SignedAt == nil || signed.CollectionID != col || signed.Company != "se-demo-insurer" || signed.InsuranceID != home {
		t.Fatalf("signed %+v", signed)
	}
	c.waitCancellation(docs[car], 10*time.Second, cancellationIs("REJECTED"))
	c.waitCancellation(docs[life], 10*time.Second, cancellationIs("CANCELED"))

	t.Run("the signed PDF: sealed, verified by pdfsig, naming the holder and the insurance", func(t *testing.T) {
		code, pdf, h := c.do("GET", "/cancellations/"+docs[home]+"/pdf", nil, nil)
		if code != http.StatusOK || h.Get("Content-Type") != "application/pdf" || !strings.HasPrefix(string(pdf), "%PDF-") {
			t.Fatalf("PDF = %d %s", code, h.Get("Content-Type"))
		}
		file := filepath.Join(t.TempDir(), "signed.pdf")
		if err := os.WriteFile(file, pdf, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, ok := pdfTool(t, "pdfsig", file); ok && !strings.Contains(out, "Signature is Valid") {
			t.Errorf("pdfsig:\n%s", out)
		}
		if text, ok := pdfTool(t, "pdftotext", file, "-"); ok {
			for _, want := range []string{"Tolvan Tolvansson", "19121212-1212", "H-4471-1212", "Hemförsäkring",
				"Acme Försäkringsförmedling AB", "Göteborg"} {
				if !strings.Contains(text, want) {
					t.Errorf("the signed PDF does not say %q:\n%s", want, text)
				}
			}
		}
		if code, _, _ := c.do("GET", "/cancellations/"+docs[car]+"/pdf", nil, nil); code != http.StatusConflict {
			t.Errorf("a rejected one's PDF = %d", code)
		}
	})

	t.Run("every refusal, and nothing recorded by any", func(t *testing.T) {
		count := func() int {
			code, b, _ := c.do("GET", "/collections/"+col+"/cancellations", nil, nil)
			var l struct{ Cancellations []cancellationView }
			if code != http.StatusOK || json.Unmarshal(b, &l) != nil {
				t.Fatalf("list = %d %s", code, b)
			}
			return len(l.Cancellations)
		}
		before := count()
		if before != 5 {
			t.Fatalf("the collection lists %d cancellations, want 5", before)
		}
		c.cancellationProblem(email(home), http.StatusConflict, "CANCELLATION_EXISTS") // signed: live
		c.cancellationProblem(email(health, health), http.StatusBadRequest, "VALIDATION_FAILED")
		c.cancellationProblem(map[string]any{"collectionId": col, "insuranceIds": []string{health}, "deliveryMethod": "EMAIL"},
			http.StatusBadRequest, "VALIDATION_FAILED")
		c.cancellationProblem(map[string]any{"collectionId": col, "insuranceIds": []string{health}, "deliveryMethod": "SMS",
			"phoneNumber": "+46 70 123"}, http.StatusBadRequest, "VALIDATION_FAILED")
		c.cancellationProblem(map[string]any{"collectionId": col, "insuranceIds": []string{health}, "deliveryMethod": "FAX",
			"email": "a@b.se"}, http.StatusBadRequest, "VALIDATION_FAILED")
		c.cancellationProblem(email("no-such-insurance"), http.StatusUnprocessableEntity, "UNKNOWN_INSURANCE")
		wealth := c.completed(collectionRequest{company: "se-demo-pension", pn: "191212121212"})
		c.cancellationProblem(map[string]any{"collectionId": wealth, "insuranceIds": []string{"P1"}, "deliveryMethod": "EMAIL",
			"email": "a@b.se"}, http.StatusUnprocessableEntity, "COLLECTION_NOT_CANCELLABLE")
		other.cancellationProblem(email(health), http.StatusUnprocessableEntity, "SIGNING_NOT_CONFIGURED")
		if after := count(); after != before {
			t.Fatalf("refusals recorded %d cancellations", after-before)
		}
		// A rejected insurance may be cancelled again, and an Idempotency-Key retry is answered
		// as the first request was.
		retry := map[string]string{"Idempotency-Key": "cancel-car-again"}
		code1, b1, _ := c.do("POST", "/cancellations", email(car), retry)
		code2, b2, h2 := c.do("POST", "/cancellations", email(car), retry)
		if code1 != http.StatusCreated || code2 != http.StatusCreated || string(b1) != string(b2) || h2.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: %d %s, then %d %s", code1, b1, code2, b2)
		}
		if code, b, _ := c.do("DELETE", "/cancellations/"+docs[home], nil, nil); code != http.StatusConflict || !strings.Contains(string(b), "CANCELLATION_FINAL") {
			t.Fatalf("DELETE of a signed one = %d %s", code, b)
		}
	})

	t.Run("another client sees none of it", func(t *testing.T) {
		for _, path := range []string{"/cancellations/" + docs[home], "/cancellations/" + docs[home] + "/pdf", "/collections/" + col + "/cancellations"} {
			if code, b, _ := other.do("GET", path, nil, nil); code != http.StatusNotFound {
				t.Errorf("GET %s = %d %s", path, code, b)
			}
		}
		if code, _, _ := other.do("DELETE", "/cancellations/"+docs[pet], nil, nil); code != http.StatusNotFound {
			t.Errorf("DELETE = %d", code)
		}
		other.cancellationProblem(email(health), http.StatusUnprocessableEntity, "SIGNING_NOT_CONFIGURED")
	})

	t.Run("the user's own session cancels and reads; another user's session is refused", func(t *testing.T) {
		token, _ := c.createSession(user)
		own := c.session(token)
		strangerToken, _ := c.createSession(c.createUser("cancel-stranger"))
		stranger := c.session(strangerToken)
		stranger.expect("POST", "/cancellations", email(life), http.StatusForbidden, "FORBIDDEN_FOR_SESSION")
		stranger.expect("GET", "/cancellations/"+docs[home], nil, http.StatusForbidden, "FORBIDDEN_FOR_SESSION")
		stranger.expect("GET", "/cancellations/"+docs[home]+"/pdf", nil, http.StatusForbidden, "FORBIDDEN_FOR_SESSION")
		stranger.expect("DELETE", "/cancellations/"+docs[home], nil, http.StatusForbidden, "FORBIDDEN_FOR_SESSION")
		own.expect("POST", "/cancellations", email(life), http.StatusCreated, "")
		own.expect("GET", "/cancellations/"+docs[home], nil, http.StatusOK, "")
		own.expect("GET", "/cancellations/"+docs[home]+"/pdf", nil, http.StatusOK, "")
		own.expect("GET", "/collections/"+col+"/cancellations", nil, http.StatusOK, "")
	})

	t.Run("signed while Samla is down: the restarted connector finds it at the provider", func(t *testing.T) {
		stop(t, svc)
		holderActs(t, sb.URL(), docs[pet], "sign") // its callback finds nobody
		svc = start(t, config())
		c.base, other.base = "http://"+svc.HTTPAddr(), "http://"+svc.HTTPAddr()
		c.waitCancellation(docs[pet], 15*time.Second, sealed)
	})
	t.Run("unsigned past the deadline: TIMED_OUT", func(t *testing.T) {
		c.waitCancellation(docs[accident], 20*time.Second, cancellationIs("TIMED_OUT"))
		if msgs := outbox(t, sb.URL(), docs[accident]); len(msgs) != 1 {
			t.Errorf("outbox %+v", msgs)
		}
	})
	defer func() { stop(t, svc) }()

	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get("http://" + svc.OpsAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		if _, err := io.Copy(&b, resp.Body); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`samla_cancellation_status_changes_total{company="se-demo-insurer",status="TIMED_OUT"}`,
			`samla_connector_cancellation_outcomes_total{code="",company="se-demo-insurer",status="TIMED_OUT"}`,
			`samla_signing_provider_calls_total{operation="status",outcome="ok"}`,
			`samla_cancellation_signature_duration_seconds_count{company="se-demo-insurer"}`} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		if strings.Contains(b.String(), "Tolvan") || strings.Contains(b.String(), "191212121212") ||
			strings.Contains(b.String(), "acme-provider-key-0001") {
			t.Error("personal data or the provider key in the metrics")
		}
	})

	t.Run("the user's erasure withdraws what is live and removes the signed PDFs", func(t *testing.T) {
		live := c.cancel(email(health))[health]
		c.waitCancellation(live, 10*time.Second, cancellationIs("PENDING"))
		if code, b, _ := c.do("DELETE", "/users/"+user, nil, map[string]string{"Service-Version": v2}); code != http.StatusNoContent {
			t.Fatalf("DELETE user = %d %s", code, b)
		}
		c.waitCancellation(live, 10*time.Second, cancellationIs("CANCELED"))
		c.waitFor("the signed PDF removed", func() bool {
			code, _, _ := c.do("GET", "/cancellations/"+docs[home]+"/pdf", nil, nil)
			return code == http.StatusConflict
		})
		if v := c.waitCancellation(docs[home], time.Second, sealed); v.SignedAt == nil {
			t.Fatalf("the signed one after the erasure: %+v", v)
		}
	})
}
