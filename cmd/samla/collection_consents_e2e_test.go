package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/clients"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/personnummer"
)

// Collections that use consents, over HTTP as a client drives them: consents authorized through
// the sandbox bank (the MOCK login, and a signature with POST /sandbox/eid/sign), collections at
// the bank with Psd2AisConsentParameter reading exactly the PSD2 products of the consent's scope,
// reuseStoredConsent, every CONSENT_INVALID reason, NO_STORED_CONSENT, CONSENT_NOT_SUPPORTED,
// and a consent revoked while its collection runs.

const (
	mockLogin = "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK"
	tolvanPN  = "191212121212"
)

// scopedConsent asks for a consent of user at the bank with scope and waits until it is
// authorized: by itself with the MOCK login, or signed with POST /sandbox/eid/sign on the other
// device.
func (c apiClient) scopedConsent(user, login string, scope ...string) string {
	c.t.Helper()
	body := consentRequest(user, "se-demo-bank", login, tolvanPN)
	if len(scope) > 0 {
		body["scope"] = scope
	}
	id := c.createConsent(body)
	if login != mockLogin {
		c.waitConsentStatus(id, 10*time.Second, func(st consentStatusBody) bool { return st.Status == "AWAITING_AUTHORIZATION" })
		c.signConsent(id)
	}
	if st := c.waitConsentStatus(id, 10*time.Second, consentSettled); st.Status != "AUTHORIZED" {
		c.t.Fatalf("consent %s ended %+v", id, st)
	}
	return id
}

// bankCollection is a 2026-04-01 start at the bank for user with a Psd2AisConsentParameter
// (none when consentParam is nil).
func bankCollection(user, login string, consentParam map[string]any) map[string]any {
	params := []map[string]any{{"type": "SwedishPersonalNumberParameter", "personalNumber": tolvanPN}}
	if consentParam != nil {
		params = append(params, consentParam)
	}
	b := map[string]any{"company": "se-demo-bank", "loginMethod": login, "parameters": params}
	if user != "" {
		b["userUuid"] = user
	}
	return b
}

func useConsent(id string) map[string]any {
	return map[string]any{"type": "Psd2AisConsentParameter", "consentId": id, "reuseStoredConsent": false}
}

// useConsentAlone names the consent without reuseStoredConsent, as API.md's Consents section
// spells it: the flag reads false.
func useConsentAlone(id string) map[string]any {
	return map[string]any{"type": "Psd2AisConsentParameter", "consentId": id}
}

var reuseStored = map[string]any{"type": "Psd2AisConsentParameter", "reuseStoredConsent": true}

// startBank starts a collection and returns its id, failing unless it was created.
func (c apiClient) startBank(body map[string]any) string {
	c.t.Helper()
	code, _, b := c.consentCall("POST", "/collections", body, nil)
	if code != http.StatusCreated {
		c.t.Fatalf("POST /collections = %d %s", code, b)
	}
	var out struct{ CollectionID string }
	if err := json.Unmarshal(b, &out); err != nil || out.CollectionID == "" {
		c.t.Fatalf("created %s (%v)", b, err)
	}
	return out.CollectionID
}

// refused expects a 422 problem with code and, for CONSENT_INVALID, reason.
func (c apiClient) refused(body map[string]any, code, reason string) {
	c.t.Helper()
	status, problem, b := c.consentCall("POST", "/collections", body, nil)
	var p struct{ Reason string }
	_ = json.Unmarshal(b, &p)
	if status != http.StatusUnprocessableEntity || problem != code || p.Reason != reason {
		c.t.Errorf("POST /collections = %d %s, want 422 %s %s", status, b, code, reason)
	}
}

// psd2Counts are the numbers of checking accounts, savings accounts, credit cards, loans and
// savings in a finished bank collection's data; a product absent from it (unknown: not read)
// counts -1, and null is refused.
func (c apiClient) psd2Counts(id string) [5]int {
	c.t.Helper()
	code, out, _ := c.data("/collections/"+id+"/wealth/data", v2)
	if code != http.StatusOK {
		c.t.Fatalf("wealth data = %d %v", code, out)
	}
	var n [5]int
	for i, k := range []string{"psd2CheckingAccounts", "psd2SavingsAccounts", "psd2CreditCards", "loans", "savings"} {
		v, present := out[k]
		if !present {
			n[i] = -1
			continue
		}
		l, ok := v.([]any)
		if !ok {
			c.t.Fatalf("%s is %v", k, v)
		}
		n[i] = len(l)
	}
	return n
}

// auditedConsent is the consent the audit history shows on the collection's start.
func (c apiClient) auditedConsent(id string) (string, []string) {
	c.t.Helper()
	h := c.history(id)
	var started struct {
		Consent struct {
			ConsentID string   `json:"consentId"`
			Scope     []string `json:"scope"`
		} `json:"consent"`
	}
	if len(h.Events) == 0 || h.Events[0].Type != "collection.started" || json.Unmarshal(h.Events[0].Payload, &started) != nil {
		c.t.Fatalf("audit history %+v", h)
	}
	return started.Consent.ConsentID, started.Consent.Scope
}

func TestCollectionsWithConsentsEndToEnd(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.EIDOrderTimeout = 10 * time.Second
	svc := start(t, cfg)
	defer stop(t, svc)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	alice, bob, carol := c.createUser("alice-psd2"), c.createUser("bob-psd2"), c.createUser("carol-psd2")

	// Two consents of alice: checking accounts and cards (MOCK), then savings accounts, signed on
	// the other device; the second is the newest.
	checkingAndCards := c.scopedConsent(alice, mockLogin, "CHECKING_ACCOUNTS", "CREDIT_CARDS")
	savingsOnly := c.scopedConsent(alice, consentLogin, "SAVINGS_ACCOUNTS")

	t.Run("a named consent: the PSD2 products of its scope, and the audit shows it", func(t *testing.T) {
		c.t = t
		for _, param := range []map[string]any{useConsent(checkingAndCards), useConsentAlone(checkingAndCards)} {
			id := c.startBank(bankCollection(alice, mockLogin, param))
			if st := c.waitStatus(id, 20*time.Second, finalStatus); st.Status != "COMPLETED" {
				t.Fatalf("%v: ended %+v", param, st)
			}
			if got := c.psd2Counts(id); got != [5]int{1, -1, 2, 2, 2} {
				t.Fatalf("%v: checking, savings accounts, cards, loans, savings: %v", param, got)
			}
			if used, scope := c.auditedConsent(id); used != checkingAndCards || len(scope) != 2 {
				t.Fatalf("%v: the audit shows consent %q %v", param, used, scope)
			}
		}
	})
	t.Run("reuseStoredConsent: the user's newest usable consent", func(t *testing.T) {
		c.t = t
		id := c.startBank(bankCollection(alice, mockLogin, reuseStored))
		if st := c.waitStatus(id, 20*time.Second, finalStatus); st.Status != "COMPLETED" {
			t.Fatalf("ended %+v", st)
		}
		if got := c.psd2Counts(id); got != [5]int{-1, 2, -1, 2, 2} {
			t.Fatalf("checking, savings accounts, cards, loans, savings: %v", got)
		}
		if used, _ := c.auditedConsent(id); used != savingsOnly {
			t.Fatalf("the audit shows consent %q, want %s", used, savingsOnly)
		}
	})
	t.Run("the user's own session uses its consent", func(t *testing.T) {
		c.t = t
		token, _ := c.createSession(alice)
		s := c.session(token)
		s.expect("POST", "/collections", bankCollection(alice, mockLogin, useConsent(checkingAndCards)), http.StatusCreated, "")
		s.expect("POST", "/collections", bankCollection(bob, mockLogin, useConsent(checkingAndCards)), http.StatusForbidden, "FORBIDDEN_FOR_SESSION")
	})
	t.Run("without a consent: no PSD2 product", func(t *testing.T) {
		c.t = t
		id := c.startBank(bankCollection(alice, mockLogin, nil))
		if st := c.waitStatus(id, 20*time.Second, finalStatus); st.Status != "COMPLETED" {
			t.Fatalf("ended %+v", st)
		}
		if got := c.psd2Counts(id); got != [5]int{-1, -1, -1, 2, 2} {
			t.Fatalf("checking, savings accounts, cards, loans, savings: %v", got)
		}
	})

	t.Run("every CONSENT_INVALID reason", func(t *testing.T) {
		c.t = t
		// NOT_AUTHORIZED: unknown, still awaiting its signature, failed, another client's.
		c.refused(bankCollection(alice, mockLogin, useConsent(uuid.NewString())), "CONSENT_INVALID", "NOT_AUTHORIZED")
		// (Another person's EID order: an open order of the persona would conflict with the
		// collection's login below.)
		pending := c.createConsent(consentRequest(alice, "se-demo-bank", consentLogin, "199001010017"))
		c.refused(bankCollection(alice, mockLogin, useConsent(pending)), "CONSENT_INVALID", "NOT_AUTHORIZED")
		failed := c.createConsent(consentRequest(alice, "se-demo-bank", mockLogin, "199001010090"))
		if st := c.waitConsentStatus(failed, 10*time.Second, consentSettled); st.Status != "FAILED" {
			t.Fatalf("consent of the cancelling persona %+v", st)
		}
		c.refused(bankCollection(alice, mockLogin, useConsent(failed)), "CONSENT_INVALID", "NOT_AUTHORIZED")

		otherKey, err := CreateClient(context.Background(), cfg, testLogger(t), "psd2-other", "Other")
		if err != nil {
			t.Fatal(err)
		}
		other := apiClient{t: t, base: c.base, key: otherKey}
		waitAuthenticated(t, other)
		dave := other.createUser("dave-psd2")
		other.refused(bankCollection(dave, mockLogin, useConsent(checkingAndCards)), "CONSENT_INVALID", "NOT_AUTHORIZED")

		// REVOKED.
		revoked := c.scopedConsent(alice, mockLogin)
		if code, _, b := c.consentCall("DELETE", "/consents/"+revoked, nil, nil); code != http.StatusOK {
			t.Fatalf("DELETE = %d %s", code, b)
		}
		c.refused(bankCollection(alice, mockLogin, useConsent(revoked)), "CONSENT_INVALID", "REVOKED")

		// OTHER_USER.
		bobs := c.scopedConsent(bob, mockLogin)
		c.refused(bankCollection(alice, mockLogin, useConsent(bobs)), "CONSENT_INVALID", "OTHER_USER")
		// OTHER_USER too: alice's consent signed for another person than the collection logs in
		// as (tolvan), lest one person's accounts land next to another's loans.
		anothers := c.createConsent(consentRequest(alice, "se-demo-bank", mockLogin, "199001010058"))
		if st := c.waitConsentStatus(anothers, 10*time.Second, consentSettled); st.Status != "AUTHORIZED" {
			t.Fatalf("consent of another person %+v", st)
		}
		c.refused(bankCollection(alice, mockLogin, useConsent(anothers)), "CONSENT_INVALID", "OTHER_USER")

		// OTHER_COMPANY: the sandbox has one company with consents, so this consent of alice's at
		// the pension company is recorded as a catalog in which that company gave consents
		// would have recorded it.
		elsewhere := recordAuthorizedConsent(t, svc, alice, consent.Company{ID: "se-demo-pension", Consents: true,
			LoginMethods: []string{mockLogin}})
		c.refused(bankCollection(alice, mockLogin, useConsent(elsewhere)), "CONSENT_INVALID", "OTHER_COMPANY")
	})
	t.Run("NO_STORED_CONSENT, CONSENT_NOT_SUPPORTED and a consent without its user", func(t *testing.T) {
		c.t = t
		c.refused(bankCollection(carol, mockLogin, reuseStored), "NO_STORED_CONSENT", "")
		// Only revoked ones count as none.
		carols := c.scopedConsent(carol, mockLogin)
		if code, _, b := c.consentCall("DELETE", "/consents/"+carols, nil, nil); code != http.StatusOK {
			t.Fatalf("DELETE = %d %s", code, b)
		}
		c.refused(bankCollection(carol, mockLogin, reuseStored), "NO_STORED_CONSENT", "")

		pension := bankCollection(alice, mockLogin, useConsent(checkingAndCards))
		pension["company"] = "se-demo-pension"
		c.refused(pension, "CONSENT_NOT_SUPPORTED", "")

		code, problem, b := c.consentCall("POST", "/collections", bankCollection("", mockLogin, useConsent(checkingAndCards)), nil)
		if code != http.StatusBadRequest || problem != "VALIDATION_FAILED" {
			t.Errorf("a consent without userUuid = %d %s", code, b)
		}
	})
	t.Run("revoked while the collection runs: COMPLETED_PARTIAL without PSD2", func(t *testing.T) {
		c.t = t
		k := c.scopedConsent(alice, mockLogin)
		// The other-device login waits for the signature: the consent is revoked meanwhile.
		id := c.startBank(bankCollection(alice, "SWEDISH_MOBILE_EID_OTHER_DEVICE", useConsent(k)))
		c.waitStatus(id, 10*time.Second, is("WAITING_FOR_USER_ACTION"))
		if code, _, b := c.consentCall("DELETE", "/consents/"+k, nil, nil); code != http.StatusOK {
			t.Fatalf("DELETE = %d %s", code, b)
		}
		if code, raw, _ := c.do("POST", "/sandbox/eid/sign", map[string]string{"collectionId": id}, nil); code/100 != 2 {
			t.Fatalf("sign = %d %s", code, raw)
		}
		if st := c.waitStatus(id, 20*time.Second, finalStatus); st.Status != "COMPLETED_PARTIAL" {
			t.Fatalf("ended %+v", st)
		}
		if got := c.psd2Counts(id); got != [5]int{-1, -1, -1, 2, 2} {
			t.Fatalf("checking, savings accounts, cards, loans, savings: %v", got)
		}
	})
}

// TestExpiredConsentEndToEnd: a consent past its expiry is CONSENT_INVALID EXPIRED, whether or
// not its expiry was recorded yet, and no stored consent for reuse.
func TestExpiredConsentEndToEnd(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.ConsentValidity = 2 * time.Second
	svc := start(t, cfg)
	defer stop(t, svc)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	alice := c.createUser("alice-expiring")
	k := c.scopedConsent(alice, mockLogin)
	st := c.waitConsentStatus(k, 10*time.Second, consentSettled)
	time.Sleep(time.Until(*st.ExpiresAt) + 50*time.Millisecond)
	c.refused(bankCollection(alice, mockLogin, useConsent(k)), "CONSENT_INVALID", "EXPIRED")
	c.refused(bankCollection(alice, mockLogin, reuseStored), "NO_STORED_CONSENT", "")
}

// recordAuthorizedConsent records, through the consents' repository, an authorized consent of
// the test client's user at company, and returns its id.
func recordAuthorizedConsent(t *testing.T, svc *Service, userUUID string, company consent.Company) string {
	t.Helper()
	pn, err := personnummer.Parse(tolvanPN, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	id, now := uuid.NewString(), time.Now()
	repo := repository.New(svc.store, svc.registry, consent.Kind, repository.WithKeys(svc.keys))
	if _, _, err := repo.Update(context.Background(), id, repository.Meta{Tenant: clients.SandboxClientID, Actor: "test"}, func(k *consent.Consent) error {
		if err := k.Create(consent.CreateRequest{ConsentID: id, ClientID: clients.SandboxClientID, UserUUID: userUUID, Company: company,
			LoginMethod: mockLogin, PersonalNumber: pn, RequestHash: "h"}, now); err != nil {
			return err
		}
		if err := k.StartAuthorization(consent.AuthorizationOrder{BankConsentID: "bank-" + id, StartedAt: now,
			Deadline: now.Add(time.Minute)}, now); err != nil {
			return err
		}
		return k.Authorize(now, time.Hour)
	}, repository.NewID()); err != nil {
		t.Fatal(err)
	}
	return id
}
