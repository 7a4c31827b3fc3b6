package sandbox_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/samla/samla/connectors/sandbox"
)

const bank = "se-demo-bank"

var allScopes = []string{"CHECKING_ACCOUNTS", "SAVINGS_ACCOUNTS", "CREDIT_CARDS"}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// bankConsent is a consent at the demo bank, seen through its HTTP API.
type bankConsent struct {
	t     *testing.T
	sb    *sandbox.Sandbox
	clock *fakeClock
	url   string
	id    string
	body  map[string]any
}

func consentRequest(pn, method, ref string, scope ...string) map[string]any {
	if scope == nil {
		scope = allScopes
	}
	return map[string]any{"personalNumber": pn, "loginMethod": method, "reference": ref, "scope": scope}
}

func askConsent(t *testing.T, sb *sandbox.Sandbox, clock *fakeClock, body map[string]any) *bankConsent {
	t.Helper()
	a := call(t, "POST", sb.BaseURL(bank)+"/v1/consents", body, nil)
	if a.status != 201 {
		t.Fatalf("create consent: %d %v", a.status, a.body)
	}
	id := a.body["consentId"].(string)
	if a.header.Get("Location") == "" {
		t.Error("no Location")
	}
	return &bankConsent{t: t, sb: sb, clock: clock, url: sb.BaseURL(bank) + "/v1/consents/" + id, id: id, body: a.body}
}

func (c *bankConsent) poll() map[string]any {
	c.t.Helper()
	a := call(c.t, "GET", c.url, nil, nil)
	if a.status != 200 {
		c.t.Fatalf("read consent: %d %v", a.status, a.body)
	}
	c.body = a.body
	return a.body
}

// expect advances the clock by d and checks the consent's status and failure reason, through
// both the consent and its status resource.
func (c *bankConsent) expect(d time.Duration, status, reason string) map[string]any {
	c.t.Helper()
	c.clock.Add(d)
	b := c.poll()
	got, _ := b["failureReason"].(string)
	if b["consentStatus"] != status || got != reason {
		c.t.Fatalf("consent %v %q, want %s %q: %v", b["consentStatus"], got, status, reason, b)
	}
	st := call(c.t, "GET", c.url+"/status", nil, nil)
	if got, _ := st.body["failureReason"].(string); st.status != 200 || st.body["consentStatus"] != status || got != reason {
		c.t.Fatalf("status resource %d %v, want %s %q", st.status, st.body, status, reason)
	}
	return b
}

func (c *bankConsent) read(path string) answer {
	c.t.Helper()
	return call(c.t, "GET", c.sb.BaseURL(bank)+"/v1/"+path, nil, map[string]string{"Consent-ID": c.id})
}

// TestConsentOfEveryPersona plays SANDBOX.md's "Consents" table with the MOCK EID (the person
// signs, or does what the persona does, after a second) and with the other-device EID, signed
// by the tester through POST /sandbox/eid/sign {"consentId"}.
func TestConsentOfEveryPersona(t *testing.T) {
	sb, clock := start(t, fast()...)
	type step struct {
		after          time.Duration
		status, reason string
	}
	authorized := []step{{0, "received", ""}, {time.Second - time.Millisecond, "received", ""}, {time.Millisecond, "valid", ""}}
	rejected := func(reason string) []step {
		return []step{{0, "received", ""}, {time.Second, "rejected", reason}}
	}
	mockCases := map[string][]step{
		"199001010017": authorized,
		"191212121212": authorized,
		"199001010041": authorized, // refused logins do not matter to a consent
		"199001010124": authorized,
		"198507099805": authorized, // any other valid number
		"199001010090": rejected("USER_CANCELLED"),
		"199001010108": {{0, "received", ""}, {30*time.Second - time.Millisecond, "received", ""}, {time.Millisecond, "rejected", "ORDER_EXPIRED"}},
		"199001010082": rejected("PSU_MISMATCH"),
		"199001010116": {{0, "rejected", "ALREADY_IN_PROGRESS"}},
		"199001010157": rejected("TECHNICAL_ERROR"),
	}
	for pn, steps := range mockCases {
		t.Run("mock "+pn, func(t *testing.T) {
			c := askConsent(t, sb, clock, consentRequest(pn, mock, "consent-mock-"+pn))
			created := clock.Now()
			var b map[string]any
			for _, st := range steps {
				b = c.expect(st.after, st.status, st.reason)
			}
			if b["consentStatus"] == "valid" {
				at, _ := time.Parse(time.RFC3339Nano, b["authorizedAt"].(string))
				until, _ := time.Parse(time.RFC3339Nano, b["validUntil"].(string))
				if !at.Equal(created.Add(time.Second)) || !until.Equal(at.Add(sandbox.DefaultConsentValidity)) {
					t.Fatalf("authorized %v until %v", at, until)
				}
			} else if b["authorizedAt"] != nil || b["validUntil"] != nil {
				t.Fatalf("a consent that is not valid has no validity: %v", b)
			}
		})
	}

	sign := func(ref string) answer {
		return call(t, "POST", sb.URL()+"/sandbox/eid/sign", map[string]string{"consentId": ref}, nil)
	}
	t.Run("other device, signed by the tester", func(t *testing.T) {
		c := askConsent(t, sb, clock, consentRequest("191212121212", otherDevice, "consent-od-1"))
		c.expect(10*time.Second, "received", "") // nobody signs by themselves
		o := c.body["eidOrder"].(map[string]any)
		for _, k := range []string{"orderRef", "autoStartToken", "qrStartToken", "qrStartSecret", "startedAt", "expiresAt"} {
			if o[k] == "" || o[k] == nil {
				t.Fatalf("eid order lacks %s: %v", k, o)
			}
		}
		if o["status"] != "pending" || c.body["reference"] != "consent-od-1" || c.body["loginMethod"] != otherDevice {
			t.Fatalf("%v", c.body)
		}
		if a := sign("consent-od-1"); a.status != 200 || a.body["status"] != "complete" {
			t.Fatalf("%d %v", a.status, a.body)
		}
		c.expect(0, "valid", "")
	})
	t.Run("other device, the user cancels", func(t *testing.T) {
		c := askConsent(t, sb, clock, consentRequest("199001010017", otherDevice, "consent-od-2"))
		if a := call(t, "POST", sb.URL()+"/sandbox/eid/cancel", map[string]string{"consentId": "consent-od-2"}, nil); a.status != 200 {
			t.Fatalf("%d %v", a.status, a.body)
		}
		c.expect(0, "rejected", "USER_CANCELLED")
	})
	for pn, want := range map[string]string{"199001010090": "USER_CANCELLED", "199001010082": "PSU_MISMATCH", "199001010157": "TECHNICAL_ERROR"} {
		t.Run("other device "+pn, func(t *testing.T) {
			ref := "consent-od-" + pn
			c := askConsent(t, sb, clock, consentRequest(pn, otherDevice, ref))
			c.expect(5*time.Second, "received", "")
			sign(ref)
			b := c.expect(0, "rejected", want)
			if pn == "199001010082" {
				user := b["eidOrder"].(map[string]any)["completionData"].(map[string]any)["user"].(map[string]any)
				if user["personalNumber"] != "199001010017" {
					t.Fatalf("the EID reports who signed: %v", user)
				}
			}
		})
	}
	t.Run("other device, the persona who never signs", func(t *testing.T) {
		c := askConsent(t, sb, clock, consentRequest("199001010108", otherDevice, "consent-od-108"))
		if a := sign("consent-od-108"); a.status != 409 || a.body["code"] != "USER_WILL_NOT_SIGN" {
			t.Fatalf("%d %v", a.status, a.body)
		}
		c.expect(30*time.Second-time.Millisecond, "received", "")
		c.expect(time.Millisecond, "rejected", "ORDER_EXPIRED")
	})
	t.Run("other device, the persona with an order running elsewhere", func(t *testing.T) {
		c := askConsent(t, sb, clock, consentRequest("199001010116", otherDevice, "consent-od-116"))
		c.expect(0, "rejected", "ALREADY_IN_PROGRESS")
	})
	t.Run("a consent and a login for the same person at once conflict", func(t *testing.T) {
		s := open(t, sb, clock, "se-demo-insurer", withRef("199001010017", otherDevice, "col-c1"))
		c := askConsent(t, sb, clock, consentRequest("199001010017", otherDevice, "consent-c1"))
		c.expect(0, "rejected", "ALREADY_IN_PROGRESS")
		s.expect(0, "FAILED", "ALREADY_IN_PROGRESS")
	})
}

func TestPSD2DataUnderAConsent(t *testing.T) {
	sb, clock := start(t, fast()...)
	n := 0
	authorized := func(t *testing.T, pn string, scope ...string) *bankConsent {
		t.Helper()
		n++
		c := askConsent(t, sb, clock, consentRequest(pn, mock, "consent-data-"+strconv.Itoa(n), scope...))
		c.expect(time.Second, "valid", "")
		return c
	}
	cashTypes := func(a answer) []string {
		var out []string
		for _, acc := range a.body["accounts"].([]any) {
			out = append(out, acc.(map[string]any)["cashAccountType"].(string))
		}
		slices.Sort(out)
		return out
	}

	t.Run("every PSD2 product of the richest persona", func(t *testing.T) {
		c := authorized(t, "191212121212")
		if a := c.read("accounts"); a.status != 200 || !slices.Equal(cashTypes(a), []string{"CACC", "SVGS", "SVGS"}) {
			t.Fatalf("accounts %d %v", a.status, a.body)
		}
		if a := c.read("card-accounts"); a.status != 200 || len(a.body["cardAccounts"].([]any)) != 2 {
			t.Fatalf("cards %d %v", a.status, a.body)
		}
	})
	t.Run("the scope decides what is served", func(t *testing.T) {
		checking := authorized(t, "191212121212", "CHECKING_ACCOUNTS")
		if a := checking.read("accounts"); a.status != 200 || !slices.Equal(cashTypes(a), []string{"CACC"}) {
			t.Fatalf("checking only: %d %v", a.status, a.body)
		}
		if a := checking.read("card-accounts"); a.status != 403 || a.body["code"] != "SERVICE_INVALID" {
			t.Fatalf("cards outside the scope: %d %v", a.status, a.body)
		}
		savings := authorized(t, "191212121212", "SAVINGS_ACCOUNTS")
		if a := savings.read("accounts"); a.status != 200 || !slices.Equal(cashTypes(a), []string{"SVGS", "SVGS"}) {
			t.Fatalf("savings only: %d %v", a.status, a.body)
		}
		cards := authorized(t, "191212121212", "CREDIT_CARDS", "CREDIT_CARDS")
		if got := toStrings(cards.body["scope"]); !slices.Equal(got, []string{"CREDIT_CARDS"}) {
			t.Fatalf("scope %v", got)
		}
		if a := cards.read("accounts"); a.status != 403 || a.body["code"] != "SERVICE_INVALID" {
			t.Fatalf("accounts outside the scope: %d %v", a.status, a.body)
		}
		if a := cards.read("card-accounts"); a.status != 200 || len(a.body["cardAccounts"].([]any)) != 2 {
			t.Fatalf("cards %d %v", a.status, a.body)
		}
	})
	t.Run("whose data: the person who authorized", func(t *testing.T) {
		c := authorized(t, "199001010017")
		a := c.read("accounts")
		accounts := a.body["accounts"].([]any)
		if len(accounts) != 1 || accounts[0].(map[string]any)["resourceId"] != "acc-010017-1" {
			t.Fatalf("%v", a.body)
		}
		empty := authorized(t, "199001010033")
		if a := empty.read("card-accounts"); a.status != 200 || len(a.body["cardAccounts"].([]any)) != 0 {
			t.Fatalf("%d %v", a.status, a.body)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		base := sb.BaseURL(bank) + "/v1/"
		if a := call(t, "GET", base+"accounts", nil, nil); a.status != 401 || a.body["code"] != "CONSENT_INVALID" {
			t.Fatalf("no Consent-ID: %d %v", a.status, a.body)
		}
		if a := call(t, "GET", base+"card-accounts", nil, map[string]string{"Consent-ID": "nope"}); a.status != 403 || a.body["code"] != "CONSENT_UNKNOWN" {
			t.Fatalf("unknown consent: %d %v", a.status, a.body)
		}
		pending := askConsent(t, sb, clock, consentRequest("199001010017", otherDevice, "consent-pending"))
		if a := pending.read("accounts"); a.status != 401 || a.body["code"] != "CONSENT_INVALID" || a.body["consentStatus"] != "received" {
			t.Fatalf("pending consent: %d %v", a.status, a.body)
		}
		call(t, "POST", sb.URL()+"/sandbox/eid/cancel", map[string]string{"consentId": "consent-pending"}, nil)
		if a := pending.read("accounts"); a.status != 401 || a.body["code"] != "CONSENT_INVALID" || a.body["consentStatus"] != "rejected" {
			t.Fatalf("rejected consent: %d %v", a.status, a.body)
		}
		revoked := authorized(t, "199001010017")
		if a := call(t, "DELETE", revoked.url, nil, nil); a.status != 204 {
			t.Fatalf("delete: %d", a.status)
		}
		revoked.expect(0, "terminatedByTpp", "")
		if a := revoked.read("card-accounts"); a.status != 401 || a.body["code"] != "CONSENT_INVALID" || a.body["consentStatus"] != "terminatedByTpp" {
			t.Fatalf("revoked consent: %d %v", a.status, a.body)
		}
		// Only a company with consents has this API; a consent is the bank's own.
		if a := call(t, "GET", sb.BaseURL("se-demo-insurer")+"/v1/accounts", nil, map[string]string{"Consent-ID": revoked.id}); a.status != 404 ||
			a.body["code"] != "PSD2_NOT_SUPPORTED" {
			t.Fatalf("insurer: %d %v", a.status, a.body)
		}
	})
	t.Run("consents expire", func(t *testing.T) {
		long := authorized(t, "199001010017")
		short := askConsent(t, sb, clock, map[string]any{"personalNumber": "199001010017", "loginMethod": mock,
			"reference": "consent-short", "scope": allScopes, "validitySeconds": 60})
		b := short.expect(time.Second, "valid", "")
		at, _ := time.Parse(time.RFC3339Nano, b["authorizedAt"].(string))
		until, _ := time.Parse(time.RFC3339Nano, b["validUntil"].(string))
		if until.Sub(at) != time.Minute {
			t.Fatalf("valid %v until %v", at, until)
		}
		short.expect(time.Minute-time.Millisecond, "valid", "")
		if a := short.read("accounts"); a.status != 200 {
			t.Fatalf("%d %v", a.status, a.body)
		}
		short.expect(time.Millisecond, "expired", "")
		if a := short.read("accounts"); a.status != 401 || a.body["code"] != "CONSENT_EXPIRED" {
			t.Fatalf("expired consent: %d %v", a.status, a.body)
		}
		if a := long.read("accounts"); a.status != 200 {
			t.Fatalf("%d %v", a.status, a.body)
		}
		long.expect(sandbox.DefaultConsentValidity, "expired", "")
		if a := long.read("card-accounts"); a.status != 401 || a.body["code"] != "CONSENT_EXPIRED" {
			t.Fatalf("expired consent: %d %v", a.status, a.body)
		}
		// A longer validity than the bank's maximum is cut to the maximum.
		capped := askConsent(t, sb, clock, map[string]any{"personalNumber": "199001010017", "loginMethod": mock,
			"reference": "consent-capped", "scope": allScopes, "validitySeconds": int64(sandbox.DefaultConsentValidity/time.Second) * 2})
		b = capped.expect(time.Second, "valid", "")
		at, _ = time.Parse(time.RFC3339Nano, b["authorizedAt"].(string))
		until, _ = time.Parse(time.RFC3339Nano, b["validUntil"].(string))
		if until.Sub(at) != sandbox.DefaultConsentValidity {
			t.Fatalf("valid %v until %v", at, until)
		}
	})
}

func TestConsentLifecycle(t *testing.T) {
	sb, clock := start(t, fast()...)
	base := sb.BaseURL(bank) + "/v1/consents"

	t.Run("deleting a pending consent withdraws its EID order", func(t *testing.T) {
		c := askConsent(t, sb, clock, consentRequest("199001010017", otherDevice, "consent-del-1"))
		if a := call(t, "DELETE", c.url, nil, nil); a.status != 204 {
			t.Fatal(a.status)
		}
		c.expect(0, "terminatedByTpp", "")
		if a := call(t, "POST", sb.URL()+"/sandbox/eid/sign", map[string]string{"consentId": "consent-del-1"}, nil); a.status != 404 {
			t.Fatalf("the order is gone: %d %v", a.status, a.body)
		}
		// The person's next EID order is not blocked by the withdrawn one.
		next := askConsent(t, sb, clock, consentRequest("199001010017", otherDevice, "consent-del-2"))
		next.expect(0, "received", "")
		if a := call(t, "DELETE", c.url, nil, nil); a.status != 204 {
			t.Fatalf("a second delete: %d", a.status)
		}
		call(t, "DELETE", next.url, nil, nil)
	})
	t.Run("deleting an ended consent changes nothing", func(t *testing.T) {
		c := askConsent(t, sb, clock, consentRequest("199001010090", mock, "consent-del-3"))
		c.expect(time.Second, "rejected", "USER_CANCELLED")
		if a := call(t, "DELETE", c.url, nil, nil); a.status != 204 {
			t.Fatal(a.status)
		}
		c.expect(0, "rejected", "USER_CANCELLED")
	})
	t.Run("unknown consents", func(t *testing.T) {
		for _, m := range []string{"GET", "DELETE"} {
			if a := call(t, m, base+"/nope", nil, nil); a.status != 404 || a.body["code"] != "CONSENT_UNKNOWN" {
				t.Fatalf("%s: %d %v", m, a.status, a.body)
			}
		}
		if a := call(t, "GET", base+"/nope/status", nil, nil); a.status != 404 {
			t.Fatalf("%d %v", a.status, a.body)
		}
	})
	t.Run("a repeated Idempotency-Key gives the same consent", func(t *testing.T) {
		body := consentRequest("191212121212", otherDevice, "consent-idem")
		first := call(t, "POST", base, body, map[string]string{"Idempotency-Key": "k1"})
		again := call(t, "POST", base, body, map[string]string{"Idempotency-Key": "k1"})
		if first.status != 201 || again.status != 200 || again.body["consentId"] != first.body["consentId"] ||
			again.body["eidOrder"].(map[string]any)["orderRef"] != first.body["eidOrder"].(map[string]any)["orderRef"] {
			t.Fatalf("%d %v / %d %v", first.status, first.body, again.status, again.body)
		}
		other := consentRequest("191212121212", otherDevice, "consent-idem", "CREDIT_CARDS")
		if a := call(t, "POST", base, other, map[string]string{"Idempotency-Key": "k1"}); a.status != 422 || a.body["code"] != "IDEMPOTENCY_KEY_REUSED" {
			t.Fatalf("%d %v", a.status, a.body)
		}
	})
	t.Run("requests are checked", func(t *testing.T) {
		for name, c := range map[string]struct {
			body   map[string]any
			status int
			code   string
		}{
			"bad personal number": {consentRequest("199001010018", mock, "r"), 400, "INVALID_PERSONAL_NUMBER"},
			"no personal number":  {consentRequest("", mock, "r"), 400, "INVALID_REQUEST"},
			"unknown scope":       {consentRequest("199001010017", mock, "r", "LOANS"), 400, "INVALID_SCOPE"},
			"empty scope":         {map[string]any{"personalNumber": "199001010017", "loginMethod": mock, "scope": []string{}}, 400, "INVALID_SCOPE"},
			"negative validity": {map[string]any{"personalNumber": "199001010017", "loginMethod": mock, "scope": allScopes,
				"validitySeconds": -1}, 400, "INVALID_REQUEST"},
			"unknown field":       {map[string]any{"personalNumber": "199001010017", "loginMethod": mock, "scope": allScopes, "x": 1}, 400, "INVALID_REQUEST"},
			"not an EID method":   {consentRequest("199001010017", pdfUpload, "r"), 422, "LOGIN_METHOD_NOT_SUPPORTED"},
			"the client-side EID": {consentRequest("199001010017", clientSide, "r"), 422, "LOGIN_METHOD_NOT_SUPPORTED"},
		} {
			if a := call(t, "POST", base, c.body, nil); a.status != c.status || a.body["code"] != c.code {
				t.Errorf("%s: %d %v", name, a.status, a.body)
			}
		}
		for _, co := range []string{"se-demo-insurer", "se-demo-pension", "se-demo-maintenance"} {
			if a := call(t, "POST", sb.BaseURL(co)+"/v1/consents", consentRequest("199001010017", mock, "r"), nil); a.status != 404 ||
				a.body["code"] != "PSD2_NOT_SUPPORTED" {
				t.Errorf("%s: %d %v", co, a.status, a.body)
			}
		}
	})
	t.Run("the company list tells which company has consents", func(t *testing.T) {
		a := call(t, "GET", sb.URL()+"/sandbox/companies", nil, nil)
		for _, c := range a.body["companies"].([]any) {
			m := c.(map[string]any)
			if (m["id"] == bank) != (m["consents"] == true) {
				t.Errorf("%v", m)
			}
			if m["id"] == bank && slices.ContainsFunc(toStrings(m["dataProducts"]), func(p string) bool { return p == "accounts" || p == "cards" }) {
				t.Errorf("the bank's session serves no PSD2 product: %v", m)
			}
		}
		for _, co := range sandbox.Catalog().All() {
			if co.Consents != (co.ID == bank) {
				t.Errorf("catalog %s consents %v", co.ID, co.Consents)
			}
		}
	})
}
