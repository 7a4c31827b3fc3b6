package company_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/samla/samla/connectors/company"
	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/collection"
	dcompany "github.com/samla/samla/domain/company"
	"github.com/samla/samla/platform/metrics"
)

const mock = dcompany.LoginEIDOtherDeviceMock

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type fixture struct {
	client  *company.Client
	metrics *metrics.Metrics
	logs    *syncBuffer
}

func newClient(t *testing.T, baseURL func(string) string, mod func(*company.Config)) fixture {
	t.Helper()
	logs := &syncBuffer{}
	m := metrics.New(prometheus.NewRegistry())
	cfg := company.Config{
		BaseURL: baseURL, RequestTimeout: time.Second, MaxAttempts: 4,
		BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := company.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{client: c, metrics: m, logs: logs}
}

func samples(t *testing.T, m *metrics.Metrics, companyID, outcome string) uint64 {
	t.Helper()
	var out dto.Metric
	if err := m.CompanyRequestTime.WithLabelValues(companyID, outcome).(prometheus.Histogram).Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.Histogram.GetSampleCount()
}

func fixed(url string) func(string) string { return func(string) string { return url } }

func TestStartLoginRetriesWithTheSameIdempotencyKey(t *testing.T) {
	var calls atomic.Int32
	var mu sync.Mutex
	var keys, bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		keys, bodies = append(keys, r.Header.Get("Idempotency-Key")), append(bodies, string(b))
		mu.Unlock()
		if strings.Contains(r.URL.String(), "1212") {
			t.Errorf("personal number in the URL %s", r.URL)
		}
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"sessionId":"s1","state":"AWAITING_SIGNATURE"}`))
	}))
	defer srv.Close()
	f := newClient(t, fixed(srv.URL), nil)

	s, err := f.client.StartLogin(context.Background(), "acme", worker.LoginRequest{
		PersonalNumber: "191212121212", LoginMethod: mock, Reference: "c-1", IdempotencyKey: "c-1/2",
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != "s1" || s.State != worker.LoginAwaitingUser || s.Reference != "c-1" {
		t.Fatalf("session %+v", s)
	}
	if calls.Load() != 3 || keys[0] != "c-1/2" || keys[2] != keys[0] || bodies[2] != bodies[0] {
		t.Fatalf("calls %d keys %v bodies %v", calls.Load(), keys, bodies)
	}
	if got := samples(t, f.metrics, "acme", "server_error"); got != 2 {
		t.Errorf("server_error samples %d", got)
	}
	if got := samples(t, f.metrics, "acme", "ok"); got != 1 {
		t.Errorf("ok samples %d", got)
	}
	if logs := f.logs.String(); strings.Contains(logs, "191212121212") || !strings.Contains(logs, "c-1") {
		t.Errorf("logs must name the collection and never the person:\n%s", logs)
	}
}

func TestWhatIsNotRetried(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"bad request", 400, `{"code":"INVALID_REQUEST"}`, worker.ErrCompanyFailed},
		{"not implemented", 501, `{"code":"LOGIN_METHOD_NOT_IMPLEMENTED"}`, worker.ErrCompanyFailed},
		{"method refused", 422, `{"code":"LOGIN_METHOD_NOT_SUPPORTED"}`, worker.ErrLoginMethodNotSupported},
		{"other 422", 422, `{"code":"IDEMPOTENCY_KEY_REUSED"}`, worker.ErrCompanyFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			f := newClient(t, fixed(srv.URL), nil)
			_, err := f.client.StartLogin(context.Background(), "acme", worker.LoginRequest{LoginMethod: mock})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if calls.Load() != 1 {
				t.Fatalf("%d attempts, want 1", calls.Load())
			}
		})
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "30") // honoured only up to BackoffMax
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer srv.Close()
	f := newClient(t, fixed(srv.URL), nil)
	began := time.Now()
	_, err := f.client.PollLogin(context.Background(), "acme", worker.CompanySession{ID: "s1"})
	if !errors.Is(err, worker.ErrCompanyFailed) || calls.Load() != 4 {
		t.Fatalf("err %v after %d calls", err, calls.Load())
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("took %v: Retry-After must be capped", took)
	}
}

func TestTimeoutsAreRetriedAndCancellationIsNotACompanyFailure(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	f := newClient(t, fixed(srv.URL), func(c *company.Config) { c.RequestTimeout = 20 * time.Millisecond; c.MaxAttempts = 2 })
	_, err := f.client.PollLogin(context.Background(), "acme", worker.CompanySession{ID: "s1"})
	if !errors.Is(err, worker.ErrCompanyFailed) {
		t.Fatalf("err %v", err)
	}
	if got := samples(t, f.metrics, "acme", "timeout"); got != 2 {
		t.Errorf("timeout samples %d", got)
	}

	g := newClient(t, fixed(srv.URL), nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = g.client.PollLogin(ctx, "acme", worker.CompanySession{ID: "s1"})
	if !errors.Is(err, context.Canceled) || errors.Is(err, worker.ErrCompanyFailed) {
		t.Fatalf("err %v, want context.Canceled and no company failure", err)
	}
}

func TestUnreachableCompany(t *testing.T) {
	f := newClient(t, func(string) string { return "" }, nil)
	if _, err := f.client.StartLogin(context.Background(), "nowhere", worker.LoginRequest{LoginMethod: mock}); !errors.Is(err, worker.ErrCompanyFailed) {
		t.Fatalf("err %v", err)
	}
}

func TestUnusableAnswers(t *testing.T) {
	cases := []struct {
		name, path, body string
		call             func(*company.Client) error
		wantErr          bool
	}{
		{name: "session not JSON", body: `<html>`, wantErr: true,
			call: func(c *company.Client) error {
				_, err := c.PollLogin(context.Background(), "acme", worker.CompanySession{ID: "s"})
				return err
			}},
		{name: "authenticated without token", body: `{"sessionId":"s","state":"AUTHENTICATED"}`, wantErr: true,
			call: func(c *company.Client) error {
				_, err := c.PollLogin(context.Background(), "acme", worker.CompanySession{ID: "s"})
				return err
			}},
		{name: "repeated insurance ids", body: `{"insurances":[{"id":"a","product":"home"},{"id":"a","product":"pet"}]}`, wantErr: true,
			call: func(c *company.Client) error {
				_, err := c.FetchProduct(context.Background(), "acme", worker.CompanySession{ID: "s"}, worker.ProductInsurances)
				return err
			}},
		{name: "a state this adapter does not know", body: `{"sessionId":"s","state":"PREPARING_ORDER"}`,
			call: func(c *company.Client) error {
				s, err := c.PollLogin(context.Background(), "acme", worker.CompanySession{ID: "s"})
				if err == nil && s.State != worker.LoginPending {
					return errors.New("state " + string(s.State))
				}
				return err
			}},
		{name: "an unknown failure reason", body: `{"sessionId":"s","state":"FAILED","failureReason":"SOLAR_FLARE"}`,
			call: func(c *company.Client) error {
				s, err := c.PollLogin(context.Background(), "acme", worker.CompanySession{ID: "s"})
				if err == nil && (s.State != worker.LoginFailed || s.Outcome != collection.StatusFailed) {
					return errors.New("outcome " + string(s.Outcome))
				}
				return err
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			f := newClient(t, fixed(srv.URL), nil)
			err := tc.call(f.client)
			if tc.wantErr && !errors.Is(err, worker.ErrCompanyFailed) {
				t.Fatalf("err %v, want ErrCompanyFailed", err)
			}
			if !tc.wantErr && err != nil {
				t.Fatal(err)
			}
		})
	}
}

func startSandbox(t *testing.T, opts ...sandbox.Option) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.Start(context.Background(), append([]sandbox.Option{
		sandbox.WithLatency(0, 0), sandbox.WithMockSignDelay(20 * time.Millisecond),
		sandbox.WithEIDOrderTimeout(100 * time.Millisecond),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb
}

// loginUntilDone polls like the worker does, until the login leaves the awaiting states.
func loginUntilDone(t *testing.T, c *company.Client, personalNumber string) worker.CompanySession {
	t.Helper()
	ctx := context.Background()
	s, err := c.StartLogin(ctx, "se-demo-insurer", worker.LoginRequest{PersonalNumber: personalNumber, LoginMethod: mock, Reference: "c-test"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.State == worker.LoginAwaitingUser || s.State == worker.LoginPending {
		if time.Now().After(deadline) {
			t.Fatalf("login of %s never ended", personalNumber)
		}
		time.Sleep(5 * time.Millisecond)
		if s, err = c.PollLogin(ctx, "se-demo-insurer", s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestAgainstTheSandbox(t *testing.T) {
	sb := startSandbox(t)
	f := newClient(t, sb.BaseURL, nil)
	ctx := context.Background()

	s := loginUntilDone(t, f.client, "191212121212")
	if s.State != worker.LoginAuthenticated || s.AuthenticatedPersonalNumber != "191212121212" || s.AccessToken == "" {
		t.Fatalf("session %+v", s)
	}
	data, err := f.client.FetchProduct(ctx, "se-demo-insurer", s, worker.ProductInsurances)
	if err != nil {
		t.Fatal(err)
	}
	byType := map[string]collection.Insurance{}
	for _, i := range data.Insurances {
		byType[i.InsuranceType] = i
	}
	home, car, pet, life := byType["HOME"], byType["CAR"], byType["PET"], byType["LIFE"]
	if home.InsuranceNumber == nil || *home.InsuranceNumber != "H-4471-1212" || home.Premium == nil || *home.Premium != 289 ||
		*home.PremiumFrequency != "MONTHLY" || *home.Currency != "SEK" || home.RenewalDate == nil {
		t.Errorf("home %+v", home)
	}
	if car.StartDate != nil || *car.PremiumFrequency != "YEARLY" {
		t.Errorf("car %+v", car)
	}
	if pet.DisplayName != nil {
		t.Errorf("pet name should be unknown: %+v", pet)
	}
	if life.Premium != nil || life.Currency != nil || life.PremiumFrequency != nil || life.RenewalDate != nil {
		t.Errorf("life premium and renewal should be unknown: %+v", life)
	}
	if len(data.HolderNames) != 5 || data.HolderNames[home.ID] != "Tolvan Tolvansson" {
		t.Errorf("holder names %v", data.HolderNames)
	}
	if err := f.client.EndSession(ctx, "se-demo-insurer", s); err != nil {
		t.Fatal(err)
	}
	if err := f.client.EndSession(ctx, "se-demo-insurer", s); err != nil {
		t.Fatalf("ending a forgotten session: %v", err)
	}
	if _, err := f.client.PollLogin(ctx, "se-demo-insurer", s); !errors.Is(err, worker.ErrCompanyFailed) {
		t.Fatalf("poll of an ended session: %v", err)
	}

	t.Run("login failures map to statuses", func(t *testing.T) {
		for pn, want := range map[string]collection.Status{
			"199001010041": collection.StatusIncorrectCredentials,
			"199001010090": collection.StatusAuthenticationCancelled,
			"199001010108": collection.StatusAuthenticationTimeout,
			"199001010116": collection.StatusAuthenticationConflict,
			"199001010124": collection.StatusAccountTemporarilyLocked,
			"199001010132": collection.StatusKYCForm,
			"199001010140": collection.StatusCustomerEnrollmentRequired,
			"199001010165": collection.StatusFailed,
			"199001010173": collection.StatusAuthenticationError,
			"199001010207": collection.StatusContactForm,
		} {
			s := loginUntilDone(t, f.client, pn)
			if s.State != worker.LoginFailed || s.Outcome != want {
				t.Errorf("%s: %s %s, want FAILED %s", pn, s.State, s.Outcome, want)
			}
		}
	})

	t.Run("unsupported method", func(t *testing.T) {
		_, err := f.client.StartLogin(ctx, "ee-demo-insurer", worker.LoginRequest{PersonalNumber: "199001010017", LoginMethod: mock})
		if !errors.Is(err, worker.ErrLoginMethodNotSupported) {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("injected failures are retried", func(t *testing.T) {
		sb := startSandbox(t, sandbox.WithFailureRate(0.5), sandbox.WithSeed(3))
		f := newClient(t, sb.BaseURL, func(c *company.Config) { c.MaxAttempts = 12 })
		s := loginUntilDone(t, f.client, "191212121212")
		if _, err := f.client.FetchProduct(ctx, "se-demo-insurer", s, worker.ProductInsurances); err != nil {
			t.Fatal(err)
		}
		if sb.Stats().InjectedFailures == 0 {
			t.Fatal("nothing was injected")
		}
	})

	if logs := f.logs.String(); strings.Contains(logs, "1990010") || strings.Contains(logs, "191212") || strings.Contains(logs, "Tolvan") {
		t.Errorf("personal data in logs:\n%s", logs)
	}
}
