package sandbox_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/connectors/pdfletter"
	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/eid"
)

const (
	otherDevice = company.LoginEIDOtherDevice
	clientSide  = company.LoginEIDSameDeviceClientSide
	pdfUpload   = company.LoginPDFUpload
)

// fast are the delays of these tests: the fake clock makes them exact.
func fast() []sandbox.Option {
	return []sandbox.Option{sandbox.WithMockSignDelay(time.Second), sandbox.WithEIDOrderTimeout(30 * time.Second),
		sandbox.WithStepDelay(100 * time.Millisecond), sandbox.WithUserDelay(2 * time.Second),
		sandbox.WithProductTimeout(20 * time.Millisecond), sandbox.WithClientWait(50 * time.Millisecond)}
}

type session struct {
	t     *testing.T
	url   string
	body  map[string]any
	clock *fakeClock
}

func open(t *testing.T, sb *sandbox.Sandbox, clock *fakeClock, companyID string, body map[string]string) *session {
	t.Helper()
	a := call(t, "POST", sb.BaseURL(companyID)+"/sessions", body, nil)
	if a.status != 201 {
		t.Fatalf("create at %s: %d %v", companyID, a.status, a.body)
	}
	return &session{t: t, url: sb.BaseURL(companyID) + "/sessions/" + a.body["sessionId"].(string), body: a.body, clock: clock}
}

func (s *session) poll() map[string]any {
	s.t.Helper()
	a := call(s.t, "GET", s.url, nil, nil)
	if a.status != 200 {
		s.t.Fatalf("poll: %d %v", a.status, a.body)
	}
	s.body = a.body
	return a.body
}

// expect advances the clock by d and checks the state (and failure reason).
func (s *session) expect(d time.Duration, state, reason string) map[string]any {
	s.t.Helper()
	s.clock.Add(d)
	b := s.poll()
	got, _ := b["failureReason"].(string)
	if b["state"] != state || got != reason {
		s.t.Fatalf("state %v %q, want %s %q: %v", b["state"], got, state, reason, b)
	}
	return b
}

func (s *session) data(product string) answer {
	s.t.Helper()
	token, _ := s.body["accessToken"].(string)
	return call(s.t, "GET", s.url+"/"+product, nil, map[string]string{"Authorization": "Bearer " + token})
}

func withRef(pn, method, ref string) map[string]string {
	return map[string]string{"personalNumber": pn, "loginMethod": method, "reference": ref}
}

// TestEveryPersonaWithTheMockEID plays SANDBOX.md's table at the demo insurer: the company's
// states in order, with the time each takes.
func TestEveryPersonaWithTheMockEID(t *testing.T) {
	sb, clock := start(t, fast()...)
	type step struct {
		after         time.Duration // since the previous step
		state, reason string
	}
	var (
		signed  = []step{{0, "AWAITING_SIGNATURE", ""}, {time.Second, "AUTHENTICATED", ""}}
		refused = func(reason string) []step {
			return []step{{0, "AWAITING_SIGNATURE", ""}, {time.Second, "FAILED", reason}}
		}
	)
	cases := map[string][]step{
		"199001010017": signed,
		"191212121212": signed,
		"199001010025": signed,
		"199001010033": signed,
		"199001010041": {{0, "FAILED", "INVALID_CREDENTIALS"}},
		"199001010058": {{0, "LOGIN", ""}, {100 * time.Millisecond, "TWO_FACTOR_PENDING", ""}, {2 * time.Second, "AUTHENTICATED", ""}},
		"199001010066": {{0, "LOGIN", ""}, {100 * time.Millisecond, "CONTACT_FORM_REQUIRED", ""}, {20 * time.Minute, "CONTACT_FORM_REQUIRED", ""}},
		"199001010074": {{0, "LOGIN", ""}, {100 * time.Millisecond, "INPUT_REQUIRED", ""}, {20 * time.Minute, "INPUT_REQUIRED", ""}},
		"199001010082": signed,
		"199001010090": refused("USER_CANCELLED"),
		"199001010108": {{0, "AWAITING_SIGNATURE", ""}, {30*time.Second - time.Millisecond, "AWAITING_SIGNATURE", ""}, {time.Millisecond, "FAILED", "ORDER_EXPIRED"}},
		"199001010116": {{0, "FAILED", "ALREADY_IN_PROGRESS"}},
		"199001010124": refused("ACCOUNT_LOCKED"),
		"199001010132": refused("KYC_REQUIRED"),
		"199001010140": refused("NOT_A_CUSTOMER"),
		"199001010157": signed,
		"199001010165": refused("TEMPORARY_ERROR"),
		"199001010173": refused("SIGN_IN_REJECTED"),
		"199001010181": {{0, "LOGIN", ""}, {100 * time.Millisecond, "TWO_FACTOR_METHOD_SELECTION", ""}, {20 * time.Minute, "TWO_FACTOR_METHOD_SELECTION", ""}},
		"199001010199": {{0, "LOGIN", ""}, {100 * time.Millisecond, "TWO_FACTOR_PENDING", ""}, {2 * time.Second, "FAILED", "INCORRECT_TWO_FACTOR_CODE"}},
		"199001010207": refused("CONTACT_DETAILS_REQUIRED"),
		"199001010215": {{0, "LOGIN", ""}, {100 * time.Millisecond, "CONTACT_FORM_REQUIRED", ""}, {20 * time.Minute, "CONTACT_FORM_REQUIRED", ""}},
		"198507099805": signed, // any other number behaves like 199001010017
	}
	for pn, steps := range cases {
		t.Run(pn, func(t *testing.T) {
			s := open(t, sb, clock, "se-demo-insurer", withRef(pn, mock, "col-"+pn))
			for _, st := range steps {
				s.expect(st.after, st.state, st.reason)
			}
		})
	}
}

func TestTwoFactorStates(t *testing.T) {
	sb, clock := start(t, fast()...)
	s := open(t, sb, clock, "se-demo-insurer", withRef("199001010058", otherDevice, "c1"))
	b := s.expect(100*time.Millisecond, "TWO_FACTOR_PENDING", "")
	if tf := b["twoFactor"].(map[string]any); tf["method"] != "SMS" {
		t.Errorf("two-factor %v", tf)
	}
	if b["eidOrder"] != nil {
		t.Error("the two-factor persona signs in without an EID order")
	}
	s.expect(2*time.Second, "AUTHENTICATED", "")
	if who := s.body["customer"].(map[string]any)["personalNumber"]; who != "199001010058" {
		t.Errorf("customer %v", who)
	}

	t.Run("a method picked by hand moves on", func(t *testing.T) {
		s := open(t, sb, clock, "se-demo-insurer", withRef("199001010181", mock, "c2"))
		b := s.expect(100*time.Millisecond, "TWO_FACTOR_METHOD_SELECTION", "")
		if methods := b["twoFactor"].(map[string]any)["methods"]; len(methods.([]any)) != 2 {
			t.Fatalf("%v", b)
		}
		if a := call(t, "POST", s.url+"/two-factor-method", map[string]string{"method": "PIGEON"}, nil); a.status != 400 {
			t.Fatalf("%d", a.status)
		}
		if a := call(t, "POST", s.url+"/two-factor-method", map[string]string{"method": "EMAIL"}, nil); a.status != 200 || a.body["state"] != "TWO_FACTOR_PENDING" {
			t.Fatalf("%d %v", a.status, a.body)
		}
		s.expect(2*time.Second, "AUTHENTICATED", "")
		if a := call(t, "POST", s.url+"/two-factor-method", map[string]string{"method": "SMS"}, nil); a.status != 409 {
			t.Fatalf("%d", a.status)
		}
	})
}

func TestContactFormAndInput(t *testing.T) {
	sb, clock := start(t, fast()...)
	s := open(t, sb, clock, "se-demo-insurer", withRef("199001010066", mock, "c1"))
	b := s.expect(100*time.Millisecond, "CONTACT_FORM_REQUIRED", "")
	if got := b["requiredInputs"]; len(got.([]any)) != 2 {
		t.Fatalf("required %v", got)
	}
	for name, inputs := range map[string][]map[string]string{
		"nothing":   {},
		"one":       {{"type": "EMAIL", "value": "tolvan@example.se"}},
		"bad email": {{"type": "EMAIL", "value": "tolvan.example.se"}, {"type": "MOBILE_PHONE_NUMBER", "value": "46701234567"}},
		"bad phone": {{"type": "EMAIL", "value": "tolvan@example.se"}, {"type": "MOBILE_PHONE_NUMBER", "value": "+46 70-123 45 67"}},
	} {
		a := call(t, "POST", s.url+"/inputs", map[string]any{"inputs": inputs}, nil)
		if a.status != 400 || a.body["code"] != "INVALID_INPUT" || len(a.body["errors"].([]any)) == 0 {
			t.Errorf("%s: %d %v", name, a.status, a.body)
		}
	}
	s.expect(0, "CONTACT_FORM_REQUIRED", "") // a rejected input changes nothing
	a := call(t, "POST", s.url+"/inputs", map[string]any{"inputs": []map[string]string{
		{"type": "EMAIL", "value": "tolvan@example.se"}, {"type": "MOBILE_PHONE_NUMBER", "value": "46701234567"},
		{"type": "SHOE_SIZE", "value": "44"}, // not asked for: ignored
	}}, nil)
	if a.status != 200 || a.body["state"] != "AUTHENTICATED" {
		t.Fatalf("%d %v", a.status, a.body)
	}
	if a := call(t, "POST", s.url+"/inputs", map[string]any{"inputs": []map[string]string{}}, nil); a.status != 409 || a.body["code"] != "NOT_AWAITING_INPUT" {
		t.Fatalf("%d %v", a.status, a.body)
	}

	t.Run("a contact form that asks for the e-mail address alone", func(t *testing.T) {
		s := open(t, sb, clock, "se-demo-insurer", withRef("199001010215", mock, "c4"))
		b := s.expect(100*time.Millisecond, "CONTACT_FORM_REQUIRED", "")
		if got, _ := b["requiredInputs"].([]any); len(got) != 1 || got[0] != "EMAIL" {
			t.Fatalf("required %v", b["requiredInputs"])
		}
		a := call(t, "POST", s.url+"/inputs", map[string]any{"inputs": []map[string]string{
			{"type": "MOBILE_PHONE_NUMBER", "value": "46701234567"}}}, nil)
		if a.status != 400 || a.body["code"] != "INVALID_INPUT" {
			t.Fatalf("a phone number instead of the e-mail address: %d %v", a.status, a.body)
		}
		a = call(t, "POST", s.url+"/inputs", map[string]any{"inputs": []map[string]string{
			{"type": "EMAIL", "value": "epost@example.se"}}}, nil)
		if a.status != 200 || a.body["state"] != "AUTHENTICATED" {
			t.Fatalf("the e-mail address alone: %d %v", a.status, a.body)
		}
	})

	in := open(t, sb, clock, "se-demo-insurer", withRef("199001010074", mock, "c2"))
	b = in.expect(100*time.Millisecond, "INPUT_REQUIRED", "")
	if got := b["requiredInputs"].([]any); len(got) != 1 || got[0] != "EMAIL" {
		t.Fatalf("required %v", got)
	}
	a = call(t, "POST", in.url+"/inputs", map[string]any{"inputs": []map[string]string{{"type": "EMAIL", "value": "a@b.se"}}}, nil)
	if a.status != 200 || a.body["state"] != "AUTHENTICATED" {
		t.Fatalf("%d %v", a.status, a.body)
	}
	if a := call(t, "POST", open(t, sb, clock, "se-demo-insurer", withRef("199001010017", mock, "c3")).url+"/inputs",
		map[string]any{"inputs": []map[string]string{}}, nil); a.status != 409 {
		t.Fatalf("a session that asks for nothing: %d", a.status)
	}
}

func TestOtherDeviceEID(t *testing.T) {
	sb, clock := start(t, fast()...)
	sign := func(body map[string]string) answer { return call(t, "POST", sb.URL()+"/sandbox/eid/sign", body, nil) }

	s := open(t, sb, clock, "se-demo-insurer", withRef("191212121212", otherDevice, "col-1"))
	b := s.expect(10*time.Second, "AWAITING_SIGNATURE", "") // nobody signs by themselves
	o := b["eidOrder"].(map[string]any)
	for _, k := range []string{"orderRef", "autoStartToken", "qrStartToken", "qrStartSecret", "startedAt", "expiresAt"} {
		if o[k] == "" || o[k] == nil {
			t.Fatalf("eid order lacks %s: %v", k, o)
		}
	}
	if o["status"] != "pending" || o["hintCode"] != "outstandingTransaction" {
		t.Fatalf("%v", o)
	}
	started, _ := time.Parse(time.RFC3339Nano, o["startedAt"].(string))
	qr := eid.QRData(o["qrStartToken"].(string), o["qrStartSecret"].(string), started, clock.Now())
	if !strings.HasPrefix(qr, "bankid."+o["qrStartToken"].(string)+".10.") {
		t.Fatalf("QR data at 10 s: %s", qr)
	}
	if a := sign(map[string]string{"collectionId": "col-unknown"}); a.status != 404 {
		t.Fatalf("%d %v", a.status, a.body)
	}
	if a := sign(map[string]string{"collectionId": "col-1"}); a.status != 200 || a.body["status"] != "complete" {
		t.Fatalf("%d %v", a.status, a.body)
	}
	b = s.expect(0, "AUTHENTICATED", "")
	user := b["eidOrder"].(map[string]any)["completionData"].(map[string]any)["user"].(map[string]any)
	if user["personalNumber"] != "191212121212" || user["name"] != "Tolvan Tolvansson" {
		t.Fatalf("completion %v", user)
	}
	// The company released the order it signed the user in with: the provider forgot it, and
	// the login still shows who signed.
	collect := func(ref string) answer {
		return call(t, "POST", sb.URL()+"/sandbox/eid/rp/v6.0/collect", map[string]string{"orderRef": ref}, nil)
	}
	if a := collect(o["orderRef"].(string)); a.status != 400 {
		t.Fatalf("collect after the sign-in: %d %v, want the order forgotten", a.status, a.body)
	}
	b = s.expect(0, "AUTHENTICATED", "")
	eo := b["eidOrder"].(map[string]any)
	user = eo["completionData"].(map[string]any)["user"].(map[string]any)
	if eo["status"] != "complete" || user["personalNumber"] != "191212121212" {
		t.Fatalf("the login's order once the provider forgot it: %v", eo)
	}

	t.Run("unsigned orders expire", func(t *testing.T) {
		s := open(t, sb, clock, "se-demo-insurer", withRef("199001010017", otherDevice, "col-2"))
		s.expect(30*time.Second, "FAILED", "ORDER_EXPIRED")
	})
	t.Run("the user cancels", func(t *testing.T) {
		s := open(t, sb, clock, "se-demo-bank", withRef("199001010017", otherDevice, "col-3"))
		if a := call(t, "POST", sb.URL()+"/sandbox/eid/cancel", map[string]string{"collectionId": "col-3"}, nil); a.status != 200 {
			t.Fatalf("%d %v", a.status, a.body)
		}
		s.expect(0, "FAILED", "USER_CANCELLED")
	})
	t.Run("the cancelling persona cancels when asked to sign", func(t *testing.T) {
		s := open(t, sb, clock, "se-demo-insurer", withRef("199001010090", otherDevice, "col-4"))
		sign(map[string]string{"collectionId": "col-4"})
		s.expect(0, "FAILED", "USER_CANCELLED")
	})
	t.Run("the persona who never signs refuses", func(t *testing.T) {
		s := open(t, sb, clock, "se-demo-insurer", withRef("199001010108", otherDevice, "col-5"))
		if a := sign(map[string]string{"collectionId": "col-5"}); a.status != 409 || a.body["code"] != "USER_WILL_NOT_SIGN" {
			t.Fatalf("%d %v", a.status, a.body)
		}
		s.expect(30*time.Second, "FAILED", "ORDER_EXPIRED")
	})
	t.Run("someone else signs", func(t *testing.T) {
		s := open(t, sb, clock, "se-demo-pension", withRef("199001010082", otherDevice, "col-6"))
		sign(map[string]string{"collectionId": "col-6"})
		b := s.expect(0, "AUTHENTICATED", "")
		user := b["eidOrder"].(map[string]any)["completionData"].(map[string]any)["user"].(map[string]any)
		if user["personalNumber"] != "199001010017" || b["customer"].(map[string]any)["personalNumber"] != "199001010017" {
			t.Fatalf("%v", b)
		}
		pi := s.data("personal-information")
		if got := pi.body["personalInformation"].(map[string]any)["personalNumber"]; got != "199001010017" {
			t.Fatalf("the company reports %v", got)
		}
	})
	t.Run("a second login for the same person conflicts", func(t *testing.T) {
		first := open(t, sb, clock, "se-demo-insurer", withRef("199001010017", otherDevice, "col-7"))
		second := open(t, sb, clock, "se-demo-pension", withRef("199001010017", otherDevice, "col-8"))
		second.expect(0, "FAILED", "ALREADY_IN_PROGRESS")
		first.expect(0, "FAILED", "ALREADY_IN_PROGRESS")
	})
	t.Run("the persona with an order running elsewhere", func(t *testing.T) {
		s := open(t, sb, clock, "se-demo-insurer", withRef("199001010116", otherDevice, "col-9"))
		s.expect(0, "FAILED", "ALREADY_IN_PROGRESS")
	})
	t.Run("logging out withdraws the order", func(t *testing.T) {
		s := open(t, sb, clock, "se-demo-insurer", withRef("199001010017", otherDevice, "col-10"))
		if a := call(t, "DELETE", s.url, nil, nil); a.status != 204 {
			t.Fatal(a.status)
		}
		next := open(t, sb, clock, "se-demo-insurer", withRef("199001010017", otherDevice, "col-11"))
		next.expect(0, "AWAITING_SIGNATURE", "")
	})
	t.Run("the same collection starting over replaces its order", func(t *testing.T) {
		open(t, sb, clock, "se-demo-insurer", withRef("191212121212", otherDevice, "col-12"))
		again := open(t, sb, clock, "se-demo-insurer", withRef("191212121212", otherDevice, "col-12"))
		sign(map[string]string{"collectionId": "col-12"})
		again.expect(0, "AUTHENTICATED", "")
	})
}

// runInstruction executes one client-side instruction as the client app would.
func runInstruction(t *testing.T, in map[string]any) map[string]any {
	t.Helper()
	var body io.Reader
	if b, ok := in["body"].(string); ok {
		body = strings.NewReader(b)
	}
	req, err := http.NewRequest(in["method"].(string), in["url"].(string), body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range in["headers"].(map[string]any) {
		req.Header.Set(k, v.(string))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	headers := map[string]string{}
	for k := range res.Header {
		headers[k] = res.Header.Get(k)
	}
	return map[string]any{"requestId": in["requestId"], "status": res.StatusCode, "headers": headers, "body": string(b)}
}

func TestClientSideLogin(t *testing.T) {
	sb, clock := start(t, fast()...)
	begin := func(pn, ref string) (*session, []any) {
		s := open(t, sb, clock, "se-demo-insurer", withRef(pn, clientSide, ref))
		b := s.expect(0, "CLIENT_ACTION_REQUIRED", "")
		if b["eidOrder"] != nil {
			t.Fatal("the device's order is none of Samla's business")
		}
		return s, b["instructions"].([]any)
	}
	s, ins := begin("191212121212", "col-1")
	if len(ins) != 2 || ins[0].(map[string]any)["requestId"] != "eid-autostart" || ins[1].(map[string]any)["requestId"] != "login-result" {
		t.Fatalf("instructions %v", ins)
	}
	if again := s.poll()["instructions"]; len(again.([]any)) != 2 || again.([]any)[0].(map[string]any)["url"] != ins[0].(map[string]any)["url"] {
		t.Fatal("instructions must be stable between polls")
	}
	started := runInstruction(t, ins[0].(map[string]any))
	var token struct{ AutoStartToken, LaunchURL string }
	if err := json.Unmarshal([]byte(started["body"].(string)), &token); err != nil || started["status"] != 200 || token.AutoStartToken == "" {
		t.Fatalf("%v", started)
	}
	early := runInstruction(t, ins[1].(map[string]any)) // before the user signed: waits a little, then PENDING
	if !strings.Contains(early["body"].(string), "PENDING") {
		t.Fatalf("%v", early)
	}
	clock.Add(time.Second) // the user signs in the app
	result := runInstruction(t, ins[1].(map[string]any))
	if !strings.Contains(result["body"].(string), "loginTicket") {
		t.Fatalf("%v", result)
	}
	responses := []any{started, result, map[string]any{"requestId": "something-new", "status": 200, "headers": map[string]string{}, "body": ""}}
	a := call(t, "POST", s.url+"/client-responses", map[string]any{"responses": responses}, nil)
	if a.status != 200 || a.body["state"] != "AUTHENTICATED" || a.body["customer"].(map[string]any)["personalNumber"] != "191212121212" {
		t.Fatalf("%d %v", a.status, a.body)
	}
	// The company released the order it signed the login in with; the device asking again
	// still learns that it is done.
	if again := runInstruction(t, ins[1].(map[string]any)); again["status"] != 200 || !strings.Contains(again["body"].(string), "COMPLETE") {
		t.Fatalf("the device's login-result after the sign-in: %v", again)
	}

	t.Run("responses without the ticket fail the login", func(t *testing.T) {
		for name, responses := range map[string][]any{
			"missing": {},
			"forged":  {map[string]any{"requestId": "login-result", "status": 200, "body": `{"status":"COMPLETE","loginTicket":"0000"}`}},
			"early":   {map[string]any{"requestId": "login-result", "status": 200, "body": `{"status":"PENDING"}`}},
			"failed":  {map[string]any{"requestId": "login-result", "status": 500, "body": ``}},
		} {
			s, _ := begin("199001010017", "col-"+name)
			a := call(t, "POST", s.url+"/client-responses", map[string]any{"responses": responses}, nil)
			if a.status != 422 || a.body["code"] != "CLIENT_RESPONSE_INVALID" {
				t.Fatalf("%s: %d %v", name, a.status, a.body)
			}
			s.expect(0, "FAILED", "CLIENT_RESPONSE_INVALID")
		}
	})
	t.Run("the user cancels on the device", func(t *testing.T) {
		s, ins := begin("199001010090", "col-cancel")
		runInstruction(t, ins[0].(map[string]any))
		clock.Add(time.Second)
		if r := runInstruction(t, ins[1].(map[string]any)); !strings.Contains(r["body"].(string), "userCancel") {
			t.Fatalf("%v", r)
		}
		s.expect(0, "FAILED", "USER_CANCELLED")
	})
	t.Run("device requests need the device token", func(t *testing.T) {
		_, ins := begin("199001010017", "col-token")
		in := ins[0].(map[string]any)
		in["headers"] = map[string]any{}
		if r := runInstruction(t, in); r["status"] != 401 {
			t.Fatalf("%v", r)
		}
	})
}

func TestEnrollmentCheckAndCareerStatement(t *testing.T) {
	sb, clock := start(t, fast()...)
	s := open(t, sb, clock, "fr-demo-pension-info", withRef("191212121212", mock, "c1"))
	s.expect(0, "ENROLLMENT_CHECK", "")
	s.expect(100*time.Millisecond, "AWAITING_SIGNATURE", "")
	b := s.expect(time.Second, "AUTHENTICATED", "")
	if got := b["products"].([]any); !slices.Equal(got, []any{"pensions", "career-statement", "personal-information"}) {
		t.Fatalf("products %v", got)
	}
	token := b["accessToken"].(string)
	req, _ := http.NewRequest("GET", s.url+"/career-statement", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pdf, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/pdf" {
		t.Fatalf("%d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	text, err := pdfletter.Text(pdf)
	if err != nil || !strings.Contains(text, "Relevé de situation individuelle") || !strings.Contains(text, "Assuré : Tolvansson Tolvan") {
		t.Fatalf("career statement text %q: %v", text, err)
	}
	pi := s.data("personal-information").body["personalInformation"].(map[string]any)
	if _, ok := pi["personalNumber"]; ok || pi["name"] != "TOLVANSSON Tolvan" {
		t.Errorf("the French service does not know a Swedish personal number: %v", pi)
	}
	s = open(t, sb, clock, "fr-demo-pension-info", withRef("199001010140", mock, "c2"))
	s.expect(100*time.Millisecond, "FAILED", "NOT_A_CUSTOMER")
	s = open(t, sb, clock, "fr-demo-pension-info", withRef("199001010033", mock, "c3"))
	s.expect(1100*time.Millisecond, "AUTHENTICATED", "")
	if a := s.data("career-statement"); a.status != 404 || a.body["code"] != "NO_CAREER_STATEMENT" {
		t.Fatalf("%d %v", a.status, a.body)
	}
}

func TestDataSets(t *testing.T) {
	sb, clock := start(t, fast()...)
	n := 0
	signedIn := func(t *testing.T, companyID, pn string) *session {
		n++
		s := open(t, sb, clock, companyID, withRef(pn, mock, "c-"+companyID+pn+strconv.Itoa(n)))
		s.expect(1100*time.Millisecond, "AUTHENTICATED", "") // fr's enrollment check takes 100 ms
		return s
	}
	t.Run("pensions P1-P7 of 191212121212", func(t *testing.T) {
		s := signedIn(t, "se-demo-pension", "191212121212")
		a := s.data("pensions")
		want := map[string]string{"P1": "Tolvan Tolvansson", "P2": "TOLVANSSON, TOLVAN", "P3": "Tolvan Karl Tolvansson",
			"P4": "Tolvan Tolvanson", "P5": "Elin Tolvansson", "P6": "Tolvan Tolvansson", "P7": "TØLVAN TOLVANSSØN"}
		got := map[string]map[string]any{}
		for _, p := range a.body["pensions"].([]any) {
			m := p.(map[string]any)
			got[m["id"].(string)] = m
		}
		for id, name := range want {
			p := got[id]
			if p == nil || p["insuredPersonName"] != name {
				t.Errorf("%s: %v", id, p)
				continue
			}
			flag, has := p["otherInsuredPerson"]
			if (id == "P6") != has || (has && flag != true) {
				t.Errorf("%s: the company supplies otherInsuredPerson only for P6 (true): %v", id, p)
			}
			if v := p["value"].(map[string]any); v["currency"] != "SEK" || v["amount"].(float64) <= 0 {
				t.Errorf("%s value %v", id, v)
			}
		}
		inv := s.data("investments").body["investments"].([]any)
		if len(inv) != 3 {
			t.Fatalf("investments %v", inv)
		}
	})
	t.Run("bank products", func(t *testing.T) {
		// Accounts and cards are PSD2 data, read under a consent (consent_test.go), never
		// under the login session.
		s := signedIn(t, "se-demo-bank", "191212121212")
		if got := s.body["products"]; !slices.Equal(toStrings(got), []string{"loans", "savings", "personal-information"}) {
			t.Errorf("bank session products %v", got)
		}
		for _, product := range []string{"accounts", "cards"} {
			if a := s.data(product); a.status != 403 || a.body["code"] != "CONSENT_REQUIRED" {
				t.Errorf("%s under a session: %d %v", product, a.status, a.body)
			}
		}
		for product, key := range map[string]string{"loans": "loans", "savings": "savings"} {
			if a := s.data(product); a.status != 200 || len(a.body[key].([]any)) < 2 {
				t.Errorf("%s: %d %v", product, a.status, a.body)
			}
		}
		pi := s.data("personal-information").body["personalInformation"].(map[string]any)
		if pi["personalNumber"] != "191212121212" || pi["email"] == nil || pi["address"].(map[string]any)["postalCode"] != "12345" {
			t.Errorf("%v", pi)
		}
	})
	t.Run("unknown values are absent, never zero or empty", func(t *testing.T) {
		for _, c := range []struct{ company, product string }{
			{"se-demo-insurer", "insurances"}, {"se-demo-insurer", "group-insurances"}, {"se-demo-insurer", "personal-information"},
			{"se-demo-pension", "pensions"}, {"se-demo-pension", "investments"},
			{"se-demo-bank", "loans"}, {"se-demo-bank", "savings"}, {"fr-demo-pension-info", "pensions"},
		} {
			for _, pn := range []string{"191212121212", "199001010017"} {
				a := signedIn(t, c.company, pn).data(c.product)
				if a.status != 200 {
					t.Fatalf("%s %s: %d", c.company, c.product, a.status)
				}
				raw, _ := json.Marshal(a.body)
				if bytes.Contains(raw, []byte(`""`)) || bytes.Contains(raw, []byte(`:0,`)) || bytes.Contains(raw, []byte(`:0}`)) {
					t.Errorf("%s %s of %s has an empty or zero value: %s", c.company, c.product, pn, raw)
				}
			}
		}
	})
	t.Run("no products", func(t *testing.T) {
		s := signedIn(t, "se-demo-bank", "199001010033")
		if a := s.data("savings"); len(a.body["savings"].([]any)) != 0 {
			t.Fatalf("%v", a.body)
		}
		if a := s.data("personal-information"); a.body["personalInformation"] != nil {
			t.Fatalf("%v", a.body)
		}
	})
	t.Run("one product times out", func(t *testing.T) {
		for company, slow := range map[string]string{"se-demo-insurer": "group-insurances", "se-demo-pension": "investments",
			"se-demo-bank": "savings", "fr-demo-pension-info": "career-statement"} {
			s := open(t, sb, clock, company, withRef("199001010025", mock, "c-slow-"+company))
			s.clock.Add(2 * time.Second)
			b := s.poll()
			for _, p := range b["products"].([]any) {
				a := s.data(p.(string))
				if p == slow && (a.status != 504 || a.body["code"] != "UPSTREAM_TIMEOUT") {
					t.Errorf("%s %s: %d %v", company, p, a.status, a.body)
				}
				if p != slow && a.status != 200 {
					t.Errorf("%s %s: %d %v", company, p, a.status, a.body)
				}
			}
		}
	})
	t.Run("access is checked", func(t *testing.T) {
		s := signedIn(t, "se-demo-bank", "199001010017")
		if a := call(t, "GET", s.url+"/loans", nil, nil); a.status != 401 {
			t.Fatal(a.status)
		}
		if a := s.data("pensions"); a.status != 404 || a.body["code"] != "UNKNOWN_PRODUCT" {
			t.Fatalf("%d %v", a.status, a.body)
		}
	})
}

func letterPDF(t *testing.T, opts pdfletter.SampleOptions) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := pdfletter.WriteSample(&b, opts); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func upload(t *testing.T, url string, pdf []byte, how string) answer {
	t.Helper()
	var body bytes.Buffer
	ct := "application/pdf"
	switch how {
	case "multipart":
		mw := multipart.NewWriter(&body)
		fw, _ := mw.CreateFormFile("file", "brev.pdf")
		_, _ = fw.Write(pdf)
		_ = mw.Close()
		ct = mw.FormDataContentType()
	case "json":
		_ = json.NewEncoder(&body).Encode(map[string]string{"contentBase64": base64.StdEncoding.EncodeToString(pdf), "fileName": "brev.pdf"})
		ct = "application/json"
	default:
		body.Write(pdf)
	}
	req, _ := http.NewRequest("POST", url+"/document", &body)
	req.Header.Set("Content-Type", ct)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	a := answer{status: res.StatusCode}
	_ = json.NewDecoder(res.Body).Decode(&a.body)
	return a
}

func TestPDFUpload(t *testing.T) {
	sb, clock := start(t, fast()...)
	for _, how := range []string{"pdf", "multipart", "json"} {
		t.Run("a letter is read, sent as "+how, func(t *testing.T) {
			s := open(t, sb, clock, "se-demo-insurer", map[string]string{"loginMethod": pdfUpload, "reference": "c-" + how})
			s.expect(0, "DOCUMENT_REQUIRED", "")
			a := upload(t, s.url, letterPDF(t, pdfletter.SampleOptions{Holder: "Åsa Öberg", InsuranceType: pdfletter.TypeCar}), how)
			if a.status != 200 || a.body["state"] != "AUTHENTICATED" || a.body["document"].(map[string]any)["status"] != "PARSED" {
				t.Fatalf("%d %v", a.status, a.body)
			}
			s.body = a.body
			ins := s.data("insurances").body["insurances"].([]any)
			if len(ins) != 1 || ins[0].(map[string]any)["product"] != "motor" || ins[0].(map[string]any)["policyHolder"].(map[string]any)["name"] != "Åsa Öberg" {
				t.Fatalf("%v", ins)
			}
			if a := upload(t, s.url, letterPDF(t, pdfletter.SampleOptions{}), how); a.status != 409 {
				t.Fatalf("second upload: %d", a.status)
			}
		})
	}
	cases := []struct {
		name, company string
		pdf           []byte
		reason        string
	}{
		{"a field cannot be read", "se-demo-insurer", letterPDF(t, pdfletter.SampleOptions{Broken: pdfletter.FieldRenewalDate}), "PDF_PARSE_FAILED"},
		{"not an insurance letter", "ee-demo-insurer", letterPDF(t, pdfletter.SampleOptions{NotALetter: true}), "PDF_UNSUPPORTED"},
		{"not a PDF", "ee-demo-insurer", []byte("GIF89a"), "PDF_UNSUPPORTED"},
		{"a pension letter at an insurer", "se-demo-insurer", letterPDF(t, pdfletter.SampleOptions{InsuranceType: pdfletter.TypePension}), "PDF_UNSUPPORTED"},
		{"an insurance letter at the pension service", "fr-demo-pension-info", letterPDF(t, pdfletter.SampleOptions{}), "PDF_UNSUPPORTED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, sb, clock, tc.company, map[string]string{"loginMethod": pdfUpload})
			a := upload(t, s.url, tc.pdf, "pdf")
			if a.status != 200 || a.body["state"] != "FAILED" || a.body["failureReason"] != tc.reason {
				t.Fatalf("%d %v", a.status, a.body)
			}
		})
	}
	t.Run("a pension letter at the pension service", func(t *testing.T) {
		s := open(t, sb, clock, "fr-demo-pension-info", map[string]string{"loginMethod": pdfUpload})
		s.expect(0, "DOCUMENT_REQUIRED", "") // no enrollment check without a person
		a := upload(t, s.url, letterPDF(t, pdfletter.SampleOptions{InsuranceType: pdfletter.TypePension}), "pdf")
		if a.body["state"] != "AUTHENTICATED" || len(a.body["document"].(map[string]any)["pensions"].([]any)) != 1 {
			t.Fatalf("%v", a.body)
		}
	})
	t.Run("no body", func(t *testing.T) {
		s := open(t, sb, clock, "se-demo-insurer", map[string]string{"loginMethod": pdfUpload})
		if a := upload(t, s.url, nil, "pdf"); a.status != 400 {
			t.Fatalf("%d", a.status)
		}
		s.expect(0, "DOCUMENT_REQUIRED", "")
	})
}

func TestMaintenanceRefusesSessions(t *testing.T) {
	sb, _ := start(t, fast()...)
	if a := call(t, "POST", sb.BaseURL("se-demo-maintenance")+"/sessions", login("199001010017", mock), nil); a.status != 503 || a.body["code"] != "MAINTENANCE" {
		t.Fatalf("%d %v", a.status, a.body)
	}
	if a := call(t, "GET", sb.BaseURL("se-demo-maintenance"), nil, nil); a.body["status"] != "MAINTENANCE" {
		t.Fatalf("%v", a.body)
	}
}

// TestMountedBesideAnotherAPI serves the handler from a listener it shares, as Samla's service
// does, with the public URL in the client-side instructions.
func TestMountedBesideAnotherAPI(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	sb, err := sandbox.New(sandbox.WithLatency(0, 0), sandbox.WithPublicURL(srv.URL), sandbox.WithMockSignDelay(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/sandbox/", sb.Handler())
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"status":"healthy"}`)) })

	if sb.BaseURL("se-demo-insurer") != srv.URL+"/sandbox/companies/se-demo-insurer" {
		t.Fatalf("base %s", sb.BaseURL("se-demo-insurer"))
	}
	a := call(t, "POST", sb.BaseURL("se-demo-insurer")+"/sessions", withRef("199001010017", clientSide, "c1"), nil)
	if a.status != 201 {
		t.Fatalf("%d %v", a.status, a.body)
	}
	url := a.body["instructions"].([]any)[0].(map[string]any)["url"].(string)
	if !strings.HasPrefix(url, srv.URL+"/sandbox/companies/se-demo-insurer/client/") {
		t.Fatalf("instruction URL %s", url)
	}
	if a := call(t, "POST", srv.URL+"/sandbox/eid/sign", map[string]string{"collectionId": "nothing"}, nil); a.status != 404 || a.body["code"] != "NO_PENDING_ORDER" {
		t.Fatalf("%d %v", a.status, a.body)
	}
	if a := call(t, "GET", srv.URL+"/health", nil, nil); a.body["status"] != "healthy" {
		t.Fatal("the other API is still served")
	}
}
