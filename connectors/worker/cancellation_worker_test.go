package worker_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/digitorus/pdfsign/verify"
	"github.com/google/uuid"
	"github.com/ledongthuc/pdf"

	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/connectors/sandbox/signingsim"
	"github.com/samla/samla/connectors/signing"
	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/poa"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/platform/retry"
)

// The cancellation worker's tests: the real aggregate and repositories over the in-memory event
// store (personal data sealed by a key store, as the service seals it), the real signing adapter
// over HTTP against the sandbox's simulated provider, and, where a test wants them, the
// provider's callbacks received, verified and recorded as the command side records them.

const (
	cxProviderKey = "sandbox-provider-key-0001"
	cxBadKey      = "invalid-provider-key-0001"
	cxEmail       = "tolvan@example.com"
	cxPhone       = "46701234567"
	cxHolder      = "Tolvan Tolvansson"
)

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// cxEnv is a cancellation test's world: an env whose collection, client and cancellation
// repositories seal personal data with one key store, a client with a signing configuration,
// one completed insurance collection of a user, and the signing adapter to the sandbox.
type cxEnv struct {
	*env
	keys     *keystore.Memory
	crepo    *repository.Repository[*cancellation.Cancellation]
	clients  *repository.Repository[*client.Client]
	provider *recordingProvider
	userUUID string
	col      *collection.Collection
	// insurances are the collected insurances with an insurance number, by type.
	insurances map[string]collection.Insurance
}

type cxOptions struct {
	sandbox     []sandbox.Option
	providerKey string
}

func newCxEnv(t *testing.T, o cxOptions) *cxEnv {
	t.Helper()
	sbOpts := append([]sandbox.Option{sandbox.WithSigningSealDelay(30 * time.Millisecond),
		sandbox.WithSigningOptions(signingsim.WithCallbackRetry(3, retry.Backoff{Base: 10 * time.Millisecond, Max: 20 * time.Millisecond}))},
		o.sandbox...)
	e, keys := erasingEnv(t, envOptions{sandbox: sbOpts})
	hc := &http.Client{Timeout: 5 * time.Second}
	adapter, err := signing.NewClient(e.sb.URL()+"/sandbox/signing", hc, retry.Backoff{Base: 2 * time.Millisecond, Max: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Before the sandbox closes (cleanups run last first): a connection dialled for a request
	// that another connection served would hold the sandbox's shutdown for its grace period.
	t.Cleanup(hc.CloseIdleConnections)
	x := &cxEnv{
		env: e, keys: keys,
		crepo:    repository.New(e.store, e.reg, cancellation.Kind, repository.WithKeys(keys)),
		clients:  repository.New(e.store, e.reg, client.Kind, repository.WithKeys(keys)),
		provider: &recordingProvider{SigningProvider: adapter, docs: map[string][]byte{}},
		userUUID: uuid.NewString(),
	}
	if o.providerKey == "" {
		o.providerKey = cxProviderKey
	}
	x.updateClient(func(c *client.Client) error { return c.Register(clientID, "Flyttfirman AB", true, time.Now()) }, repository.NewID())
	x.configureSigning(poa.ExampleTemplate, o.providerKey)

	// A completed insurance collection of the user, collected by the collection worker.
	colID, started := e.startForUser(x.userUUID, insurer, mock, tolvan)
	e.handle(e.worker(e.config("collector")), started)
	x.col = e.waitFinal(colID)
	if x.col.Status() != collection.StatusCompleted {
		t.Fatalf("collection %s, want COMPLETED", x.col.Status())
	}
	x.insurances = map[string]collection.Insurance{}
	for _, ins := range x.col.Insurances() {
		if ins.InsuranceNumber != nil && *ins.InsuranceNumber != "" {
			x.insurances[ins.InsuranceType] = ins
		}
	}
	if _, ok := x.insurances["HOME"]; !ok {
		t.Fatalf("no HOME insurance with a number in %+v", x.col.Insurances())
	}
	return x
}

func (x *cxEnv) updateClient(decide func(*client.Client) error, opts ...repository.UpdateOption) {
	x.t.Helper()
	meta := repository.Meta{Tenant: clientID, CorrelationID: "op-" + clientID, Actor: "operator"}
	if _, _, err := x.clients.Update(context.Background(), clientID, meta, decide, opts...); err != nil {
		x.t.Fatal(err)
	}
}

// configureSigning records a new template version and provider key, as `samla clients signing`.
func (x *cxEnv) configureSigning(template, providerKey string) {
	x.t.Helper()
	tmpl, err := poa.Parse(template)
	if err != nil {
		x.t.Fatal(err)
	}
	x.updateClient(func(c *client.Client) error {
		return c.ConfigureSigning(tmpl.Text(), tmpl.Version(), providerKey, "Stockholm", time.Now())
	})
}

// cxRequest is one cancellation request as POST /cancellations records it.
type cxRequest struct {
	insuranceType   string
	method          cancellation.DeliveryMethod
	templateVersion int
}

// request records a cancellation.requested and returns its document id and envelope.
func (x *cxEnv) request(r cxRequest) (string, eventschema.Envelope) {
	x.t.Helper()
	if r.insuranceType == "" {
		r.insuranceType = "HOME"
	}
	if r.method == "" {
		r.method = cancellation.DeliveryEmail
	}
	if r.templateVersion == 0 {
		r.templateVersion = 1
	}
	ins, ok := x.insurances[r.insuranceType]
	if !ok {
		x.t.Fatalf("no %s insurance", r.insuranceType)
	}
	in := cancellation.RequestInput{DocumentID: uuid.NewString(), ClientID: clientID, Collection: x.col,
		InsuranceID: ins.ID, DeliveryMethod: r.method, TemplateVersion: r.templateVersion}
	if r.method == cancellation.DeliveryEmail {
		in.Email = cxEmail
	} else {
		in.PhoneNumber = cxPhone
	}
	meta := repository.Meta{Tenant: clientID, CorrelationID: "req-" + in.DocumentID, Actor: "client:" + clientID}
	if _, _, err := x.crepo.Update(context.Background(), in.DocumentID, meta, func(c *cancellation.Cancellation) error {
		return c.Request(in, time.Now())
	}, repository.NewID()); err != nil {
		x.t.Fatal(err)
	}
	envs := x.cxEnvelopes(in.DocumentID)
	if len(envs) != 1 || envs[0].Type != cancellation.EventRequested {
		x.t.Fatalf("requested: %v", envs)
	}
	return in.DocumentID, envs[0]
}

// withdraw records the client's DELETE /cancellations/{id} and returns the envelope.
func (x *cxEnv) withdraw(id string) eventschema.Envelope {
	x.t.Helper()
	meta := repository.Meta{Tenant: clientID, CorrelationID: "del-" + id, Actor: "client:" + clientID}
	if _, _, err := x.crepo.Update(context.Background(), id, meta, func(c *cancellation.Cancellation) error {
		return c.Cancel(cancellation.CanceledByClient, time.Now())
	}); err != nil {
		x.t.Fatal(err)
	}
	envs := x.cxEnvelopes(id)
	return envs[len(envs)-1]
}

func (x *cxEnv) config(workerID string) worker.CancellationConfig {
	return worker.CancellationConfig{
		WorkerID: workerID, Repo: x.crepo, Clients: x.clients, Catalog: x.catalog, Provider: x.provider,
		Erasures: keystore.Erasures{Keys: x.keys}, Metrics: x.metrics, Logger: x.logger,
		StaleClaimAfter: time.Minute, SweepInterval: 50 * time.Millisecond, SigningTimeout: time.Minute,
	}
}

func (x *cxEnv) worker(cfg worker.CancellationConfig) *worker.CancellationWorker {
	w := worker.NewCancellationWorker(cfg)
	x.t.Cleanup(w.Stop)
	return w
}

// run runs the worker's sweeps until the test ends (or the returned stop is called).
func (x *cxEnv) run(w *worker.CancellationWorker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	x.t.Cleanup(stop)
	return stop
}

func (x *cxEnv) handle(w *worker.CancellationWorker, envs ...eventschema.Envelope) {
	x.t.Helper()
	if err := w.HandleBatch(context.Background(), envs); err != nil {
		x.t.Fatal(err)
	}
}

func (x *cxEnv) loadCx(id string) *cancellation.Cancellation {
	x.t.Helper()
	c, err := x.crepo.Load(context.Background(), id)
	if err != nil {
		x.t.Fatal(err)
	}
	return c
}

func (x *cxEnv) cxEnvelopes(id string) []eventschema.Envelope {
	x.t.Helper()
	envs, err := x.store.ReadStream(context.Background(), cancellation.StreamName(id), 0, 0)
	if err != nil {
		x.t.Fatal(err)
	}
	return envs
}

// cxTypes lists the cancellation's event types, without the provider's notices (their number
// depends on the callbacks' timing).
func (x *cxEnv) cxTypes(id string) []string {
	var out []string
	for _, env := range x.cxEnvelopes(id) {
		if env.Type != cancellation.EventProviderNotified {
			out = append(out, env.Type)
		}
	}
	return out
}

func (x *cxEnv) count(id, eventType string) int {
	n := 0
	for _, env := range x.cxEnvelopes(id) {
		if env.Type == eventType {
			n++
		}
	}
	return n
}

// waitCx polls the cancellation until cond holds.
func (x *cxEnv) waitCx(id, what string, cond func(*cancellation.Cancellation) bool) *cancellation.Cancellation {
	x.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := x.loadCx(id)
		if cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("cancellation %s: timed out waiting for %s; status %s, events %v", id, what, c.Status(), x.cxTypes(id))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (x *cxEnv) waitStatus(id string, want cancellation.Status) *cancellation.Cancellation {
	x.t.Helper()
	return x.waitCx(id, string(want), func(c *cancellation.Cancellation) bool { return c.Status() == want })
}

func (x *cxEnv) waitIdle(w *worker.CancellationWorker) {
	x.t.Helper()
	waitUntil(x.t, "the worker's passes to end", func() bool { return w.Running() == 0 })
}

// process reads the cancellation's process at the provider, with the client's key.
func (x *cxEnv) process(c *cancellation.Cancellation) signingsim.Process {
	x.t.Helper()
	if c.Sent() == nil {
		x.t.Fatalf("cancellation %s was never sent", c.DocumentID())
	}
	p, err := x.sb.Signing().Get(cxProviderKey, c.Sent().ProcessID)
	if err != nil {
		x.t.Fatal(err)
	}
	return p
}

func (x *cxEnv) outcomes(status cancellation.Status, code string) float64 {
	x.t.Helper()
	return value(x.t, x.metrics.CancellationOutcomes.WithLabelValues(insurer, string(status), code))
}

func (x *cxEnv) providerCalls(op, outcome string) float64 {
	x.t.Helper()
	return value(x.t, x.metrics.SigningProviderCalls.WithLabelValues(op, outcome))
}

// openCancellations lists the cancellations of the store that still need their provider: the
// OpenCancellations the cancellations read model gives.
func (x *cxEnv) openCancellations() worker.OpenCancellations { return storeOpenCancellations{x} }

type storeOpenCancellations struct{ x *cxEnv }

func (o storeOpenCancellations) ListNeedingProvider(ctx context.Context, afterRequestedAt time.Time, afterID string, limit int) ([]string, time.Time, error) {
	var open []openRow
	for _, s := range o.x.store.Streams() {
		id, ok := strings.CutPrefix(s, cancellation.StreamPrefix)
		if !ok {
			continue
		}
		c, err := o.x.crepo.Load(ctx, id)
		if err != nil {
			return nil, time.Time{}, err
		}
		if c.NeedsProvider() {
			open = append(open, openRow{createdAt: c.Requested().RequestedAt, id: id})
		}
	}
	ids, last := pageAfter(open, afterRequestedAt, afterID, limit)
	return ids, last, nil
}

// recordingProvider is the real signing adapter, keeping the documents it uploads by reference.
type recordingProvider struct {
	worker.SigningProvider
	mu     sync.Mutex
	docs   map[string][]byte
	starts int
}

func (p *recordingProvider) StartSigning(ctx context.Context, apiKey string, req worker.SigningRequest) (worker.SigningProcess, error) {
	p.mu.Lock()
	p.docs[req.Reference] = bytes.Clone(req.Document)
	p.starts++
	p.mu.Unlock()
	return p.SigningProvider.StartSigning(ctx, apiKey, req)
}

func (p *recordingProvider) document(ref string) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.docs[ref]
}

func (p *recordingProvider) startCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// callbackReceiver is the command side's provider callback endpoint for the tests: it verifies
// a callback with the client's provider key, records cancellation.provider-notified once per
// event and hands the new event to the worker, as the Kafka consumer would.
type callbackReceiver struct {
	x   *cxEnv
	srv *httptest.Server
	mu  sync.Mutex
	w   *worker.CancellationWorker
}

func (x *cxEnv) callbacks() *callbackReceiver {
	r := &callbackReceiver{x: x}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	x.t.Cleanup(r.srv.Close)
	return r
}

func (r *callbackReceiver) url(clientID string) string {
	return r.srv.URL + "/callbacks/signing/" + clientID
}

func (r *callbackReceiver) deliverTo(w *worker.CancellationWorker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.w = w
}

func (r *callbackReceiver) serve(rw http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	body, err := io.ReadAll(http.MaxBytesReader(rw, req.Body, signing.MaxCallbackBody))
	if err != nil {
		http.Error(rw, "body", http.StatusBadRequest)
		return
	}
	cl, err := r.x.clients.Load(ctx, strings.TrimPrefix(req.URL.Path, "/callbacks/signing/"))
	if err != nil {
		http.Error(rw, "client", http.StatusInternalServerError)
		return
	}
	cfg, ok := cl.Signing()
	if !ok {
		http.Error(rw, "no signing", http.StatusNotFound)
		return
	}
	cb, err := signing.VerifyCallback(cfg.ProviderKey, req.Header, body, time.Now(), 0)
	if err != nil {
		http.Error(rw, "unverified", http.StatusUnauthorized)
		return
	}
	var noted bool
	meta := repository.Meta{Tenant: cl.ID(), CorrelationID: cb.Reference, Actor: "provider"}
	if _, _, err := r.x.crepo.Update(ctx, cb.Reference, meta, func(c *cancellation.Cancellation) error {
		var err error
		noted, err = c.NoteProviderCallback(cb.EventID, time.Now())
		return err
	}); err != nil {
		http.Error(rw, "store", http.StatusInternalServerError)
		return
	}
	r.mu.Lock()
	w := r.w
	r.mu.Unlock()
	if noted && w != nil {
		envs, err := r.x.store.ReadStream(ctx, cancellation.StreamName(cb.Reference), 0, 0)
		if err == nil && len(envs) > 0 {
			_ = w.HandleBatch(context.Background(), envs[len(envs)-1:])
		}
	}
	rw.WriteHeader(http.StatusNoContent)
}

// pdfText extracts a PDF's text with the PDF reader the letter parser uses (not the letter
// parser itself, which reads letters only).
func pdfText(t *testing.T, doc []byte) string {
	t.Helper()
	r, err := pdf.NewReader(bytes.NewReader(doc), int64(len(doc)))
	if err != nil {
		t.Fatal(err)
	}
	rd, err := r.GetPlainText()
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

// TestCancellationIsRenderedAndSent: a requested cancellation is claimed, rendered from the
// client's template with the holder's data and sent by e-mail or SMS: PENDING with the
// signature deadline, one message in the outbox, the provider's process pending.
func TestCancellationIsRenderedAndSent(t *testing.T) {
	x := newCxEnv(t, cxOptions{})
	cfg := x.config("w1")
	cfg.SigningTimeout = 2 * time.Hour
	w := x.worker(cfg)
	byEmail, reqEmail := x.request(cxRequest{insuranceType: "HOME", method: cancellation.DeliveryEmail})
	bySMS, reqSMS := x.request(cxRequest{insuranceType: "CAR", method: cancellation.DeliverySMS})
	x.handle(w, reqEmail, reqSMS)

	for _, tc := range []struct {
		id, insuranceType, channel, to string
	}{{byEmail, "HOME", "EMAIL", cxEmail}, {bySMS, "CAR", "SMS", cxPhone}} {
		c := x.waitStatus(tc.id, cancellation.StatusPending)
		if got, want := x.cxTypes(tc.id), []string{cancellation.EventRequested, cancellation.EventClaimed, cancellation.EventSent}; !slices.Equal(got, want) {
			t.Fatalf("%s: events %v, want %v", tc.channel, got, want)
		}
		if c.ClaimedBy() != "w1" {
			t.Errorf("%s: claimed by %q", tc.channel, c.ClaimedBy())
		}
		sent := c.Sent()
		if sent.ProcessID == "" || !hex64.MatchString(sent.DocumentSHA256) || sent.DocumentSize <= 0 {
			t.Fatalf("%s: sent %+v", tc.channel, sent)
		}
		if !sent.Deadline.Equal(sent.At.Add(2 * time.Hour)) {
			t.Errorf("%s: deadline %v, want sent %v + the signing timeout", tc.channel, sent.Deadline, sent.At)
		}

		// What the provider got is the document the event describes: a PDF naming the holder
		// and the insurance.
		doc := x.provider.document(tc.id)
		sum := sha256.Sum256(doc)
		if !collection.LooksLikePDF(doc) || hex.EncodeToString(sum[:]) != sent.DocumentSHA256 || len(doc) != sent.DocumentSize {
			t.Fatalf("%s: the uploaded document (%d bytes, %.8q) is not the one recorded (%d bytes)", tc.channel, len(doc), doc, sent.DocumentSize)
		}
		text := pdfText(t, doc)
		ins := x.insurances[tc.insuranceType]
		for _, want := range []string{cxHolder, *ins.InsuranceNumber, "19121212-1212", "Flyttfirman AB", "Stockholm"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: the power of attorney lacks %q:\n%s", tc.channel, want, text)
			}
		}

		p := x.process(c)
		if p.State != signingsim.StatePending || p.Reference != tc.id {
			t.Errorf("%s: provider process %+v", tc.channel, p)
		}
		msgs := x.sb.Signing().Outbox(tc.id, "")
		if len(msgs) != 1 || msgs[0].Channel != tc.channel || msgs[0].To != tc.to || !strings.Contains(msgs[0].Body, "/s/"+tc.id) {
			t.Fatalf("%s: outbox %+v", tc.channel, msgs)
		}
	}
	if got := x.outcomes(cancellation.StatusPending, ""); got != 2 {
		t.Errorf("PENDING outcomes %v, want 2", got)
	}
	if got := x.providerCalls("start", "ok"); got != 2 {
		t.Errorf("start calls %v, want 2", got)
	}
	x.waitIdle(w)
	logs := x.logs.String()
	for _, secret := range []string{cxProviderKey, cxHolder, tolvan, cxEmail, cxPhone} {
		if strings.Contains(logs, secret) {
			t.Errorf("the logs contain %q", secret)
		}
	}
}

// TestCancellationFollowsTheProviderByCallbacks: with no sweep at all, the provider's verified
// callbacks drive a signed cancellation to CLOSED and its sealed PDF, and a rejected one to
// REJECTED.
func TestCancellationFollowsTheProviderByCallbacks(t *testing.T) {
	x := newCxEnv(t, cxOptions{})
	cb := x.callbacks()
	cfg := x.config("w1")
	cfg.CallbackURL = cb.url
	w := x.worker(cfg)
	cb.deliverTo(w)
	toSign, req1 := x.request(cxRequest{insuranceType: "HOME"})
	toReject, req2 := x.request(cxRequest{insuranceType: "CAR"})
	x.handle(w, req1, req2)
	x.waitStatus(toSign, cancellation.StatusPending)
	x.waitStatus(toReject, cancellation.StatusPending)

	signed, err := x.sb.Signing().Sign(toSign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.sb.Signing().Reject(toReject); err != nil {
		t.Fatal(err)
	}

	c := x.waitCx(toSign, "signed and sealed", (*cancellation.Cancellation).IsSignedAndSealed)
	if c.Status() != cancellation.StatusClosed || !c.SignedAt().Equal(signed.SignedAt) {
		t.Fatalf("status %s signed at %v, want CLOSED at %v", c.Status(), c.SignedAt(), signed.SignedAt)
	}
	want := []string{cancellation.EventRequested, cancellation.EventClaimed, cancellation.EventSent, cancellation.EventSigned, cancellation.EventSealed}
	if got := x.cxTypes(toSign); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if n := x.count(toSign, cancellation.EventProviderNotified); n == 0 {
		t.Fatal("no provider callback was recorded: the callbacks did not drive it")
	}
	assertSealedByTheProvider(t, x, c)

	r := x.waitStatus(toReject, cancellation.StatusRejected)
	want = []string{cancellation.EventRequested, cancellation.EventClaimed, cancellation.EventSent, cancellation.EventRejected}
	if got := x.cxTypes(toReject); !slices.Equal(got, want) {
		t.Fatalf("rejected: events %v, want %v", got, want)
	}
	if r.SealedDocument() != nil || r.EndedAt().IsZero() {
		t.Errorf("rejected: sealed %d bytes, ended %v", len(r.SealedDocument()), r.EndedAt())
	}

	if got := x.outcomes(cancellation.StatusClosed, ""); got != 1 {
		t.Errorf("CLOSED outcomes %v, want 1", got)
	}
	if got := x.outcomes(cancellation.StatusRejected, ""); got != 1 {
		t.Errorf("REJECTED outcomes %v, want 1", got)
	}
	if got := x.providerCalls("document", "ok"); got != 1 {
		t.Errorf("document downloads %v, want 1", got)
	}
}

// assertSealedByTheProvider: the recorded PDF is the provider's sealed document, carrying the
// rendered power of attorney and a valid signature by the provider's seal certificate.
func assertSealedByTheProvider(t *testing.T, x *cxEnv, c *cancellation.Cancellation) {
	t.Helper()
	doc := c.SealedDocument()
	if !collection.LooksLikePDF(doc) {
		t.Fatalf("sealed document %.16q is not a PDF", doc)
	}
	fromProvider, err := x.sb.Signing().Document(cxProviderKey, c.Sent().ProcessID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, fromProvider) {
		t.Fatal("the recorded sealed PDF is not the provider's")
	}
	res, err := verify.VerifyWithOptions(bytes.NewReader(doc), int64(len(doc)), &verify.VerifyOptions{AllowUntrustedRoots: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Signers) != 1 || !res.Signers[0].ValidSignature || len(res.Signers[0].Certificates) == 0 ||
		!res.Signers[0].Certificates[0].Certificate.Equal(x.sb.Signing().SealCertificate()) {
		t.Fatalf("the sealed PDF's signature is not a valid seal of the provider: %+v", res)
	}
	text := pdfText(t, doc)
	ins := x.insurances[c.Requested().InsuranceType]
	for _, want := range []string{cxHolder, *ins.InsuranceNumber, "Signed by: " + cxHolder, "Reference: " + c.DocumentID()} {
		if !strings.Contains(text, want) {
			t.Errorf("the sealed PDF lacks %q", want)
		}
	}
}

// TestCancellationTimesOutAtItsDeadline: unsigned past SigningTimeout, a pending cancellation is
// TIMED_OUT by the worker's own timer (no sweep, no callback) and withdrawn at the provider.
func TestCancellationTimesOutAtItsDeadline(t *testing.T) {
	x := newCxEnv(t, cxOptions{})
	cfg := x.config("w1")
	cfg.SigningTimeout = 300 * time.Millisecond
	w := x.worker(cfg)
	id, req := x.request(cxRequest{})
	x.handle(w, req)
	c := x.waitStatus(id, cancellation.StatusTimedOut)
	want := []string{cancellation.EventRequested, cancellation.EventClaimed, cancellation.EventSent, cancellation.EventTimedOut}
	if got := x.cxTypes(id); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if c.EndedAt().Before(c.Sent().Deadline) {
		t.Fatalf("timed out at %v, before the deadline %v", c.EndedAt(), c.Sent().Deadline)
	}
	x.waitIdle(w)
	// Withdrawn: the provider's link no longer signs.
	if got := x.providerCalls("cancel", "ok"); got != 1 {
		t.Errorf("cancel calls %v, want 1", got)
	}
	if p := x.process(c); p.State != signingsim.StateCanceled && p.State != signingsim.StateExpired {
		t.Errorf("provider process %s, want it withdrawn", p.State)
	}
	if _, err := x.sb.Signing().Sign(id); !errors.Is(err, signingsim.ErrNotPending) {
		t.Errorf("signing a timed-out cancellation: %v, want not pending", err)
	}
	if got := x.outcomes(cancellation.StatusTimedOut, ""); got != 1 {
		t.Errorf("TIMED_OUT outcomes %v, want 1", got)
	}
}

// TestCancellationDeadlinePassedWhileStopped: the deadline is in the events, so a worker that
// starts after it passed (the same worker id resuming, or another one sweeping) times the
// cancellation out at once.
func TestCancellationDeadlinePassedWhileStopped(t *testing.T) {
	x := newCxEnv(t, cxOptions{})
	cfg := x.config("w1")
	cfg.SigningTimeout = 300 * time.Millisecond
	w1 := x.worker(cfg)
	resumed, req1 := x.request(cxRequest{insuranceType: "HOME"})
	swept, req2 := x.request(cxRequest{insuranceType: "CAR"})
	x.handle(w1, req1, req2)
	c1 := x.waitStatus(resumed, cancellation.StatusPending)
	c2 := x.waitStatus(swept, cancellation.StatusPending)
	w1.Stop()

	deadline := c1.Sent().Deadline
	if d := c2.Sent().Deadline; d.After(deadline) {
		deadline = d
	}
	time.Sleep(time.Until(deadline) + 50*time.Millisecond)
	for _, id := range []string{resumed, swept} {
		if s := x.loadCx(id).Status(); s != cancellation.StatusPending {
			t.Fatalf("%s while no worker ran", s)
		}
	}

	// The same worker id, restarted, resumes one of them.
	again := x.worker(cfg)
	began := time.Now()
	if err := again.Resume(context.Background(), []string{resumed}); err != nil {
		t.Fatal(err)
	}
	x.waitStatus(resumed, cancellation.StatusTimedOut)
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("resumed deadline took %v", took)
	}
	x.waitIdle(again)
	if s := x.loadCx(swept).Status(); s != cancellation.StatusPending {
		t.Fatalf("the cancellation nobody resumed is %s", s)
	}

	// Another worker's first sweep finds the other.
	cfg2 := x.config("w2")
	cfg2.SigningTimeout = cfg.SigningTimeout
	cfg2.Open = x.openCancellations()
	cfg2.SweepInterval = time.Hour // only the sweep at Run's start
	w2 := x.worker(cfg2)
	began = time.Now()
	x.run(w2)
	x.waitStatus(swept, cancellation.StatusTimedOut)
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("swept deadline took %v", took)
	}
	for _, id := range []string{resumed, swept} {
		want := []string{cancellation.EventRequested, cancellation.EventClaimed, cancellation.EventSent, cancellation.EventTimedOut}
		if got := x.cxTypes(id); !slices.Equal(got, want) {
			t.Errorf("events %v, want %v", got, want)
		}
	}
	if got := x.outcomes(cancellation.StatusTimedOut, ""); got != 2 {
		t.Errorf("TIMED_OUT outcomes %v, want 2", got)
	}
}

// TestCancellationWithdrawnByTheClient: a pending cancellation the client withdraws is
// withdrawn at the provider when the worker sees cancellation.canceled.
func TestCancellationWithdrawnByTheClient(t *testing.T) {
	x := newCxEnv(t, cxOptions{})
	w := x.worker(x.config("w1"))
	id, req := x.request(cxRequest{})
	x.handle(w, req)
	x.waitStatus(id, cancellation.StatusPending)
	x.waitIdle(w)

	x.handle(w, x.withdraw(id))
	waitUntil(t, "the process withdrawn at the provider", func() bool {
		return x.process(x.loadCx(id)).State == signingsim.StateCanceled
	})
	c := x.loadCx(id)
	if c.Status() != cancellation.StatusCanceled || c.CancelReason() != cancellation.CanceledByClient {
		t.Fatalf("status %s reason %s", c.Status(), c.CancelReason())
	}
	want := []string{cancellation.EventRequested, cancellation.EventClaimed, cancellation.EventSent, cancellation.EventCanceled}
	if got := x.cxTypes(id); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if _, err := x.sb.Signing().Sign(id); !errors.Is(err, signingsim.ErrNotPending) {
		t.Errorf("signing a withdrawn cancellation: %v, want not pending", err)
	}
	x.waitIdle(w)
	if got := x.providerCalls("cancel", "ok"); got != 1 {
		t.Errorf("cancel calls %v, want 1", got)
	}
}

// TestCancellationSignedJustBeforeItsWithdrawal: the holder signs (its callback lost) and the
// client withdraws before the worker saw the signature: the cancellation stays CANCELED, as the
// client asked, and the signature the provider kept is logged and counted, never silent.
func TestCancellationSignedJustBeforeItsWithdrawal(t *testing.T) {
	x := newCxEnv(t, cxOptions{})
	w := x.worker(x.config("w1"))
	id, req := x.request(cxRequest{})
	x.handle(w, req)
	x.waitStatus(id, cancellation.StatusPending)
	x.waitIdle(w)
	x.sb.Signing().SetDropCallbacks(true)
	if _, err := x.sb.Signing().Sign(id); err != nil {
		t.Fatal(err)
	}
	x.handle(w, x.withdraw(id))
	x.waitIdle(w)
	if c := x.loadCx(id); c.Status() != cancellation.StatusCanceled || c.IsSignedAndSealed() {
		t.Fatalf("status %s, sealed %v", c.Status(), c.IsSignedAndSealed())
	}
	if got := x.outcomes(cancellation.StatusCanceled, "SIGNED_AFTER_END"); got != 1 {
		t.Fatalf("signatures after the end counted %v, want 1", got)
	}
}

// TestCancellationDocumentErrors: a document the provider refuses, and a template version the
// client does not have, end DOCUMENT_ERROR with their codes and send nothing.
func TestCancellationDocumentErrors(t *testing.T) {
	x := newCxEnv(t, cxOptions{})
	// Version 2 carries the provider's refusal marker.
	x.configureSigning(poa.ExampleTemplate+"\nSANDBOX:REFUSE\n", cxProviderKey)
	w := x.worker(x.config("w1"))
	refused, req1 := x.request(cxRequest{insuranceType: "HOME", templateVersion: 2})
	missing, req2 := x.request(cxRequest{insuranceType: "CAR", templateVersion: 7})
	x.handle(w, req1, req2)

	for _, tc := range []struct{ id, code string }{
		{refused, cancellation.DocumentRefused}, {missing, cancellation.DocumentTemplateMissing},
	} {
		c := x.waitStatus(tc.id, cancellation.StatusDocumentError)
		if f := c.DocumentFailure(); f == nil || f.Code != tc.code || f.Message == "" {
			t.Fatalf("failure %+v, want %s", f, tc.code)
		}
		want := []string{cancellation.EventRequested, cancellation.EventClaimed, cancellation.EventDocumentFailed}
		if got := x.cxTypes(tc.id); !slices.Equal(got, want) {
			t.Fatalf("%s: events %v, want %v", tc.code, got, want)
		}
		if msgs := x.sb.Signing().Outbox(tc.id, ""); len(msgs) != 0 {
			t.Errorf("%s: outbox %+v", tc.code, msgs)
		}
		if got := x.outcomes(cancellation.StatusDocumentError, tc.code); got != 1 {
			t.Errorf("%s outcomes %v, want 1", tc.code, got)
		}
	}
	x.waitIdle(w)
	if n := x.provider.startCalls(); n != 1 {
		t.Errorf("%d uploads, want only the refused one (a missing template uploads nothing)", n)
	}
	if got := x.providerCalls("start", "refused"); got != 1 {
		t.Errorf("refused start calls %v, want 1", got)
	}
	if st := x.sb.Signing().Stats(); st.Processes != 0 {
		t.Errorf("the provider has %d processes", st.Processes)
	}
}

// TestCancellationWithAProviderKeyRefused: a key the provider refuses leaves the cancellation
// in PREPARATION (the operator may fix it), not failed; once a good key is configured, the next
// pass sends it.
func TestCancellationWithAProviderKeyRefused(t *testing.T) {
	x := newCxEnv(t, cxOptions{providerKey: cxBadKey})
	w := x.worker(x.config("w1"))
	id, req := x.request(cxRequest{})
	x.handle(w, req)
	waitUntil(t, "the provider's refusal", func() bool { return x.providerCalls("start", "unauthorized") == 1 })
	x.waitIdle(w)
	c := x.loadCx(id)
	if c.Status() != cancellation.StatusPreparation {
		t.Fatalf("status %s, want PREPARATION", c.Status())
	}
	if got, want := x.cxTypes(id), []string{cancellation.EventRequested, cancellation.EventClaimed}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if msgs := x.sb.Signing().Outbox("", ""); len(msgs) != 0 {
		t.Fatalf("outbox %+v", msgs)
	}
	if logs := x.logs.String(); !strings.Contains(logs, "signing provider not usable now") || strings.Contains(logs, cxBadKey) {
		t.Errorf("the refusal is logged as a warning, without the key:\n%s", logs)
	}

	x.configureSigning(poa.ExampleTemplate, cxProviderKey)
	if err := w.Resume(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	c = x.waitStatus(id, cancellation.StatusPending)
	want := []string{cancellation.EventRequested, cancellation.EventClaimed, cancellation.EventClaimed, cancellation.EventSent}
	if got := x.cxTypes(id); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if p := x.process(c); p.State != signingsim.StatePending {
		t.Fatalf("provider process %+v", p)
	}
	if msgs := x.sb.Signing().Outbox(id, ""); len(msgs) != 1 {
		t.Fatalf("outbox %+v", msgs)
	}
}

// TestCancellationOfAnErasedUser: a cancellation whose user was deleted before it was sent is
// CANCELED (USER_DELETED) without a claim and without anything reaching the provider.
func TestCancellationOfAnErasedUser(t *testing.T) {
	x := newCxEnv(t, cxOptions{})
	w := x.worker(x.config("w1"))
	id, req := x.request(cxRequest{})
	if err := x.keys.Destroy(context.Background(), domain.UserSubject(x.userUUID)); err != nil {
		t.Fatal(err)
	}
	x.handle(w, req)
	c := x.waitStatus(id, cancellation.StatusCanceled)
	if c.CancelReason() != cancellation.CanceledUserDeleted || c.Requested().Personal != nil {
		t.Fatalf("reason %s, personal %+v", c.CancelReason(), c.Requested().Personal)
	}
	if got, want := x.cxTypes(id), []string{cancellation.EventRequested, cancellation.EventCanceled}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	x.waitIdle(w)
	if n := x.provider.startCalls(); n != 0 {
		t.Fatalf("%d uploads", n)
	}
	if st := x.sb.Signing().Stats(); st.Processes != 0 || len(x.sb.Signing().Outbox("", "")) != 0 {
		t.Fatalf("the provider got something: %+v", st)
	}
	if got := x.outcomes(cancellation.StatusCanceled, "USER_DELETED"); got != 1 {
		t.Errorf("USER_DELETED outcomes %v, want 1", got)
	}
}

// TestTwoCancellationWorkersOnTheSameRequestOnlyOneSends: the claim lets one worker send; the
// provider has one process and the holder one message per cancellation.
func TestTwoCancellationWorkersOnTheSameRequestOnlyOneSends(t *testing.T) {
	x := newCxEnv(t, cxOptions{})
	w1, w2 := x.worker(x.config("w1")), x.worker(x.config("w2"))
	var ids []string
	var reqs []eventschema.Envelope
	for range 4 {
		id, req := x.request(cxRequest{})
		ids = append(ids, id)
		reqs = append(reqs, req)
	}
	var wg sync.WaitGroup
	for _, w := range []*worker.CancellationWorker{w1, w2} {
		wg.Go(func() {
			if err := w.HandleBatch(context.Background(), reqs); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		x.waitStatus(id, cancellation.StatusPending)
	}
	x.waitIdle(w1)
	x.waitIdle(w2)
	for _, id := range ids {
		want := []string{cancellation.EventRequested, cancellation.EventClaimed, cancellation.EventSent}
		if got := x.cxTypes(id); !slices.Equal(got, want) {
			t.Errorf("events %v, want %v (one claim, one sending)", got, want)
		}
		if msgs := x.sb.Signing().Outbox(id, ""); len(msgs) != 1 {
			t.Errorf("%d messages for one cancellation", len(msgs))
		}
	}
	if st := x.sb.Signing().Stats(); st.Processes != len(ids) {
		t.Errorf("the provider has %d processes for %d cancellations", st.Processes, len(ids))
	}
	if got := x.outcomes(cancellation.StatusPending, ""); got != float64(len(ids)) {
		t.Errorf("PENDING outcomes %v, want %d", got, len(ids))
	}
}

// TestCancellationSweepWithoutCallbacks: with every callback lost, the sweep of the open
// cancellations still brings a signed one to CLOSED and sealed.
func TestCancellationSweepWithoutCallbacks(t *testing.T) {
	x := newCxEnv(t, cxOptions{})
	x.sb.Signing().SetDropCallbacks(true)
	cb := x.callbacks()
	cfg := x.config("w1")
	cfg.CallbackURL = cb.url
	cfg.Open = x.openCancellations()
	w := x.worker(cfg)
	cb.deliverTo(w)
	id, _ := x.request(cxRequest{}) // no event handed over: the sweep finds it
	x.run(w)
	x.waitStatus(id, cancellation.StatusPending)
	if _, err := x.sb.Signing().Sign(id); err != nil {
		t.Fatal(err)
	}
	c := x.waitCx(id, "signed and sealed", (*cancellation.Cancellation).IsSignedAndSealed)
	want := []string{cancellation.EventRequested, cancellation.EventClaimed, cancellation.EventSent, cancellation.EventSigned, cancellation.EventSealed}
	if got := x.cxTypes(id); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if n := x.count(id, cancellation.EventProviderNotified); n != 0 {
		t.Fatalf("%d callbacks recorded while the provider dropped them", n)
	}
	if st := x.sb.Signing().Stats(); st.CallbacksDropped == 0 || st.CallbacksSent != 0 {
		t.Fatalf("callbacks: %+v", st)
	}
	assertSealedByTheProvider(t, x, c)
	if got := x.outcomes(cancellation.StatusClosed, ""); got != 1 {
		t.Errorf("CLOSED outcomes %v, want 1", got)
	}
}

// TestCancellationRestartSweepsEveryPage: a worker that starts with more open cancellations than
// SweepLimit, none of them handed over by the feed, sends every one from Run's first sweep, a
// page at a time, without waiting an interval per page.
func TestCancellationRestartSweepsEveryPage(t *testing.T) {
	x := newCxEnv(t, cxOptions{})
	var ids []string
	for range 4 {
		id, _ := x.request(cxRequest{})
		ids = append(ids, id)
	}
	cfg := x.config("w1")
	cfg.Open, cfg.SweepLimit, cfg.SweepInterval = x.openCancellations(), 1, time.Hour
	x.run(x.worker(cfg))
	for _, id := range ids {
		x.waitStatus(id, cancellation.StatusPending)
	}
}

// TestCancellationSweepFindsANewOneBehindPendingOnes: more cancellations than SweepLimit wait
// for their holders' signatures, for weeks; a newer one the feed never handed over is still sent
// by the periodic sweeps, which page past the pending ones instead of listing them again.
func TestCancellationSweepFindsANewOneBehindPendingOnes(t *testing.T) {
	x := newCxEnv(t, cxOptions{})
	var pending []string
	for range 3 {
		id, _ := x.request(cxRequest{})
		pending = append(pending, id)
	}
	cfg := x.config("w1")
	cfg.Open, cfg.SweepLimit = x.openCancellations(), 2
	x.run(x.worker(cfg))
	for _, id := range pending {
		x.waitStatus(id, cancellation.StatusPending)
	}
	// Requested after the start's round listed them all: only a later page finds it.
	id, _ := x.request(cxRequest{})
	x.waitStatus(id, cancellation.StatusPending)
	for _, id := range pending {
		if c := x.loadCx(id); c.Status() != cancellation.StatusPending {
			t.Fatalf("a pending cancellation moved on: %s", c.Status())
		}
	}
}

// TestTwoCancellationWorkersAtOneDeadline: every worker that saw a pending cancellation arms a
// timer at its deadline; when they fire together, one records TIMED_OUT and the outcome is
// counted once.
func TestTwoCancellationWorkersAtOneDeadline(t *testing.T) {
	x := newCxEnv(t, cxOptions{})
	cfg1 := x.config("w1")
	cfg1.SigningTimeout = 400 * time.Millisecond
	w1 := x.worker(cfg1)
	id, req := x.request(cxRequest{})
	x.handle(w1, req)
	x.waitStatus(id, cancellation.StatusPending)
	cfg2 := x.config("w2")
	cfg2.SigningTimeout = cfg1.SigningTimeout
	cfg2.Open = x.openCancellations()
	cfg2.SweepInterval = time.Hour // the sweep at Run's start reads it and arms w2's timer
	w2 := x.worker(cfg2)
	x.run(w2)
	waitUntil(t, "w2's pass over the pending cancellation", func() bool { return x.providerCalls("status", "ok") >= 1 })

	x.waitStatus(id, cancellation.StatusTimedOut)
	x.waitIdle(w1)
	x.waitIdle(w2)
	if n := x.count(id, cancellation.EventTimedOut); n != 1 {
		t.Fatalf("%d timed-out events", n)
	}
	if got := x.outcomes(cancellation.StatusTimedOut, ""); got != 1 {
		t.Errorf("TIMED_OUT outcomes %v for one cancellation, want 1", got)
	}
}
