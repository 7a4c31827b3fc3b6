package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/consent"
)

// The consent commands over HTTP, as a client drives them: POST /consents and its every refusal,
// DELETE /consents/{consentId} and its refusals, a user's session on its own and another user's
// consents, another client's consents, and a user's deletion revoking the user's consents.

// consentCall sends a consent request (2026-04-01 unless headers say otherwise) and returns the
// status, the problem code ("" for none) and the body.
func (c apiClient) consentCall(method, path string, body any, headers map[string]string) (int, string, []byte) {
	c.t.Helper()
	h := map[string]string{"Service-Version": v2}
	for k, v := range headers {
		h[k] = v
	}
	code, b, _ := c.do(method, path, body, h)
	return code, problemCodeOf(b), b
}

func consentRequest(user, company, loginMethod, personalNumber string) map[string]any {
	return map[string]any{"userUuid": user, "company": company, "loginMethod": loginMethod,
		"parameters": []map[string]any{{"type": "SwedishEidParameter", "personalNumber": personalNumber}}}
}

// The EID login that waits for the user to sign: the consent stays pending whatever the
// connector does meanwhile, so that revoking it is always possible here.
const consentLogin = "SWEDISH_MOBILE_EID_OTHER_DEVICE"

func (c apiClient) createConsent(body map[string]any) string {
	c.t.Helper()
	code, _, b := c.consentCall("POST", "/consents", body, nil)
	if code != http.StatusCreated {
		c.t.Fatalf("POST /consents = %d %s", code, b)
	}
	var out map[string]string
	if err := json.Unmarshal(b, &out); err != nil || out["status"] != "INITIATED" || out["consentId"] == "" || len(out) != 2 {
		c.t.Fatalf("created consent %s (%v)", b, err)
	}
	return out["consentId"]
}

func TestConsentCommandsEndToEnd(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	svc := start(t, cfg)
	defer stop(t, svc)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	alice, bob := c.createUser("alice-consents"), c.createUser("bob-consents")

	// Created: 201 INITIATED; with the user's own session too.
	id := c.createConsent(consentRequest(alice, "se-demo-bank", consentLogin, "199001010017"))
	aliceToken, _ := c.createSession(alice)
	s := c.session(aliceToken)
	// Another person's number: the connector opens each consent's EID order at once, and a second
	// order for the same person would abort both (as the real provider does).
	code, _, body := s.call("POST", "/consents", consentRequest(alice, "se-demo-bank", consentLogin, "191212121212"))
	if code != http.StatusCreated {
		t.Fatalf("POST /consents with alice's session = %d %s", code, body)
	}
	bobConsent := c.createConsent(consentRequest(bob, "se-demo-bank", consentLogin, "198001010019"))

	// Every refusal, and none records anything.
	withScope := consentRequest(alice, "se-demo-bank", consentLogin, "199001010017")
	withScope["scope"] = []string{"CHECKING_ACCOUNTS", "MORTGAGES"}
	for _, tc := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"a bad personal number", consentRequest(alice, "se-demo-bank", consentLogin, "199001010018"), 400, "VALIDATION_FAILED"},
		{"an unknown scope", withScope, 400, "VALIDATION_FAILED"},
		{"a bad body", map[string]any{"userUuid": alice, "company": "se-demo-bank"}, 400, "VALIDATION_FAILED"},
		{"an unknown company", consentRequest(alice, "se-nowhere", consentLogin, "199001010017"), 400, "VALIDATION_FAILED"},
		{"a company without consents", consentRequest(alice, "se-demo-insurer", consentLogin, "199001010017"), 422, "CONSENT_NOT_SUPPORTED"},
		{"a login method the company lacks", consentRequest(alice, "se-demo-bank", "PDF_UPLOAD", "199001010017"), 422, "LOGIN_METHOD_NOT_APPLICABLE"},
		{"an unknown user", consentRequest("0190f4a2-1111-7b3a-9a51-2f1e3d4c5b6a", "se-demo-bank", consentLogin, "199001010017"), 422, "UNKNOWN_USER"},
	} {
		if code, problem, b := c.consentCall("POST", "/consents", tc.body, nil); code != tc.status || problem != tc.code {
			t.Errorf("%s: POST /consents = %d %s, want %d %s", tc.name, code, b, tc.status, tc.code)
		}
	}
	if code, problem, b := c.consentCall("POST", "/consents", consentRequest(alice, "se-demo-bank", consentLogin, "199001010017"),
		map[string]string{"Service-Version": "2025-01-01"}); code != http.StatusNotFound || problem != "NOT_FOUND" {
		t.Errorf("POST /consents in 2025-01-01 = %d %s", code, b)
	}
	if code, problem, b := c.consentCall("DELETE", "/consents/"+id, nil, map[string]string{"Service-Version": "2025-01-01"}); code != http.StatusNotFound || problem != "NOT_FOUND" {
		t.Errorf("DELETE /consents in 2025-01-01 = %d %s", code, b)
	}

	// Another user's consent, with alice's session: 403 on both routes.
	s.expect("POST", "/consents", consentRequest(bob, "se-demo-bank", consentLogin, "198001010019"), http.StatusForbidden, "FORBIDDEN_FOR_SESSION")
	s.expect("DELETE", "/consents/"+bobConsent, nil, http.StatusForbidden, "FORBIDDEN_FOR_SESSION")

	// Another client's consent does not exist for this one.
	otherKey, err := CreateClient(context.Background(), cfg, testLogger(t), "consents-other", "Other")
	if err != nil {
		t.Fatal(err)
	}
	other := apiClient{t: t, base: c.base, key: otherKey}
	waitAuthenticated(t, other)
	if code, problem, b := other.consentCall("DELETE", "/consents/"+id, nil, nil); code != http.StatusNotFound || problem != "CONSENT_NOT_FOUND" {
		t.Fatalf("another client's DELETE = %d %s", code, b)
	}

	// Revoked: 200 with the consent, REVOKED; once final, 409.
	code, _, body = c.consentCall("DELETE", "/consents/"+id, nil, nil)
	if code != http.StatusOK {
		t.Fatalf("DELETE /consents = %d %s", code, body)
	}
	var revoked map[string]any
	if err := json.Unmarshal(body, &revoked); err != nil {
		t.Fatal(err)
	}
	if revoked["consentId"] != id || revoked["userUuid"] != alice || revoked["company"] != "se-demo-bank" || revoked["status"] != "REVOKED" ||
		revoked["createdAt"] == nil || len(revoked["scope"].([]any)) != 3 {
		t.Fatalf("DELETE answered %s", body)
	}
	if code, problem, b := c.consentCall("DELETE", "/consents/"+id, nil, nil); code != http.StatusConflict || problem != "CONSENT_FINAL" {
		t.Fatalf("DELETE again = %d %s", code, b)
	}

	// Deleting bob revokes bob's consent (USER_DELETED), before his key goes.
	if code, _, b := c.userCall("DELETE", "/users/"+bob, nil, nil); code != http.StatusNoContent {
		t.Fatalf("DELETE /users = %d %s", code, b)
	}
	got, err := repository.New(svc.store, svc.registry, consent.Kind, repository.WithKeys(svc.keys)).Load(context.Background(), bobConsent)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status() != consent.StatusRevoked || got.RevokeReason() != consent.RevokedUserDeleted || got.PersonalNumber() != nil {
		t.Fatalf("bob's consent after his deletion: %s %s, personal number erased %v", got.Status(), got.RevokeReason(), got.PersonalNumber() == nil)
	}
	if code, problem, b := c.consentCall("DELETE", "/consents/"+bobConsent, nil, nil); code != http.StatusConflict || problem != "CONSENT_FINAL" {
		t.Fatalf("DELETE of the deleted user's consent = %d %s", code, b)
	}
}
