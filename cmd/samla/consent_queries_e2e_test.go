package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The consent queries over HTTP, as a client reads them from the consents read model: a consent
// and its status poll, a user's consents page by page, what another client and another user's
// session see, a revocation showing, and the consents counted by status in the metrics.

// consentView is GET /consents/{consentId} and an item of a user's consents.
type consentView struct {
	ConsentID    string          `json:"consentId"`
	UserUUID     string          `json:"userUuid"`
	Company      string          `json:"company"`
	Status       string          `json:"status"`
	Scope        []string        `json:"scope"`
	CreatedAt    string          `json:"createdAt"`
	AuthorizedAt *string         `json:"authorizedAt"`
	ExpiresAt    *string         `json:"expiresAt"`
	Error        json.RawMessage `json:"error"`
}

// readConsent waits until the read model shows the consent (a moment after POST /consents), and
// until done holds, and returns it.
func (c apiClient) readConsent(id string, done func(consentView) bool) consentView {
	c.t.Helper()
	var got consentView
	c.waitFor("consent "+id, func() bool {
		code, _, b := c.consentCall("GET", "/consents/"+id, nil, nil)
		if code == http.StatusNotFound {
			return false
		}
		if code != http.StatusOK {
			c.t.Fatalf("GET /consents/%s = %d %s", id, code, b)
		}
		got = consentView{}
		if err := json.Unmarshal(b, &got); err != nil {
			c.t.Fatal(err)
		}
		return done(got)
	})
	return got
}

func TestConsentQueriesEndToEnd(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	svc := start(t, cfg)
	defer stop(t, svc)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	alice, bob := c.createUser("alice-consent-queries"), c.createUser("bob-consent-queries")

	// Three consents of alice's (each for another person: one EID order per person at a time),
	// the second with a scope of two, asked for in another order; one of bob's.
	var ids []string
	for i, number := range []string{"199001010017", "191212121212", "199001010025"} {
		body := consentRequest(alice, "se-demo-bank", consentLogin, number)
		if i == 1 {
			body["scope"] = []string{"SAVINGS_ACCOUNTS", "CHECKING_ACCOUNTS"}
		}
		ids = append(ids, c.createConsent(body))
	}
	bobs := c.createConsent(consentRequest(bob, "se-demo-bank", consentLogin, "199001010033"))

	live := func(v consentView) bool { return v.Status == "INITIATED" || v.Status == "AWAITING_AUTHORIZATION" }
	for i, id := range ids {
		v := c.readConsent(id, func(consentView) bool { return true })
		scope := []string{"CHECKING_ACCOUNTS", "CREDIT_CARDS", "SAVINGS_ACCOUNTS"}
		if i == 1 {
			scope = []string{"CHECKING_ACCOUNTS", "SAVINGS_ACCOUNTS"}
		}
		if v.ConsentID != id || v.UserUUID != alice || v.Company != "se-demo-bank" || !live(v) || !slices.Equal(v.Scope, scope) ||
			v.CreatedAt == "" || v.AuthorizedAt != nil || v.ExpiresAt != nil || v.Error != nil {
			t.Fatalf("consent %d: %+v", i, v)
		}
	}
	c.readConsent(bobs, func(consentView) bool { return true })

	// The status poll: the consent's status and scope, how often to poll, and while it awaits
	// its authorization the animated QR data (computed at the poll; its secret never shows).
	qrData := regexp.MustCompile(`^bankid\.[^.]+\.[0-9]+\.[0-9a-f]{64}$`)
	code, _, b := c.consentCall("GET", "/consents/"+ids[0]+"/status", nil, nil)
	if code != http.StatusOK {
		t.Fatalf("GET status = %d %s", code, b)
	}
	var st struct {
		ConsentID        string            `json:"consentId"`
		Status           string            `json:"status"`
		Scope            []string          `json:"scope"`
		AuthInstructions map[string]string `json:"authInstructions"`
		PollingInterval  int               `json:"pollingInterval"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.ConsentID != ids[0] || len(st.Scope) != 3 || st.PollingInterval != 1000 || strings.Contains(strings.ToLower(string(b)), "secret") {
		t.Fatalf("status %s", b)
	}
	switch st.Status {
	case "INITIATED":
		if st.AuthInstructions != nil {
			t.Fatalf("an initiated consent has instructions: %s", b)
		}
	case "AWAITING_AUTHORIZATION":
		if !qrData.MatchString(st.AuthInstructions["qrData"]) {
			t.Fatalf("awaiting without QR data: %s", b)
		}
	default:
		t.Fatalf("status %s", b)
	}

	// Alice's consents, newest first, two to a page; bob's are not among them.
	var listed []string
	path := "/users/" + alice + "/consents?limit=2"
	for pages := 0; ; pages++ {
		code, _, b := c.consentCall("GET", path, nil, nil)
		if code != http.StatusOK || pages > 2 {
			t.Fatalf("GET %s = %d %s", path, code, b)
		}
		var page struct {
			Items      []consentView `json:"items"`
			NextCursor string        `json:"nextCursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			listed = append(listed, it.ConsentID)
		}
		if page.NextCursor == "" {
			break
		}
		path = "/users/" + alice + "/consents?limit=2&cursor=" + url.QueryEscape(page.NextCursor)
	}
	if want := []string{ids[2], ids[1], ids[0]}; !slices.Equal(listed, want) {
		t.Fatalf("alice's consents %v, want %v", listed, want)
	}

	// Older versions have no consents; another client has none of these, nor alice.
	for _, p := range []string{"/consents/" + ids[0], "/consents/" + ids[0] + "/status", "/users/" + alice + "/consents"} {
		if code, problem, b := c.consentCall("GET", p, nil, map[string]string{"Service-Version": "2025-01-01"}); code != http.StatusNotFound || problem != "NOT_FOUND" {
			t.Errorf("GET %s in 2025-01-01 = %d %s", p, code, b)
		}
	}
	otherKey, err := CreateClient(context.Background(), cfg, testLogger(t), "consent-queries-other", "Other")
	if err != nil {
		t.Fatal(err)
	}
	other := apiClient{t: t, base: c.base, key: otherKey}
	waitAuthenticated(t, other)
	for _, p := range []string{"/consents/" + ids[0], "/consents/" + ids[0] + "/status"} {
		if code, problem, b := other.consentCall("GET", p, nil, nil); code != http.StatusNotFound || problem != "CONSENT_NOT_FOUND" {
			t.Errorf("another client's GET %s = %d %s", p, code, b)
		}
	}
	if code, problem, b := other.consentCall("GET", "/users/"+alice+"/consents", nil, nil); code != http.StatusNotFound || problem != "USER_NOT_FOUND" {
		t.Errorf("another client's list of alice's consents = %d %s", code, b)
	}

	// Alice's session reads her consents; bob's is refused them.
	aliceToken, _ := c.createSession(alice)
	bobToken, _ := c.createSession(bob)
	for _, p := range []string{"/consents/" + ids[0], "/consents/" + ids[0] + "/status", "/users/" + alice + "/consents"} {
		c.session(aliceToken).expect("GET", p, nil, http.StatusOK, "")
		c.session(bobToken).expect("GET", p, nil, http.StatusForbidden, "FORBIDDEN_FOR_SESSION")
	}
	c.session(aliceToken).expect("GET", "/consents/"+bobs, nil, http.StatusForbidden, "FORBIDDEN_FOR_SESSION")

	// A revocation shows in the read model, and the poll then carries no instructions.
	if code, _, b := c.consentCall("DELETE", "/consents/"+ids[1], nil, nil); code != http.StatusOK {
		t.Fatalf("DELETE = %d %s", code, b)
	}
	c.readConsent(ids[1], func(v consentView) bool { return v.Status == "REVOKED" })
	if code, _, b := c.consentCall("GET", "/consents/"+ids[1]+"/status", nil, nil); code != http.StatusOK ||
		strings.Contains(string(b), "authInstructions") || !strings.Contains(string(b), `"status":"REVOKED"`) {
		t.Fatalf("revoked status = %d %s", code, b)
	}

	// Deleting bob revokes his consent, as the read model then shows.
	if code, _, b := c.userCall("DELETE", "/users/"+bob, nil, nil); code != http.StatusNoContent {
		t.Fatalf("DELETE /users = %d %s", code, b)
	}
	c.readConsent(bobs, func(v consentView) bool { return v.Status == "REVOKED" })

	// The consents by status and company, counted once each.
	counted := func(status string) float64 {
		res, err := http.Get("http://" + svc.OpsAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		m := regexp.MustCompile(`(?m)^samla_consent_status_changes_total\{company="se-demo-bank",status="` + status + `"\} ([0-9.e+]+)$`).FindSubmatch(body)
		if m == nil {
			return 0
		}
		n, _ := strconv.ParseFloat(string(m[1]), 64)
		return n
	}
	if n := counted("INITIATED"); n != 4 {
		t.Errorf("%v consents counted INITIATED, want 4", n)
	}
	if n := counted("REVOKED"); n != 2 {
		t.Errorf("%v consents counted REVOKED, want 2", n)
	}
}
