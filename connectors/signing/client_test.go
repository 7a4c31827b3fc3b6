package signing_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/digitorus/pdfsign/verify"
	"github.com/go-pdf/fpdf"

	"github.com/samla/samla/connectors/pdfletter"
	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/connectors/sandbox/signingsim"
	"github.com/samla/samla/connectors/signing"
	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/platform/retry"
)

const key = "sk_test_client_a"

var fast = retry.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond}

type env struct {
	sb  *sandbox.Sandbox
	srv *httptest.Server
	c   *signing.Client
}

// newEnv serves the whole sandbox over real HTTP, as Samla meets it, with the adapter pointed
// at its signing provider.
func newEnv(t *testing.T, opts ...sandbox.Option) env {
	t.Helper()
	sb, err := sandbox.New(append([]sandbox.Option{
		sandbox.WithLatency(0, 0), sandbox.WithSigningSealDelay(30 * time.Millisecond),
		sandbox.WithSigningOptions(signingsim.WithCallbackRetry(3, retry.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond})),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	c, err := signing.NewClient(srv.URL+"/sandbox/signing", srv.Client(), fast)
	if err != nil {
		t.Fatal(err)
	}
	return env{sb: sb, srv: srv, c: c}
}

// tester posts to the sandbox's tester endpoints (the simulated holder).
func (e env) tester(t *testing.T, path string) int {
	t.Helper()
	resp, err := e.srv.Client().Post(e.srv.URL+path, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (e env) outbox(t *testing.T, query string) []signingsim.Message {
	t.Helper()
	resp, err := e.srv.Client().Get(e.srv.URL + "/sandbox/outbox?" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Messages []signingsim.Message }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

func letter(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := pdfletter.WriteSample(&b, pdfletter.SampleOptions{}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

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

func request(ref string, doc []byte) worker.SigningRequest {
	return worker.SigningRequest{
		Reference: ref, Title: "Fullmakt – uppsägning av försäkring", Document: doc,
		DeliveryMethod: worker.DeliveryEmail, Email: "tolvan@example.se",
		SignerName: "Tolvan Tolvansson", SignerPersonalNumber: "191212121212",
		ExpiresAt: time.Now().Add(24 * time.Hour),
	}
}

func (e env) start(t *testing.T, req worker.SigningRequest) worker.SigningProcess {
	t.Helper()
	p, err := e.c.StartSigning(context.Background(), key, req)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e env) status(t *testing.T, id string) worker.SigningProcess {
	t.Helper()
	p, err := e.c.SigningStatus(context.Background(), key, id)
	if err != nil {
		t.Fatal(err)
	}
	return p
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

// noPersonalData fails when an error carries the key, a name, an address or a number.
func noPersonalData(t *testing.T, err error) {
	t.Helper()
	for _, s := range []string{key, "Tolvan", "tolvan@", "46701234567", "191212121212", "%PDF"} {
		if err != nil && strings.Contains(err.Error(), s) {
			t.Fatalf("the error carries %q: %v", s, err)
		}
	}
}

func TestStartIsIdempotentAndSendsTheLinkByEachMethod(t *testing.T) {
	e := newEnv(t)
	doc := letter(t)
	first := e.start(t, request("doc-email", doc))
	if first.ID == "" || first.Reference != "doc-email" || first.State != worker.SigningPending || first.SentAt.IsZero() ||
		first.Sealed || !first.SignedAt.IsZero() {
		t.Fatalf("%+v", first)
	}
	if again := e.start(t, request("doc-email", doc)); again.ID != first.ID {
		t.Fatalf("a retried start made another process: %s, %s", first.ID, again.ID)
	}
	sms := request("doc-sms", doc)
	sms.DeliveryMethod, sms.Email, sms.PhoneNumber = worker.DeliverySMS, "", "46701234567"
	e.start(t, sms)

	mails := e.outbox(t, "reference=doc-email")
	if len(mails) != 1 || mails[0].Channel != "EMAIL" || mails[0].To != "tolvan@example.se" ||
		!strings.Contains(mails[0].Body, "https://") || !strings.Contains(mails[0].Body, "doc-email") {
		t.Fatalf("e-mail: %+v", mails)
	}
	texts := e.outbox(t, "to=46701234567")
	if len(texts) != 1 || texts[0].Channel != "SMS" || texts[0].Reference != "doc-sms" || !strings.Contains(texts[0].Body, "doc-sms") {
		t.Fatalf("SMS: %+v", texts)
	}
}

func TestSignedDocumentIsSealedAndVerifies(t *testing.T) {
	e := newEnv(t, sandbox.WithSigningSealDelay(300*time.Millisecond))
	p := e.start(t, request("doc-signed", letter(t)))
	if _, err := e.c.SignedDocument(context.Background(), key, p.ID); !errors.Is(err, worker.ErrNotSealed) {
		t.Fatalf("before signing: %v", err)
	}
	if code := e.tester(t, "/sandbox/signing/doc-signed/sign"); code != 200 {
		t.Fatalf("sign: %d", code)
	}
	got := e.status(t, p.ID)
	if got.State != worker.SigningSigned || got.SignedAt.IsZero() || got.SignatureMethod != "SANDBOX_EID" {
		t.Fatalf("%+v", got)
	}
	if !got.Sealed {
		if _, err := e.c.SignedDocument(context.Background(), key, p.ID); !errors.Is(err, worker.ErrNotSealed) {
			t.Fatalf("signed, not yet sealed: %v", err)
		}
	}
	eventually(t, "the seal", func() bool { return e.status(t, p.ID).Sealed })
	pdf, err := e.c.SignedDocument(context.Background(), key, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := verify.VerifyWithOptions(bytes.NewReader(pdf), int64(len(pdf)), &verify.VerifyOptions{AllowUntrustedRoots: true})
	if err != nil || len(res.Signers) != 1 || !res.Signers[0].ValidSignature {
		t.Fatalf("the seal does not verify: %v %+v", err, res)
	}
	roots := x509.NewCertPool()
	roots.AddCert(e.sb.Signing().CACertificate())
	cert := res.Signers[0].Certificates[0].Certificate
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("sealed by a certificate outside the provider's CA: %v", err)
	}
	text, err := pdfletter.Text(pdf)
	if err != nil || !strings.Contains(text, "Försäkringstagare: Tolvan Tolvansson") || !strings.Contains(text, "Signed by: Tolvan Tolvansson") {
		t.Fatalf("%v\n%s", err, text)
	}
}

func TestRejectCancelExpireAndFail(t *testing.T) {
	now := time.Now()
	var offset atomic.Int64
	clock := func() time.Time { return now.Add(time.Duration(offset.Load())) }
	e := newEnv(t, sandbox.WithClock(clock), sandbox.WithSigningSealDelay(time.Millisecond))
	doc := letter(t)
	ctx := context.Background()

	rejected := e.start(t, request("doc-reject", doc))
	if code := e.tester(t, "/sandbox/signing/doc-reject/reject"); code != 200 {
		t.Fatalf("reject: %d", code)
	}
	if got := e.status(t, rejected.ID); got.State != worker.SigningRejected {
		t.Fatalf("%+v", got)
	}
	if code := e.tester(t, "/sandbox/signing/doc-reject/sign"); code != 409 {
		t.Fatalf("signing after a rejection: %d", code)
	}

	canceled := e.start(t, request("doc-cancel", doc))
	for range 2 { // the second cancel meets a final process: not an error
		if err := e.c.CancelSigning(ctx, key, canceled.ID); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.status(t, canceled.ID); got.State != worker.SigningCanceled {
		t.Fatalf("%+v", got)
	}
	if err := e.c.CancelSigning(ctx, key, rejected.ID); err != nil || e.status(t, rejected.ID).State != worker.SigningRejected {
		t.Fatalf("cancelling a rejected process: %v", err)
	}

	expiring := request("doc-expire", doc)
	expiring.ExpiresAt = clock().Add(time.Hour)
	expired := e.start(t, expiring)
	offset.Store(int64(2 * time.Hour))
	if got := e.status(t, expired.ID); got.State != worker.SigningExpired {
		t.Fatalf("%+v", got)
	}

	failing := e.start(t, request("doc-fail", pdfWith(t, "Fullmakt", "SANDBOX:FAIL_SEAL")))
	e.tester(t, "/sandbox/signing/doc-fail/sign")
	eventually(t, "FAILED", func() bool { return e.status(t, failing.ID).State == worker.SigningFailed })
	if got := e.status(t, failing.ID); got.ErrorCode != "SEAL_FAILED" || got.ErrorMessage == "" {
		t.Fatalf("%+v", got)
	}
	if _, err := e.c.SignedDocument(ctx, key, failing.ID); !errors.Is(err, worker.ErrNotSealed) {
		t.Fatalf("document of a failed process: %v", err)
	}
}

func TestRefusalsMapToThePortsErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	doc := letter(t)

	for name, d := range map[string][]byte{
		"not a PDF":      []byte("plain text"),
		"refuse marker":  pdfWith(t, "Fullmakt", "SANDBOX:REFUSE"),
		"over 10 MiB":    append(bytes.Clone(doc), bytes.Repeat([]byte{' '}, 10<<20)...),
		"empty document": nil,
	} {
		_, err := e.c.StartSigning(ctx, key, request("doc-refused", d))
		if !errors.Is(err, worker.ErrDocumentRefused) {
			t.Errorf("%s: %v", name, err)
		}
		noPersonalData(t, err)
	}
	badAddress := request("doc-bad-address", doc)
	badAddress.Email = "not an address"
	if _, err := e.c.StartSigning(ctx, key, badAddress); !errors.Is(err, worker.ErrDocumentRefused) {
		t.Errorf("a refused address: %v", err)
	}

	p := e.start(t, request("doc-keys", doc))
	for _, bad := range []string{"invalid-key", ""} {
		_, err := e.c.StartSigning(ctx, bad, request("doc-unauthorized", doc))
		_, err2 := e.c.SigningStatus(ctx, bad, p.ID)
		_, err3 := e.c.SignedDocument(ctx, bad, p.ID)
		err4 := e.c.CancelSigning(ctx, bad, p.ID)
		for _, err := range []error{err, err2, err3, err4} {
			if !errors.Is(err, worker.ErrProviderUnauthorized) {
				t.Errorf("key %q: %v", bad, err)
			}
		}
	}

	const other = "sk_test_client_b"
	_, err := e.c.SigningStatus(ctx, other, p.ID)
	_, err2 := e.c.SignedDocument(ctx, other, p.ID)
	err3 := e.c.CancelSigning(ctx, other, p.ID)
	_, err4 := e.c.SigningStatus(ctx, key, "no-such-process")
	for _, err := range []error{err, err2, err3, err4} {
		if !errors.Is(err, worker.ErrProcessNotFound) {
			t.Errorf("another key's or no process: %v", err)
		}
		noPersonalData(t, err)
	}
	if got := e.status(t, p.ID); got.State != worker.SigningPending {
		t.Fatalf("another key's cancel changed the process: %+v", got)
	}
}

func TestProviderDownIsUnavailableAfterRetries(t *testing.T) {
	ctx := context.Background()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	c, err := signing.NewClient(deadURL, nil, fast)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.StartSigning(ctx, key, request("doc-down", letter(t)))
	if !errors.Is(err, worker.ErrProviderUnavailable) || errors.Is(err, worker.ErrDocumentRefused) {
		t.Fatalf("a provider that is not there: %v", err)
	}
	noPersonalData(t, err)

	var calls atomic.Int32
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"code":"MAINTENANCE","message":"back soon, Tolvan"}`)
	}))
	defer failing.Close()
	c, _ = signing.NewClient(failing.URL, failing.Client(), fast)
	_, err = c.SigningStatus(ctx, key, "p-1")
	if !errors.Is(err, worker.ErrProviderUnavailable) || calls.Load() != signing.Attempts || !strings.Contains(err.Error(), "MAINTENANCE") {
		t.Fatalf("after %d calls: %v", calls.Load(), err)
	}
	noPersonalData(t, err) // the provider's message is never repeated

	// A provider that recovers within the attempts is not an error.
	e := newEnv(t)
	var flaky atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if flaky.Add(1) <= 2 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		e.sb.Handler().ServeHTTP(w, r)
	}))
	defer proxy.Close()
	c, _ = signing.NewClient(proxy.URL+"/sandbox/signing", proxy.Client(), fast)
	if p, err := c.StartSigning(ctx, key, request("doc-flaky", letter(t))); err != nil || p.State != worker.SigningPending {
		t.Fatalf("%+v %v", p, err)
	}

	// A cancelled context ends the retries at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.SigningStatus(cctx, key, "p-1"); !errors.Is(err, worker.ErrProviderUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestNewClientRefusesABadBaseURL(t *testing.T) {
	for _, u := range []string{"", "provider.example", "ftp://provider.example", "https://user:pw@provider.example", "https://p.example/?k=1"} {
		if _, err := signing.NewClient(u, nil, fast); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

// callbacks collects what the provider posts to Samla.
type callbacks struct {
	mu  sync.Mutex
	got []struct {
		h http.Header
		b []byte
	}
	srv *httptest.Server
}

func newCallbacks(t *testing.T) *callbacks {
	cb := &callbacks{}
	cb.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(http.MaxBytesReader(w, r.Body, signing.MaxCallbackBody))
		cb.mu.Lock()
		cb.got = append(cb.got, struct {
			h http.Header
			b []byte
		}{r.Header.Clone(), b})
		cb.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(cb.srv.Close)
	return cb
}

func (cb *callbacks) n() int { cb.mu.Lock(); defer cb.mu.Unlock(); return len(cb.got) }

func TestCallbacksVerifyAndPollingWorksWithout(t *testing.T) {
	e := newEnv(t)
	cb := newCallbacks(t)
	req := request("doc-callback", letter(t))
	req.CallbackURL = cb.srv.URL + "/signing/callbacks"
	p := e.start(t, req)
	e.tester(t, "/sandbox/signing/doc-callback/sign")
	eventually(t, "signed and sealed callbacks", func() bool { return cb.n() == 2 })

	sealed := map[bool]bool{}
	cb.mu.Lock()
	got := cb.got
	cb.mu.Unlock()
	for _, c := range got {
		v, err := signing.VerifyCallback(key, c.h, c.b, time.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if v.ProcessID != p.ID || v.Reference != "doc-callback" || v.State != worker.SigningSigned || v.EventID == "" || v.At.IsZero() {
			t.Fatalf("%+v", v)
		}
		sealed[v.Sealed] = true
	}
	if !sealed[true] || !sealed[false] {
		t.Fatalf("want a signed and a sealed callback: %v", sealed)
	}

	// What an attacker or a replay could send.
	c := got[0]
	if _, err := signing.VerifyCallback(key, c.h, bytes.Replace(c.b, []byte(`"SIGNED"`), []byte(`"REJECTED"`), 1), time.Now(), time.Minute); !errors.Is(err, signing.ErrCallbackSignatureInvalid) {
		t.Errorf("a tampered body: %v", err)
	}
	if _, err := signing.VerifyCallback("sk_test_client_b", c.h, c.b, time.Now(), time.Minute); !errors.Is(err, signing.ErrCallbackSignatureInvalid) {
		t.Errorf("another client's key: %v", err)
	}
	if _, err := signing.VerifyCallback(key, c.h, c.b, time.Now().Add(10*time.Minute), time.Minute); !errors.Is(err, signing.ErrCallbackStale) {
		t.Errorf("an old callback: %v", err)
	}
	if _, err := signing.VerifyCallback(key, http.Header{}, c.b, time.Now(), time.Minute); !errors.Is(err, signing.ErrCallbackSignatureMissing) {
		t.Errorf("no header: %v", err)
	}

	// With callbacks lost, polling still sees every change.
	e.sb.Signing().SetDropCallbacks(true)
	req = request("doc-polled", letter(t))
	req.CallbackURL = cb.srv.URL
	polled := e.start(t, req)
	e.tester(t, "/sandbox/signing/doc-polled/sign")
	eventually(t, "the seal by polling", func() bool { return e.status(t, polled.ID).Sealed })
	time.Sleep(30 * time.Millisecond)
	if cb.n() != 2 {
		t.Fatalf("dropped callbacks arrived: %d", cb.n())
	}
}
