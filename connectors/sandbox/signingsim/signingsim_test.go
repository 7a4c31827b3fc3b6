package signingsim_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/digitorus/pdfsign/verify"
	"github.com/go-pdf/fpdf"

	"github.com/samla/samla/connectors/pdfletter"
	"github.com/samla/samla/connectors/sandbox/signingsim"
	"github.com/samla/samla/platform/retry"
)

const key = "sk_test_client_a"

// fakeClock is a settable clock for expiry and retention.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type env struct {
	p   *signingsim.Provider
	srv *httptest.Server
}

func newEnv(t *testing.T, opts ...signingsim.Option) env {
	t.Helper()
	p, err := signingsim.New(append([]signingsim.Option{
		signingsim.WithCallbackRetry(3, retry.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond}),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	mux := http.NewServeMux()
	mux.Handle("/sandbox/signing/", p.Handler("/sandbox/signing"))
	mux.Handle("/sandbox/outbox", p.OutboxHandler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return env{p: p, srv: srv}
}

// call sends a request and decodes a JSON answer into out (when non-nil); it returns the status
// and the raw body.
func (e env) call(t *testing.T, method, path, apiKey string, body any, out any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.Header.Get("Content-Type") == "application/json" {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, raw
}

type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func letter(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := pdfletter.WriteSample(&b, pdfletter.SampleOptions{Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pdfWith prints a one-page PDF with these lines.
func pdfWith(t *testing.T, lines ...string) []byte {
	t.Helper()
	p := fpdf.New("P", "mm", "A4", "")
	p.AddPage()
	p.SetFont("Helvetica", "", 12)
	for _, l := range lines {
		p.CellFormat(0, 8, l, "", 1, "L", false, 0, "")
	}
	var b bytes.Buffer
	if err := p.Output(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func start(ref string, doc []byte) map[string]any {
	return map[string]any{
		"reference": ref, "title": "Fullmakt – uppsägning av försäkring", "documentBase64": doc,
		"delivery": map[string]any{"method": "EMAIL", "email": "tolvan@example.se"},
		"signer":   map[string]any{"name": "Åsa Öberg", "personalNumber": "191212121212"},
	}
}

func (e env) mustStart(t *testing.T, apiKey string, body map[string]any) signingsim.Process {
	t.Helper()
	var pr signingsim.Process
	if code, raw := e.call(t, "POST", "/sandbox/signing/api/v1/processes", apiKey, body, &pr); code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, raw)
	}
	return pr
}

func (e env) get(t *testing.T, id string) signingsim.Process {
	t.Helper()
	var pr signingsim.Process
	if code, raw := e.call(t, "GET", "/sandbox/signing/api/v1/processes/"+id, key, nil, &pr); code != http.StatusOK {
		t.Fatalf("get: %d %s", code, raw)
	}
	return pr
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSealedDocumentCarriesTheOriginalTheSignatureAndAValidSeal(t *testing.T) {
	e := newEnv(t, signingsim.WithSealDelay(0))
	original := letter(t)
	pr := e.mustStart(t, key, start("doc-seal-1", original))

	var signed signingsim.Process
	if code, raw := e.call(t, "POST", "/sandbox/signing/doc-seal-1/sign", "", nil, &signed); code != http.StatusOK {
		t.Fatalf("sign: %d %s", code, raw)
	}
	if signed.State != signingsim.StateSigned || !signed.Sealed || signed.SignatureMethod != "SANDBOX_EID" || signed.SignedAt.IsZero() {
		t.Fatalf("with no seal delay the signature answer is sealed: %+v", signed)
	}
	code, sealed := e.call(t, "GET", "/sandbox/signing/api/v1/processes/"+pr.ID+"/document", key, nil, nil)
	if code != http.StatusOK || !bytes.HasPrefix(sealed, []byte("%PDF-")) {
		t.Fatalf("document: %d %.80q", code, sealed)
	}

	text, err := pdfletter.Text(sealed)
	if err != nil {
		t.Fatal(err)
	}
	origText, err := pdfletter.Text(original)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(origText, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.Contains(text, line) {
			t.Errorf("the sealed PDF lost the original's line %q", line)
		}
	}
	for _, want := range []string{"Signed by: Åsa Öberg", "Reference: doc-seal-1", "Signature method: SANDBOX_EID",
		"Sealed by Samla Sandbox Signing", "Signed at: " + signed.SignedAt.UTC().Format("2006-01-02 15:04:05") + " UTC"} {
		if !strings.Contains(text, want) {
			t.Errorf("the signature page lacks %q:\n%s", want, text)
		}
	}

	// The seal verifies in Go, by the provider's certificate under its CA.
	res, err := verify.VerifyWithOptions(bytes.NewReader(sealed), int64(len(sealed)), &verify.VerifyOptions{AllowUntrustedRoots: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Signers) != 1 || !res.Signers[0].ValidSignature || len(res.Signers[0].Certificates) == 0 {
		t.Fatalf("signature: %+v", res)
	}
	cert := res.Signers[0].Certificates[0].Certificate
	if !cert.Equal(e.p.SealCertificate()) {
		t.Fatalf("sealed by %s, not the provider's seal certificate", cert.Subject)
	}
	roots := x509.NewCertPool()
	roots.AddCert(e.p.CACertificate())
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("the seal certificate does not chain to the provider's CA: %v", err)
	}

	// And poppler, what a holder's PDF reader uses, agrees; a changed byte breaks it.
	out := pdfsig(t, sealed)
	if !strings.Contains(out, "Signature Validation: Signature is Valid.") || !strings.Contains(out, "Total document signed") {
		t.Fatalf("pdfsig:\n%s", out)
	}
	tampered := bytes.Clone(sealed)
	i := bytes.Index(tampered, []byte("Tolvan"))
	if i < 0 {
		i = len(tampered) / 3
	}
	tampered[i] ^= 0x20
	if out := pdfsig(t, tampered); !strings.Contains(out, "Signature Validation: Digest Mismatch.") {
		t.Fatalf("pdfsig on a changed document:\n%s", out)
	}
}

// pdfsig runs poppler's pdfsig on a PDF; it skips without it, unless integration tests are
// required.
func pdfsig(t *testing.T, pdf []byte) string {
	t.Helper()
	bin, err := exec.LookPath("pdfsig")
	if err != nil {
		if os.Getenv("SAMLA_REQUIRE_INTEGRATION") != "" {
			t.Fatal("pdfsig (Debian's poppler-utils) is required when SAMLA_REQUIRE_INTEGRATION is set")
		}
		t.Skip("pdfsig (Debian's poppler-utils) is not installed")
	}
	path := filepath.Join(t.TempDir(), "sealed.pdf")
	if err := os.WriteFile(path, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(bin, path).CombinedOutput() // non-zero for an invalid signature
	return string(out)
}

func TestStartIsCheckedBeforeAnythingIsSent(t *testing.T) {
	e := newEnv(t)
	doc := letter(t)
	with := func(mod func(m map[string]any)) map[string]any {
		m := start("doc-check", doc)
		mod(m)
		return m
	}
	big := append(bytes.Clone(doc), bytes.Repeat([]byte(" "), signingsim.MaxDocumentSize)...)
	cases := []struct {
		name   string
		key    string
		body   any
		status int
		code   string
	}{
		{"no key", "", start("doc-check", doc), 401, "UNAUTHORIZED"},
		{"an invalid key", "invalid-key", start("doc-check", doc), 401, "UNAUTHORIZED"},
		{"not JSON", key, []byte("{"), 400, "INVALID_REQUEST"},
		{"trailing data", key, []byte(`{"reference":"x"} {}`), 400, "INVALID_REQUEST"},
		{"no reference", key, with(func(m map[string]any) { delete(m, "reference") }), 400, "INVALID_REQUEST"},
		{"a reference with a slash", key, with(func(m map[string]any) { m["reference"] = "a/b" }), 400, "INVALID_REQUEST"},
		{"no title", key, with(func(m map[string]any) { m["title"] = " " }), 400, "INVALID_REQUEST"},
		{"a bad e-mail", key, with(func(m map[string]any) {
			m["delivery"] = map[string]any{"method": "EMAIL", "email": "Tolvan <tolvan@example.se>"}
		}), 400, "INVALID_REQUEST"},
		{"a bad phone number", key, with(func(m map[string]any) {
			m["delivery"] = map[string]any{"method": "SMS", "phoneNumber": "070-123"}
		}), 400, "INVALID_REQUEST"},
		{"an unknown method", key, with(func(m map[string]any) { m["delivery"] = map[string]any{"method": "FAX"} }), 400, "INVALID_REQUEST"},
		{"an expiry in the past", key, with(func(m map[string]any) { m["expiresAt"] = time.Now().Add(-time.Minute) }), 400, "INVALID_REQUEST"},
		{"a relative callback URL", key, with(func(m map[string]any) { m["callbackUrl"] = "/callbacks" }), 400, "INVALID_REQUEST"},
		{"not a PDF", key, with(func(m map[string]any) { m["documentBase64"] = []byte("Dear holder, …") }), 422, "DOCUMENT_REFUSED"},
		{"a damaged PDF", key, with(func(m map[string]any) { m["documentBase64"] = doc[:len(doc)/2] }), 422, "DOCUMENT_REFUSED"},
		{"the refuse marker", key, with(func(m map[string]any) {
			m["documentBase64"] = pdfWith(t, "Fullmakt", "SANDBOX:REFUSE")
		}), 422, "DOCUMENT_REFUSED"},
		{"over 10 MiB", key, with(func(m map[string]any) { m["documentBase64"] = big }), 413, "DOCUMENT_TOO_LARGE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e2 apiError
			code, raw := e.call(t, "POST", "/sandbox/signing/api/v1/processes", c.key, c.body, &e2)
			if code != c.status || e2.Code != c.code {
				t.Fatalf("got %d %s, want %d %s", code, raw, c.status, c.code)
			}
			if strings.Contains(string(raw), "tolvan@") || strings.Contains(string(raw), "070-123") {
				t.Fatalf("the error repeats personal data: %s", raw)
			}
		})
	}
	if msgs := e.p.Outbox("", ""); len(msgs) != 0 || e.p.Stats().Processes != 0 {
		t.Fatalf("refused requests left %d messages, %d processes", len(msgs), e.p.Stats().Processes)
	}
}

func TestStartIsIdempotentAndKeysKeepTheirProcessesApart(t *testing.T) {
	e := newEnv(t)
	doc := letter(t)
	first := e.mustStart(t, key, start("doc-idem", doc))
	if first.State != signingsim.StatePending || first.ID == "" || first.SentAt.IsZero() || first.Sealed {
		t.Fatalf("%+v", first)
	}
	var again signingsim.Process
	// A retry whose PDF was re-rendered (other bytes) is still the same process.
	if code, raw := e.call(t, "POST", "/sandbox/signing/api/v1/processes", key, start("doc-idem", pdfWith(t, "re-rendered")), &again); code != http.StatusOK || again.ID != first.ID {
		t.Fatalf("retry: %d %s", code, raw)
	}
	if n := len(e.p.Outbox("doc-idem", "")); n != 1 {
		t.Fatalf("a retry sent another message: %d", n)
	}

	other := e.mustStart(t, "sk_test_client_b", start("doc-idem", doc))
	if other.ID == first.ID {
		t.Fatal("another key's start returned the first key's process")
	}
	for _, path := range []string{"", "/document"} {
		var er apiError
		if code, _ := e.call(t, "GET", "/sandbox/signing/api/v1/processes/"+first.ID+path, "sk_test_client_b", nil, &er); code != 404 || er.Code != "PROCESS_NOT_FOUND" {
			t.Fatalf("GET %s with another key: %d %s", path, code, er.Code)
		}
	}
	if code, _ := e.call(t, "POST", "/sandbox/signing/api/v1/processes/"+first.ID+"/cancel", "sk_test_client_b", nil, nil); code != 404 {
		t.Fatalf("cancel with another key: %d", code)
	}
	if code, _ := e.call(t, "GET", "/sandbox/signing/api/v1/processes/"+first.ID, "invalid-b", nil, nil); code != 401 {
		t.Fatalf("read with an invalid key: %d", code)
	}
	if got := e.get(t, first.ID); got.State != signingsim.StatePending {
		t.Fatalf("another key changed the process: %+v", got)
	}
}

func TestOutboxHasTheLinkForEachChannel(t *testing.T) {
	e := newEnv(t)
	doc := letter(t)
	e.mustStart(t, key, start("doc-mail", doc))
	sms := start("doc-sms", doc)
	sms["delivery"] = map[string]any{"method": "SMS", "phoneNumber": "46701234567"}
	e.mustStart(t, key, sms)

	var all struct{ Messages []signingsim.Message }
	if code, raw := e.call(t, "GET", "/sandbox/outbox", "", nil, &all); code != 200 || len(all.Messages) != 2 {
		t.Fatalf("%d %s", code, raw)
	}
	mail, text := all.Messages[0], all.Messages[1] // oldest first
	if mail.Channel != "EMAIL" || mail.To != "tolvan@example.se" || mail.Reference != "doc-mail" ||
		!strings.Contains(mail.Subject, "Fullmakt") || !strings.Contains(mail.Body, "Hej Åsa Öberg!") ||
		!strings.Contains(mail.Body, "https://") || !strings.Contains(mail.Body, "/doc-mail?") || mail.SentAt.IsZero() {
		t.Fatalf("e-mail: %+v", mail)
	}
	if text.Channel != "SMS" || text.To != "46701234567" || text.Subject != "" || !strings.Contains(text.Body, "https://") ||
		!strings.Contains(text.Body, "/doc-sms?") {
		t.Fatalf("SMS: %+v", text)
	}
	var filtered struct{ Messages []signingsim.Message }
	e.call(t, "GET", "/sandbox/outbox?to=46701234567", "", nil, &filtered)
	if len(filtered.Messages) != 1 || filtered.Messages[0].Reference != "doc-sms" {
		t.Fatalf("?to=: %+v", filtered)
	}
	e.call(t, "GET", "/sandbox/outbox?reference=doc-mail", "", nil, &filtered)
	if len(filtered.Messages) != 1 || filtered.Messages[0].Channel != "EMAIL" {
		t.Fatalf("?reference=: %+v", filtered)
	}
	if code, _ := e.call(t, "POST", "/sandbox/outbox", "", nil, nil); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST outbox: %d", code)
	}
}

func TestHolderSignsRejectsAndClientCancels(t *testing.T) {
	e := newEnv(t, signingsim.WithSealDelay(time.Hour)) // sealing is TestSealedAfterTheDelay's
	doc := letter(t)
	signed := e.mustStart(t, key, start("doc-sign", doc))
	rejected := e.mustStart(t, key, start("doc-reject", doc))
	canceled := e.mustStart(t, key, start("doc-cancel", doc))

	var pr signingsim.Process
	if code, raw := e.call(t, "POST", "/sandbox/signing/doc-sign/sign", "", nil, &pr); code != 200 || pr.State != signingsim.StateSigned || pr.Sealed {
		t.Fatalf("sign: %d %s", code, raw)
	}
	var er apiError
	if code, _ := e.call(t, "GET", "/sandbox/signing/api/v1/processes/"+signed.ID+"/document", key, nil, &er); code != 409 || er.Code != "NOT_SEALED" {
		t.Fatalf("before the seal: %d %s", code, er.Code)
	}

	if code, _ := e.call(t, "POST", "/sandbox/signing/doc-reject/reject", "", nil, &pr); code != 200 || pr.State != signingsim.StateRejected {
		t.Fatalf("reject: %d %+v", code, pr)
	}
	for _, path := range []string{"/sandbox/signing/doc-reject/sign", "/sandbox/signing/doc-sign/reject"} {
		if code, _ := e.call(t, "POST", path, "", nil, &er); code != 409 || er.Code != "NOT_PENDING" {
			t.Fatalf("%s: %d %s", path, code, er.Code)
		}
	}
	if code, _ := e.call(t, "POST", "/sandbox/signing/doc-unknown/sign", "", nil, &er); code != 404 {
		t.Fatalf("unknown reference: %d", code)
	}

	for range 2 { // cancelling twice answers the same
		if code, _ := e.call(t, "POST", "/sandbox/signing/api/v1/processes/"+canceled.ID+"/cancel", key, nil, &pr); code != 200 || pr.State != signingsim.StateCanceled {
			t.Fatalf("cancel: %d %+v", code, pr)
		}
	}
	if code, _ := e.call(t, "POST", "/sandbox/signing/doc-cancel/sign", "", nil, nil); code != 409 {
		t.Fatalf("signing a cancelled process: %d", code)
	}
	for _, id := range []string{signed.ID, rejected.ID} {
		before := e.get(t, id)
		e.call(t, "POST", "/sandbox/signing/api/v1/processes/"+id+"/cancel", key, nil, &pr)
		if pr.State != before.State {
			t.Fatalf("cancel changed a final process: %s → %s", before.State, pr.State)
		}
	}
}

func TestSealedAfterTheDelay(t *testing.T) {
	const delay = 100 * time.Millisecond
	e := newEnv(t, signingsim.WithSealDelay(delay))
	pr := e.mustStart(t, key, start("doc-delay", letter(t)))
	began := time.Now()
	e.call(t, "POST", "/sandbox/signing/doc-delay/sign", "", nil, nil)
	eventually(t, "the seal", func() bool { return e.get(t, pr.ID).Sealed })
	if took := time.Since(began); took < delay {
		t.Fatalf("sealed after %v, before the delay of %v", took, delay)
	}
	if code, raw := e.call(t, "GET", "/sandbox/signing/api/v1/processes/"+pr.ID+"/document", key, nil, nil); code != 200 || !bytes.HasPrefix(raw, []byte("%PDF-")) {
		t.Fatalf("after the seal: %d", code)
	}
	if st := e.p.Stats(); st.Seals != 1 || st.StoredBytes <= 0 {
		t.Fatalf("%+v", st)
	}
}

func TestPendingProcessExpires(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	e := newEnv(t, signingsim.WithClock(clock.Now), signingsim.WithSweepInterval(5*time.Millisecond))
	rcv := newReceiver(t, 0)
	doc := letter(t)
	body := start("doc-expiry", doc)
	body["expiresAt"] = clock.Now().Add(time.Hour)
	pr := e.mustStart(t, key, body)
	if !pr.ExpiresAt.Equal(clock.Now().Add(time.Hour).UTC().Truncate(time.Nanosecond)) {
		t.Fatalf("%+v", pr)
	}
	clock.Advance(59 * time.Minute)
	if got := e.get(t, pr.ID); got.State != signingsim.StatePending {
		t.Fatalf("before the expiry: %s", got.State)
	}
	clock.Advance(time.Minute)
	if got := e.get(t, pr.ID); got.State != signingsim.StateExpired {
		t.Fatalf("at the expiry: %s", got.State)
	}

	// Nobody reads the second one: the sweeper notices its expiry and calls back.
	body = start("doc-expiry-cb", doc)
	body["expiresAt"] = clock.Now().Add(time.Minute)
	body["callbackUrl"] = rcv.srv.URL
	e.mustStart(t, key, body)
	clock.Advance(time.Minute)
	eventually(t, "the expiry callback", func() bool { return len(rcv.all()) == 1 })
	// The callback is signed at the provider's clock.
	if c := checkSignature(t, key, rcv.all()[0], clock.Now()); c.State != signingsim.StateExpired || c.Reference != "doc-expiry-cb" {
		t.Fatalf("%+v", c)
	}
	if code, _ := e.call(t, "POST", "/sandbox/signing/doc-expiry/sign", "", nil, nil); code != 409 {
		t.Fatalf("signing an expired process: %d", code)
	}
}

func TestSealFailureEndsFailed(t *testing.T) {
	e := newEnv(t, signingsim.WithSealDelay(time.Millisecond))
	pr := e.mustStart(t, key, start("doc-fail", pdfWith(t, "Fullmakt", "SANDBOX:FAIL_SEAL")))
	e.call(t, "POST", "/sandbox/signing/doc-fail/sign", "", nil, nil)
	eventually(t, "FAILED", func() bool { return e.get(t, pr.ID).State == signingsim.StateFailed })
	got := e.get(t, pr.ID)
	if got.Error == nil || got.Error.Code != "SEAL_FAILED" || got.Sealed {
		t.Fatalf("%+v", got)
	}
	if code, _ := e.call(t, "GET", "/sandbox/signing/api/v1/processes/"+pr.ID+"/document", key, nil, nil); code != 409 {
		t.Fatalf("document of a failed process: %d", code)
	}
}

type received struct {
	header http.Header
	body   []byte
}

// receiver records callbacks; it answers 500 to the first fail requests.
type receiver struct {
	mu   sync.Mutex
	got  []received
	fail int
	srv  *httptest.Server
}

func newReceiver(t *testing.T, fail int) *receiver {
	r := &receiver{fail: fail}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fail > 0 {
			r.fail--
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		r.got = append(r.got, received{req.Header.Clone(), b})
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

type callback struct {
	EventID, ProcessID, Reference string
	State                         signingsim.State
	Sealed                        bool
	At                            time.Time
}

// checkSignature verifies a callback the way the API documents it, independently of the
// adapter.
func checkSignature(t *testing.T, apiKey string, r received, now time.Time) callback {
	t.Helper()
	var ts, sig string
	for part := range strings.SplitSeq(r.header.Get(signingsim.SignatureHeader), ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(n, 0)).Abs() > time.Minute {
		t.Fatalf("timestamp %q", ts)
	}
	m := hmac.New(sha256.New, []byte(apiKey))
	m.Write([]byte(ts + "." + string(r.body)))
	if hex.EncodeToString(m.Sum(nil)) != sig {
		t.Fatalf("signature %q does not match the body under the key", sig)
	}
	var c callback
	if err := json.Unmarshal(r.body, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCallbacksAreSignedRetriedAndCanBeDropped(t *testing.T) {
	e := newEnv(t, signingsim.WithSealDelay(20*time.Millisecond))
	rcv := newReceiver(t, 1) // the first delivery fails and is retried
	doc := letter(t)
	body := start("doc-cb", doc)
	body["callbackUrl"] = rcv.srv.URL + "/callbacks/signing"
	pr := e.mustStart(t, key, body)
	e.call(t, "POST", "/sandbox/signing/doc-cb/sign", "", nil, nil)
	eventually(t, "two callbacks", func() bool { return len(rcv.all()) >= 2 })

	seen := map[bool]callback{}
	ids := map[string]bool{}
	for _, r := range rcv.all() {
		c := checkSignature(t, key, r, time.Now())
		if c.ProcessID != pr.ID || c.Reference != "doc-cb" || c.State != signingsim.StateSigned || c.At.IsZero() || ids[c.EventID] {
			t.Fatalf("%+v", c)
		}
		ids[c.EventID] = true
		seen[c.Sealed] = c
	}
	if len(seen) != 2 {
		t.Fatalf("want a SIGNED and a sealed callback, got %+v", seen)
	}

	body = start("doc-cb-reject", doc)
	body["callbackUrl"] = rcv.srv.URL
	e.mustStart(t, key, body)
	e.call(t, "POST", "/sandbox/signing/doc-cb-reject/reject", "", nil, nil)
	eventually(t, "the rejection callback", func() bool { return len(rcv.all()) == 3 })
	if c := checkSignature(t, key, rcv.all()[2], time.Now()); c.State != signingsim.StateRejected {
		t.Fatalf("%+v", c)
	}

	e.p.SetDropCallbacks(true)
	body = start("doc-cb-drop", doc)
	body["callbackUrl"] = rcv.srv.URL
	dropped := e.mustStart(t, key, body)
	e.call(t, "POST", "/sandbox/signing/api/v1/processes/"+dropped.ID+"/cancel", key, nil, nil)
	time.Sleep(50 * time.Millisecond)
	st := e.p.Stats()
	if len(rcv.all()) != 3 || st.CallbacksDropped != 1 || st.CallbacksSent != 3 || st.CallbacksFailed != 0 {
		t.Fatalf("dropping: %d received, %+v", len(rcv.all()), st)
	}
}

func TestCallbackGivenUpAfterItsAttempts(t *testing.T) {
	e := newEnv(t, signingsim.WithSealDelay(0))
	rcv := newReceiver(t, 1000)
	body := start("doc-cb-down", letter(t))
	body["callbackUrl"] = rcv.srv.URL
	pr := e.mustStart(t, key, body)
	e.call(t, "POST", "/sandbox/signing/api/v1/processes/"+pr.ID+"/cancel", key, nil, nil)
	eventually(t, "the callback given up", func() bool { return e.p.Stats().CallbacksFailed == 1 })
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if tried := 1000 - rcv.fail; tried != 3 {
		t.Fatalf("tried %d times, want 3", tried)
	}
}

func TestRetentionAndCapacityBoundMemory(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	e := newEnv(t, signingsim.WithClock(clock.Now), signingsim.WithLimits(2, 64<<20), signingsim.WithRetention(time.Hour))
	doc := letter(t)
	a := e.mustStart(t, key, start("doc-a", doc))
	e.mustStart(t, key, start("doc-b", doc))
	full := func() {
		t.Helper()
		var er apiError
		req := start("doc-c", doc)
		if code, raw := e.call(t, "POST", "/sandbox/signing/api/v1/processes", key, req, &er); code != 503 || er.Code != "CAPACITY_EXCEEDED" {
			t.Fatalf("over the limit: %d %s", code, raw)
		}
	}
	full()
	e.call(t, "POST", "/sandbox/signing/doc-a/reject", "", nil, nil)
	clock.Advance(59 * time.Minute)
	full() // finished, but kept for the retention
	clock.Advance(2 * time.Minute)
	e.mustStart(t, key, start("doc-c", doc))
	if code, _ := e.call(t, "GET", "/sandbox/signing/api/v1/processes/"+a.ID, key, nil, nil); code != 404 {
		t.Fatalf("a purged process reads %d", code)
	}
	if st := e.p.Stats(); st.Processes != 2 || st.StoredBytes != int64(2*len(doc)) {
		t.Fatalf("%+v (document %d bytes)", st, len(doc))
	}
}

func TestCloseStopsTheBackgroundWork(t *testing.T) {
	base := runtime.NumGoroutine()
	p, err := signingsim.New(signingsim.WithSealDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	req := signingsim.StartRequest{
		Reference: "doc-close", Title: "Fullmakt", Document: letter(t),
		Delivery: signingsim.Delivery{Method: "SMS", PhoneNumber: "46701234567"},
	}
	if _, _, err := p.Start(key, req); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Sign("doc-close"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the seal worker", func() bool { return p.Stats().Seals == 1 })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	eventually(t, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= base })
	if _, _, err := p.Start(key, signingsim.StartRequest{Reference: "doc-late", Title: "x", Document: req.Document, Delivery: req.Delivery}); err != signingsim.ErrClosed {
		t.Fatalf("start after Close: %v", err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, opt := range []signingsim.Option{
		signingsim.WithSealDelay(-1), signingsim.WithClock(nil), signingsim.WithRetention(0),
		signingsim.WithLimits(0, 1<<30), signingsim.WithLimits(10, 1024), signingsim.WithLinkBase("signing"),
		signingsim.WithCallbackRetry(0, retry.Backoff{}),
	} {
		if _, err := signingsim.New(opt); err == nil {
			t.Error("an invalid option was accepted")
		}
	}
}
