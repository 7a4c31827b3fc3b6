package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/consent"
)

// The connector role's consent process manager, end to end: a consent created over HTTP is
// authorized (or fails) at the sandbox bank as its persona says, and an authorized consent
// expires at expiresAt, also when the service was down then.

type consentStatusBody struct {
	ConsentID        string            `json:"consentId"`
	Status           string            `json:"status"`
	ExpiresAt        *time.Time        `json:"expiresAt"`
	Scope            []string          `json:"scope"`
	AuthInstructions map[string]string `json:"authInstructions"`
	PollingInterval  int               `json:"pollingInterval"`
	Error            *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// waitConsentStatus polls GET /consents/{id}/status until done holds.
func (c apiClient) waitConsentStatus(id string, timeout time.Duration, done func(consentStatusBody) bool) consentStatusBody {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, _, b := c.consentCall("GET", "/consents/"+id+"/status", nil, nil)
		var st consentStatusBody
		if code == http.StatusOK {
			if err := json.Unmarshal(b, &st); err != nil {
				c.t.Fatalf("status of consent %s: %s (%v)", id, b, err)
			}
			if done(st) {
				return st
			}
		} else if code != http.StatusNotFound { // the read model shows a new consent a moment later
			c.t.Fatalf("GET /consents/%s/status = %d %s", id, code, b)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("consent %s: timed out; last %d %s", id, code, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func consentSettled(st consentStatusBody) bool {
	return st.Status == "AUTHORIZED" || st.Status == "FAILED" || st.Status == "REVOKED" || st.Status == "EXPIRED"
}

// signConsent is the sandbox user signing: POST /sandbox/eid/sign {"consentId"}.
func (c apiClient) signConsent(id string) {
	c.t.Helper()
	res, err := http.Post(c.base+"/sandbox/eid/sign", "application/json", strings.NewReader(`{"consentId":"`+id+`"}`))
	if err != nil {
		c.t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		c.t.Fatalf("sign consent %s: %d %s", id, res.StatusCode, b)
	}
}

func TestConsentAuthorizationEndToEnd(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.EIDOrderTimeout = 1500 * time.Millisecond
	svc := start(t, cfg)
	defer stop(t, svc)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	user := c.createUser("consent-worker-e2e")

	t.Run("the other device: the QR code, then the signature", func(t *testing.T) {
		c.t = t
		id := c.createConsent(consentRequest(user, "se-demo-bank", "SWEDISH_MOBILE_EID_OTHER_DEVICE", "199001010017"))
		st := c.waitConsentStatus(id, 10*time.Second, func(st consentStatusBody) bool { return st.Status != "INITIATED" })
		if st.Status != "AWAITING_AUTHORIZATION" || !strings.HasPrefix(st.AuthInstructions["qrData"], "bankid.") || st.AuthInstructions["autoStartToken"] == "" {
			t.Fatalf("awaiting: %+v", st)
		}
		c.signConsent(id)
		st = c.waitConsentStatus(id, 10*time.Second, consentSettled)
		if st.Status != "AUTHORIZED" || st.ExpiresAt == nil || len(st.AuthInstructions) != 0 {
			t.Fatalf("after the signature: %+v", st)
		}
		// expiresAt is the authorization plus SAMLA_CONSENT_VALIDITY (180 days by default).
		if d := time.Until(*st.ExpiresAt); d < 180*24*time.Hour-time.Minute || d > 180*24*time.Hour {
			t.Fatalf("expiresAt %s is %s away", st.ExpiresAt, d)
		}
	})
	for _, tc := range []struct{ pn, status, code string }{
		{"191212121212", "AUTHORIZED", ""},
		{"199001010090", "FAILED", "AUTHENTICATION_CANCELLED"},
		{"199001010108", "FAILED", "AUTHENTICATION_TIMEOUT"},
		{"199001010082", "FAILED", "AUTHENTICATION_MISMATCH"},
		{"199001010116", "FAILED", "AUTHENTICATION_CONFLICT"},
		{"199001010157", "FAILED", "THIRD_PARTY_ERROR"},
	} {
		t.Run("mock "+tc.pn, func(t *testing.T) {
			c.t = t
			id := c.createConsent(consentRequest(user, "se-demo-bank", "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", tc.pn))
			st := c.waitConsentStatus(id, 10*time.Second, consentSettled)
			if st.Status != tc.status || (tc.code != "" && (st.Error == nil || st.Error.Code != tc.code || st.Error.Message == "")) {
				t.Fatalf("consent %+v %+v, want %s %s", st, st.Error, tc.status, tc.code)
			}
		})
	}
	c.t = t

	res, err := http.Get("http://" + svc.OpsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	for _, want := range []string{
		`samla_connector_consent_outcomes_total{code="",company="se-demo-bank",status="AUTHORIZED"} 2`,
		`samla_connector_consent_outcomes_total{code="AUTHENTICATION_TIMEOUT",company="se-demo-bank",status="FAILED"} 1`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, pn := range []string{"199001010017", "191212121212", "199001010090"} {
		if strings.Contains(string(b), pn) {
			t.Errorf("a personal number is in the metrics")
		}
	}
}

// TestConsentExpiryAfterRestartEndToEnd: an authorized consent's expiresAt passes while the
// service is down; the restarted connector records consent.expired at once, from the expiry in
// the consent's events.
func TestConsentExpiryAfterRestartEndToEnd(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.ConsentValidity = 3 * time.Second
	svc := start(t, cfg)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	user := c.createUser("consent-expiry-e2e")
	id := c.createConsent(consentRequest(user, "se-demo-bank", "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", "199001010017"))
	st := c.waitConsentStatus(id, 10*time.Second, consentSettled)
	if st.Status != "AUTHORIZED" || st.ExpiresAt == nil {
		t.Fatalf("%+v", st)
	}
	stop(t, svc)

	time.Sleep(time.Until(*st.ExpiresAt) + 500*time.Millisecond)
	restarted := time.Now()
	cfg = testConfig(t, dir)
	cfg.ConsentValidity = 3 * time.Second
	svc = start(t, cfg)
	defer stop(t, svc)
	c.base = "http://" + svc.HTTPAddr()

	// The status reads EXPIRED at once (expiresAt passed); the event is the worker's.
	if st := c.waitConsentStatus(id, 5*time.Second, consentSettled); st.Status != "EXPIRED" {
		t.Fatalf("after the restart: %+v", st)
	}
	repo := repository.New(svc.store, svc.registry, consent.Kind, repository.WithKeys(svc.keys))
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := repo.Load(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status() == consent.StatusExpired {
			if got.EndedAt().Before(restarted) || got.EndedAt().Before(got.ExpiresAt()) {
				t.Fatalf("expired at %s; expiresAt %s, the restart at %s", got.EndedAt(), got.ExpiresAt(), restarted)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no consent.expired after the restart: %s", got.Status())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The read model follows the event.
	code, _, b := c.consentCall("GET", "/consents/"+id, nil, nil)
	if code != http.StatusOK || !strings.Contains(string(b), `"status":"EXPIRED"`) {
		t.Fatalf("GET /consents/%s = %d %s", id, code, b)
	}
}
