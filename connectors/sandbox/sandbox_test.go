package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/domain/company"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func start(t *testing.T, opts ...sandbox.Option) (*sandbox.Sandbox, *fakeClock) {
	t.Helper()
	clock := &fakeClock{now: time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)}
	opts = append([]sandbox.Option{sandbox.WithLatency(0, 0), sandbox.WithClock(clock.Now)}, opts...)
	sb, err := sandbox.Start(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb, clock
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func call(t *testing.T, method, url string, body any, header map[string]string) answer {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	a := answer{status: res.StatusCode, header: res.Header}
	if res.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(res.Body).Decode(&a.body); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v", method, url, err)
		}
	}
	return a
}

func login(personalNumber, method string) map[string]string {
	return map[string]string{"personalNumber": personalNumber, "loginMethod": method}
}

const mock = company.LoginEIDOtherDeviceMock

func TestCompaniesMatchTheCatalog(t *testing.T) {
	sb, _ := start(t)
	a := call(t, "GET", sb.URL()+"/sandbox/companies", nil, nil)
	if a.status != 200 {
		t.Fatalf("status %d", a.status)
	}
	served := map[string]map[string]any{}
	for _, c := range a.body["companies"].([]any) {
		m := c.(map[string]any)
		served[m["id"].(string)] = m
	}
	for _, co := range sandbox.Catalog().All() {
		s, ok := served[co.ID]
		if !ok {
			t.Errorf("catalog company %s is not served", co.ID)
			continue
		}
		var methods []string
		for _, m := range s["loginMethods"].([]any) {
			methods = append(methods, m.(string))
		}
		if !slices.Equal(slices.Sorted(slices.Values(methods)), slices.Sorted(slices.Values(co.LoginMethods))) {
			t.Errorf("%s: sandbox methods %v, catalog %v", co.ID, methods, co.LoginMethods)
		}
		if (s["status"] == "MAINTENANCE") != (co.Availability == company.Maintenance) {
			t.Errorf("%s: sandbox status %v, catalog availability %s", co.ID, s["status"], co.Availability)
		}
		if sb.BaseURL(co.ID) == "" {
			t.Errorf("%s has no base URL", co.ID)
		}
	}
	if sb.BaseURL("nowhere") != "" {
		t.Error("an unknown company must have no base URL")
	}
}

func TestMockLoginThenInsurances(t *testing.T) {
	sb, clock := start(t, sandbox.WithMockSignDelay(time.Second))
	base := sb.BaseURL("se-demo-insurer")

	created := call(t, "POST", base+"/sessions", map[string]string{
		"personalNumber": "19121212-1212", "loginMethod": mock, "reference": "c-1",
	}, nil)
	if created.status != 201 || created.body["state"] != "AWAITING_SIGNATURE" || created.body["expiresAt"] == nil {
		t.Fatalf("create: %d %v", created.status, created.body)
	}
	if created.header.Get("Location") == "" || created.body["reference"] != "c-1" {
		t.Errorf("create: location %q, body %v", created.header.Get("Location"), created.body)
	}
	session := base + "/sessions/" + created.body["sessionId"].(string)

	if a := call(t, "GET", session+"/insurances", nil, nil); a.status != 409 || a.body["code"] != "NOT_AUTHENTICATED" {
		t.Fatalf("insurances before signing: %d %v", a.status, a.body)
	}
	clock.Add(999 * time.Millisecond)
	if a := call(t, "GET", session, nil, nil); a.body["state"] != "AWAITING_SIGNATURE" {
		t.Fatalf("before the delay: %v", a.body)
	}
	clock.Add(time.Millisecond)
	auth := call(t, "GET", session, nil, nil)
	if auth.body["state"] != "AUTHENTICATED" || auth.body["accessToken"] == "" {
		t.Fatalf("after the delay: %v", auth.body)
	}
	if who := auth.body["customer"].(map[string]any)["personalNumber"]; who != "191212121212" {
		t.Errorf("customer %v", who)
	}

	if a := call(t, "GET", session+"/insurances", nil, nil); a.status != 401 {
		t.Fatalf("insurances without a token: %d", a.status)
	}
	data := call(t, "GET", session+"/insurances", nil, map[string]string{"Authorization": "Bearer " + auth.body["accessToken"].(string)})
	if data.status != 200 {
		t.Fatalf("insurances: %d %v", data.status, data.body)
	}
	byProduct := map[string]map[string]any{}
	for _, i := range data.body["insurances"].([]any) {
		m := i.(map[string]any)
		byProduct[m["product"].(string)] = m
	}
	for _, p := range []string{"home", "motor", "accident", "pet", "life"} {
		if byProduct[p] == nil {
			t.Fatalf("no %s insurance in %v", p, data.body)
		}
	}
	if v, ok := byProduct["motor"]["startDate"]; !ok || v != nil {
		t.Errorf("unknown start date should be null, got %v", v)
	}
	if v, ok := byProduct["pet"]["name"]; !ok || v != nil {
		t.Errorf("unknown name should be null, got %v", v)
	}
	if _, ok := byProduct["life"]["renewalDate"]; ok {
		t.Errorf("unknown renewal date should be absent")
	}
	if r := byProduct["home"]["renewalDate"].(string); r <= clock.Now().Format(time.DateOnly) {
		t.Errorf("renewal date %s is not in the future", r)
	}
	if h := byProduct["home"]["policyHolder"].(map[string]any)["name"]; h != "Tolvan Tolvansson" {
		t.Errorf("holder %v", h)
	}

	if a := call(t, "DELETE", session, nil, nil); a.status != 204 {
		t.Fatalf("logout: %d", a.status)
	}
	if a := call(t, "GET", session, nil, nil); a.status != 404 || a.body["code"] != "SESSION_NOT_FOUND" {
		t.Fatalf("after logout: %d %v", a.status, a.body)
	}
}

func TestIdempotencyKeyGivesTheSameSession(t *testing.T) {
	sb, _ := start(t)
	base := sb.BaseURL("se-demo-insurer")
	key := map[string]string{"Idempotency-Key": "c-1/3"}
	first := call(t, "POST", base+"/sessions", login("199001010017", mock), key)
	again := call(t, "POST", base+"/sessions", login("199001010017", mock), key)
	if first.status != 201 || again.status != 200 || first.body["sessionId"] != again.body["sessionId"] {
		t.Fatalf("first %d %v, again %d %v", first.status, first.body["sessionId"], again.status, again.body["sessionId"])
	}
	other := call(t, "POST", base+"/sessions", login("191212121212", mock), key)
	if other.status != 422 || other.body["code"] != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("reused key: %d %v", other.status, other.body)
	}
	fresh := call(t, "POST", base+"/sessions", login("199001010017", mock), nil)
	if fresh.body["sessionId"] == first.body["sessionId"] {
		t.Fatal("a request without a key must open a new session")
	}
}

func TestRefusals(t *testing.T) {
	sb, _ := start(t)
	cases := []struct {
		name, company string
		body          any
		status        int
		code          string
	}{
		{"method the company does not support", "ee-demo-insurer", login("199001010017", mock), 422, "LOGIN_METHOD_NOT_SUPPORTED"},
		{"invalid personal number", "se-demo-insurer", login("199001010018", mock), 400, "INVALID_PERSONAL_NUMBER"},
		{"not JSON of the API", "se-demo-insurer", map[string]string{"pnr": "1"}, 400, "INVALID_REQUEST"},
		{"unknown company", "xx-nowhere", login("199001010017", mock), 404, "UNKNOWN_COMPANY"},
		{"maintenance", "se-demo-maintenance", login("199001010017", mock), 503, "MAINTENANCE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := call(t, "POST", sb.URL()+"/sandbox/companies/"+tc.company+"/sessions", tc.body, nil)
			if a.status != tc.status || a.body["code"] != tc.code {
				t.Fatalf("%d %v, want %d %s", a.status, a.body, tc.status, tc.code)
			}
			if tc.code == "LOGIN_METHOD_NOT_SUPPORTED" && a.body["supportedLoginMethods"] == nil {
				t.Error("the refusal should list the supported methods")
			}
		})
	}
}

func TestPersonaLogins(t *testing.T) {
	sb, clock := start(t, sandbox.WithMockSignDelay(time.Second), sandbox.WithEIDOrderTimeout(30*time.Second))
	base := sb.BaseURL("se-demo-insurer")
	type step struct {
		after  time.Duration // since the login started
		state  string
		reason string
	}
	cases := []struct {
		personalNumber string
		steps          []step
	}{
		{"199001010041", []step{{0, "FAILED", "INVALID_CREDENTIALS"}}},
		{"199001010116", []step{{0, "FAILED", "ALREADY_IN_PROGRESS"}}},
		{"199001010090", []step{{0, "AWAITING_SIGNATURE", ""}, {time.Second, "FAILED", "USER_CANCELLED"}}},
		{"199001010124", []step{{time.Second, "FAILED", "ACCOUNT_LOCKED"}}},
		{"199001010108", []step{{0, "AWAITING_SIGNATURE", ""}, {29 * time.Second, "AWAITING_SIGNATURE", ""}, {30 * time.Second, "FAILED", "ORDER_EXPIRED"}}},
		{"198507099805", []step{{0, "AWAITING_SIGNATURE", ""}, {time.Second, "AUTHENTICATED", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.personalNumber, func(t *testing.T) {
			started := clock.Now()
			created := call(t, "POST", base+"/sessions", login(tc.personalNumber, mock), nil)
			if created.status != 201 {
				t.Fatalf("create: %d %v", created.status, created.body)
			}
			url := base + "/sessions/" + created.body["sessionId"].(string)
			for _, st := range tc.steps {
				clock.Add(started.Add(st.after).Sub(clock.Now()))
				a := call(t, "GET", url, nil, nil)
				reason, _ := a.body["failureReason"].(string)
				if a.body["state"] != st.state || reason != st.reason {
					t.Fatalf("after %v: %v %q, want %s %q", st.after, a.body["state"], reason, st.state, st.reason)
				}
			}
		})
	}

	t.Run("authenticates as someone else", func(t *testing.T) {
		created := call(t, "POST", base+"/sessions", login("199001010082", mock), nil)
		clock.Add(time.Second)
		a := call(t, "GET", base+"/sessions/"+created.body["sessionId"].(string), nil, nil)
		if who := a.body["customer"].(map[string]any)["personalNumber"]; a.body["state"] != "AUTHENTICATED" || who != "199001010017" {
			t.Fatalf("%v", a.body)
		}
	})
	t.Run("the company errors at collection", func(t *testing.T) {
		created := call(t, "POST", base+"/sessions", login("199001010157", mock), nil)
		clock.Add(time.Second)
		url := base + "/sessions/" + created.body["sessionId"].(string)
		token := call(t, "GET", url, nil, nil).body["accessToken"].(string)
		if a := call(t, "GET", url+"/insurances", nil, map[string]string{"Authorization": "Bearer " + token}); a.status != 500 {
			t.Fatalf("%d %v", a.status, a.body)
		}
	})
	t.Run("no products", func(t *testing.T) {
		created := call(t, "POST", base+"/sessions", login("199001010033", mock), nil)
		clock.Add(time.Second)
		url := base + "/sessions/" + created.body["sessionId"].(string)
		token := call(t, "GET", url, nil, nil).body["accessToken"].(string)
		a := call(t, "GET", url+"/insurances", nil, map[string]string{"Authorization": "Bearer " + token})
		if a.status != 200 || len(a.body["insurances"].([]any)) != 0 {
			t.Fatalf("%d %v", a.status, a.body)
		}
	})
}

func TestSessionsExpire(t *testing.T) {
	sb, clock := start(t, sandbox.WithSessionTTL(time.Minute))
	base := sb.BaseURL("se-demo-insurer")
	created := call(t, "POST", base+"/sessions", login("199001010017", mock), nil)
	clock.Add(time.Minute + time.Second)
	if a := call(t, "GET", base+"/sessions/"+created.body["sessionId"].(string), nil, nil); a.status != 404 {
		t.Fatalf("expired session: %d", a.status)
	}
}

func TestFailureInjectionAndLatency(t *testing.T) {
	sb, _ := start(t, sandbox.WithFailureRate(1), sandbox.WithLatency(20*time.Millisecond, 20*time.Millisecond))
	began := time.Now()
	a := call(t, "GET", sb.BaseURL("se-demo-insurer"), nil, nil)
	if a.status != 503 || a.body["code"] != "TEMPORARILY_UNAVAILABLE" {
		t.Fatalf("%d %v", a.status, a.body)
	}
	if took := time.Since(began); took < 20*time.Millisecond {
		t.Errorf("answered in %v, latency is 20ms", took)
	}
	sb.SetFailureRate(0)
	if a := call(t, "GET", sb.BaseURL("se-demo-insurer"), nil, nil); a.status != 200 || a.body["id"] != "se-demo-insurer" {
		t.Fatalf("%d %v", a.status, a.body)
	}
	if st := sb.Stats(); st.Requests != 2 || st.InjectedFailures != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	for name, opt := range map[string]sandbox.Option{
		"failure rate above 1": sandbox.WithFailureRate(1.5),
		"inverted latency":     sandbox.WithLatency(time.Second, time.Millisecond),
		"zero order timeout":   sandbox.WithEIDOrderTimeout(0),
	} {
		if _, err := sandbox.New(opt); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

func TestStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sb, err := sandbox.Start(ctx, sandbox.WithLatency(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	url := sb.URL()
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := http.Get(url + "/sandbox/companies")
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still serving after ctx ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
}
