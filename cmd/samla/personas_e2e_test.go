package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// personaConfig shortens every deadline so that timeout personas end within seconds.
func personaConfig(t testing.TB, dir string) *Config {
	cfg := testConfig(t, dir)
	cfg.ContactFormTimeout = 1500 * time.Millisecond
	cfg.InputTimeout = 1500 * time.Millisecond
	cfg.MethodSelectionTimeout = 1200 * time.Millisecond
	cfg.EIDOrderTimeout = 1500 * time.Millisecond
	return cfg
}

// sharedService is one embedded service for the persona tests, which run in parallel on it;
// TestMain stops it and removes its data dir.
var (
	sharedOnce sync.Once
	sharedSvc  *Service
	sharedErr  error
	sharedPath string
)

func sharedDir() string {
	dir, err := os.MkdirTemp("", "samla-personas-")
	if err != nil {
		panic(err)
	}
	sharedPath = dir
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedSvc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := sharedSvc.Shutdown(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "shutdown of the shared service:", err)
			code = 1
		}
		cancel()
	}
	if sharedPath != "" {
		_ = os.RemoveAll(sharedPath)
	}
	os.Exit(code)
}

func personaService(t *testing.T) apiClient {
	t.Helper()
	sharedOnce.Do(func() {
		cfg := personaConfig(t, sharedDir())
		sharedSvc, sharedErr = Start(context.Background(), cfg, AllRoles(), testLogger(t))
	})
	if sharedErr != nil {
		t.Fatalf("start: %v", sharedErr)
	}
	return apiClient{t: t, base: "http://" + sharedSvc.HTTPAddr(), key: testAPIKey}
}

func finalStatus(s string) bool {
	switch s {
	case "RUNNING", "LOGIN", "CUSTOMER_ENROLLMENT_CHECK", "TWO_FACTOR_PENDING", "CONTACT_FORM_PENDING",
		"COLLECTION_INPUT_PENDING", "WAITING_FOR_USER_ACTION", "COLLECTING":
		return false
	}
	return true
}

type collectionRequest struct {
	version     string
	company     string
	loginMethod string
	pn          string
	ownerName   string
	userUUID    string           // 2026-04-01 only
	extraParams []map[string]any // 2026-04-01 only
	pdfDocument string           // 2025-01-01 only: input.PDF_DOCUMENT, base64
}

func (c apiClient) start(req collectionRequest) (int, map[string]any) {
	c.t.Helper()
	if req.version == "" {
		req.version = "2026-04-01"
	}
	if req.loginMethod == "" {
		req.loginMethod = "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK"
	}
	body := map[string]any{"company": req.company, "loginMethod": req.loginMethod}
	if req.version == "2025-01-01" {
		input := map[string]string{}
		if req.pn != "" {
			input["SWEDISH_PERSONAL_NUMBER"] = req.pn
		}
		if req.ownerName != "" {
			input["ACCOUNT_OWNER_NAME"] = req.ownerName
		}
		if req.pdfDocument != "" {
			input["PDF_DOCUMENT"] = req.pdfDocument
		}
		body["input"] = input
	} else {
		params := []map[string]any{}
		if req.pn != "" {
			params = append(params, map[string]any{"type": "SwedishPersonalNumberParameter", "personalNumber": req.pn})
		}
		if req.ownerName != "" {
			params = append(params, map[string]any{"type": "AccountOwnerNameParameter", "name": req.ownerName})
		}
		body["parameters"] = append(params, req.extraParams...)
		if req.userUUID != "" {
			body["userUuid"] = req.userUUID
		}
	}
	code, raw, _ := c.do("POST", "/collections", body, map[string]string{"Service-Version": req.version})
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return code, out
}

func (c apiClient) mustStart(req collectionRequest) string {
	c.t.Helper()
	code, out := c.start(req)
	if code != http.StatusCreated {
		c.t.Fatalf("POST /collections %+v = %d %v", req, code, out)
	}
	return out["collectionId"].(string)
}

// statusAs polls once with a given Service-Version.
func (c apiClient) statusAs(id, version string) statusBody {
	c.t.Helper()
	code, raw, _ := c.do("GET", "/collections/"+id+"/status", nil, map[string]string{"Service-Version": version})
	if code != http.StatusOK {
		c.t.Fatalf("status = %d %s", code, raw)
	}
	var s statusBody
	if err := json.Unmarshal(raw, &s); err != nil {
		c.t.Fatal(err)
	}
	return s
}

// historyPath waits for the audit history to show the final status and returns the path.
func (c apiClient) historyPath(id, final string) []string {
	c.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		path := statusPath(c.t, c.history(id))
		if len(path) > 0 && path[len(path)-1] == final || time.Now().After(deadline) {
			return path
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c apiClient) supplement(id string, body any) (int, []byte) {
	c.t.Helper()
	code, raw, _ := c.do("POST", "/collections/"+id+"/supplement-info", body, map[string]string{"Service-Version": "2026-04-01"})
	return code, raw
}

// personaCase is one row of SANDBOX.md's persona table as a client meets it at the demo insurer.
type personaCase struct {
	pn, final string
	via       []string // statuses the path must include
	as2025    string   // the final status a 2025-01-01 poll reports, when it differs
	act       func(c apiClient, id string)
}

var personaCases = []personaCase{
	{pn: "199001010017", final: "COMPLETED", via: []string{"LOGIN", "WAITING_FOR_USER_ACTION", "COLLECTING"}},
	{pn: "191212121212", final: "COMPLETED", via: []string{"LOGIN", "WAITING_FOR_USER_ACTION", "COLLECTING"}},
	{pn: "199001010025", final: "COMPLETED_PARTIAL", via: []string{"COLLECTING"}},
	{pn: "199001010033", final: "COMPLETED_EMPTY", via: []string{"COLLECTING"}},
	{pn: "199001010041", final: "INCORRECT_CREDENTIALS", via: []string{"LOGIN"}},
	{pn: "199001010058", final: "COMPLETED", via: []string{"LOGIN", "TWO_FACTOR_PENDING", "COLLECTING"}},
	{pn: "199001010066", final: "COMPLETED", via: []string{"LOGIN", "CONTACT_FORM_PENDING", "COLLECTING"},
		act: func(c apiClient, id string) {
			c.waitStatus(id, 10*time.Second, is("CONTACT_FORM_PENDING"))
			if code, raw := c.supplement(id, map[string]any{"inputs": []map[string]string{{"type": "EMAIL", "value": "not-an-email"}}}); code != 400 {
				c.t.Fatalf("bad e-mail = %d %s", code, raw)
			}
			if code, raw := c.supplement(id, map[string]any{"inputs": []map[string]string{
				{"type": "EMAIL", "value": "tolvan@example.se"}, {"type": "MOBILE_PHONE_NUMBER", "value": "46701234567"}}}); code != 202 {
				c.t.Fatalf("contact data = %d %s", code, raw)
			}
		}},
	{pn: "199001010074", final: "COMPLETED", via: []string{"LOGIN", "COLLECTION_INPUT_PENDING", "COLLECTING"},
		act: func(c apiClient, id string) {
			s := c.waitStatus(id, 10*time.Second, is("COLLECTION_INPUT_PENDING"))
			if types, _ := s.ExtraInformation["REQUIRED_INPUT_TYPES"].([]any); len(types) != 1 || types[0] != "EMAIL" {
				c.t.Fatalf("REQUIRED_INPUT_TYPES = %v", s.ExtraInformation)
			}
			if code, raw := c.supplement(id, map[string]any{"inputs": []map[string]string{{"type": "EMAIL", "value": "tolvan@example.se"}}}); code != 202 {
				c.t.Fatalf("input = %d %s", code, raw)
			}
		}},
	// The contact form that asks for the e-mail address alone: a mobile number it did not ask
	// for is refused, the e-mail address alone completes it.
	{pn: "199001010215", final: "COMPLETED", via: []string{"LOGIN", "CONTACT_FORM_PENDING", "COLLECTING"},
		act: func(c apiClient, id string) {
			s := c.waitStatus(id, 10*time.Second, is("CONTACT_FORM_PENDING"))
			if types, _ := s.ExtraInformation["REQUIRED_INPUT_TYPES"].([]any); len(types) != 1 || types[0] != "EMAIL" {
				c.t.Fatalf("REQUIRED_INPUT_TYPES = %v", s.ExtraInformation)
			}
			email := map[string]string{"type": "EMAIL", "value": "epost@example.se"}
			phone := map[string]string{"type": "MOBILE_PHONE_NUMBER", "value": "46701234567"}
			if code, raw := c.supplement(id, map[string]any{"inputs": []map[string]string{phone}}); code != 400 {
				c.t.Fatalf("a mobile number instead of the e-mail address = %d %s", code, raw)
			}
			if code, raw := c.supplement(id, map[string]any{"inputs": []map[string]string{email, phone}}); code != 400 {
				c.t.Fatalf("a mobile number besides the e-mail address = %d %s", code, raw)
			}
			if code, raw := c.supplement(id, map[string]any{"inputs": []map[string]string{email}}); code != 202 {
				c.t.Fatalf("the e-mail address alone = %d %s", code, raw)
			}
		}},
	{pn: "199001010082", final: "AUTHENTICATION_MISMATCH"},
	{pn: "199001010090", final: "AUTHENTICATION_CANCELLED"},
	{pn: "199001010108", final: "AUTHENTICATION_TIMEOUT", via: []string{"WAITING_FOR_USER_ACTION"}},
	{pn: "199001010116", final: "AUTHENTICATION_CONFLICT"},
	{pn: "199001010124", final: "ACCOUNT_TEMPORARILY_LOCKED"},
	{pn: "199001010132", final: "KYC_FORM"},
	{pn: "199001010140", final: "CUSTOMER_ENROLLMENT_REQUIRED"},
	{pn: "199001010157", final: "THIRD_PARTY_ERROR"},
	{pn: "199001010165", final: "FAILED"},
	{pn: "199001010173", final: "AUTHENTICATION_ERROR", as2025: "FAILED"},
	{pn: "199001010181", final: "TWO_FACTOR_METHOD_SELECTION_TIMEOUT", via: []string{"LOGIN"}},
	{pn: "199001010199", final: "INCORRECT_TWO_FACTOR_CODE", via: []string{"TWO_FACTOR_PENDING"}},
	{pn: "199001010207", final: "CONTACT_FORM"},
	// The deadlines: nobody answers the contact form or the input request.
	{pn: "199001010066", final: "CONTACT_FORM", via: []string{"CONTACT_FORM_PENDING"}},
	{pn: "199001010215", final: "CONTACT_FORM", via: []string{"CONTACT_FORM_PENDING"}},
	{pn: "199001010074", final: "COLLECTION_INPUT_TIMEOUT", via: []string{"COLLECTION_INPUT_PENDING"}},
}

// TestPersonas runs every persona of SANDBOX.md at the demo insurer and checks its final status,
// the path that led there and, where the 2025-01-01 version reports it otherwise, that mapping.
func TestPersonas(t *testing.T) {
	cases := personaCases
	for _, tc := range cases {
		t.Run(tc.pn+"→"+tc.final, func(t *testing.T) {
			t.Parallel()
			c := personaService(t)
			id := c.mustStart(collectionRequest{company: "se-demo-insurer", pn: tc.pn})
			if tc.act != nil {
				tc.act(c, id)
			}
			final := c.waitStatus(id, 20*time.Second, finalStatus)
			if final.Status != tc.final {
				t.Fatalf("final %s, want %s (%+v)", final.Status, tc.final, final)
			}
			path := c.historyPath(id, tc.final)
			for _, s := range tc.via {
				if !slices.Contains(path, s) {
					t.Errorf("path %v lacks %s", path, s)
				}
			}
			if tc.as2025 != "" {
				if got := c.statusAs(id, "2025-01-01").Status; got != tc.as2025 {
					t.Errorf("2025-01-01 reports %s, want %s", got, tc.as2025)
				}
			}
		})
	}
}

var qrPattern = regexp.MustCompile(`^bankid\.[^.]+\.\d+\.[0-9a-f]{64}$`)

// TestLoginMethodOtherDevice: the status shows an animated QR code that changes every second and
// an autostart token; the user "scans and signs" through the sandbox.
func TestLoginMethodOtherDevice(t *testing.T) {
	t.Parallel()
	c := personaService(t)
	// Real EID orders for one person conflict, so each parallel test signs as its own person
	// (any valid number behaves like 199001010017).
	id := c.mustStart(collectionRequest{company: "se-demo-insurer", loginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", pn: "198005051233"})
	first := c.waitStatus(id, 10*time.Second, is("WAITING_FOR_USER_ACTION"))
	qr1, _ := first.ExtraInformation["SWEDISH_MOBILE_EID_ANIMATED_QR_DATA"].(string)
	if !qrPattern.MatchString(qr1) || first.ExtraInformation["SWEDISH_MOBILE_EID_AUTOSTART_TOKEN"] == "" {
		t.Fatalf("extraInformation %v", first.ExtraInformation)
	}
	time.Sleep(1100 * time.Millisecond)
	second := c.statusAs(id, "2026-04-01")
	if qr2, _ := second.ExtraInformation["SWEDISH_MOBILE_EID_ANIMATED_QR_DATA"].(string); qr2 == qr1 || !qrPattern.MatchString(qr2) {
		t.Fatalf("the QR data did not change after a second: %q then %q", qr1, qr2)
	}
	unauthenticated := apiClient{t: t, base: c.base}
	if code, raw, _ := unauthenticated.do("POST", "/sandbox/eid/sign", map[string]string{"collectionId": id}, nil); code/100 != 2 {
		t.Fatalf("sign = %d %s", code, raw)
	}
	if final := c.waitStatus(id, 10*time.Second, finalStatus); final.Status != "COMPLETED" {
		t.Fatalf("final %+v", final)
	}
}

// TestLoginMethodSameDevice runs the INSTRUCTIONS from the "user's device" and posts the results.
func TestLoginMethodSameDevice(t *testing.T) {
	t.Parallel()
	c := personaService(t)
	id := c.mustStart(collectionRequest{company: "se-demo-insurer", loginMethod: "SWEDISH_MOBILE_EID_SAME_DEVICE_CLIENT_SIDE_AUTHENTICATION", pn: "198106061230"})
	var instructions []any
	c.waitStatus(id, 10*time.Second, func(s string) bool {
		st := c.statusAs(id, "2026-04-01")
		instructions, _ = st.ExtraInformation["INSTRUCTIONS"].([]any)
		return len(instructions) > 0 || finalStatus(s)
	})
	if len(instructions) == 0 {
		t.Fatal("no INSTRUCTIONS")
	}
	var responses []map[string]any
	for _, raw := range instructions {
		in := raw.(map[string]any)
		var body *strings.Reader
		if b, ok := in["body"].(string); ok {
			body = strings.NewReader(b)
		} else {
			body = strings.NewReader("")
		}
		req, err := http.NewRequest(in["method"].(string), in["url"].(string), body)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range in["headers"].(map[string]any) {
			req.Header.Set(k, v.(string))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("instruction %v: %v", in["url"], err)
		}
		b := new(strings.Builder)
		_, _ = io.Copy(b, resp.Body)
		_ = resp.Body.Close()
		headers := map[string]string{}
		for k := range resp.Header {
			headers[k] = resp.Header.Get(k)
		}
		responses = append(responses, map[string]any{"requestId": in["requestId"], "status": resp.StatusCode, "headers": headers, "body": b.String()})
	}
	// A ResponseObject that lacks the response to an instruction is a 400 that names it, not a
	// 202 followed by a failed collection; it changes nothing, so the whole one is taken after.
	last := responses[len(responses)-1]["requestId"].(string)
	code, raw := c.supplement(id, map[string]any{"responses": responses[:len(responses)-1]})
	if code != http.StatusBadRequest || !strings.Contains(string(raw), last) {
		t.Fatalf("responses without %s = %d %s, want a 400 naming it", last, code, raw)
	}
	// An unknown request id is tolerated; only the known ones count.
	responses = append(responses, map[string]any{"requestId": "from-a-newer-app", "status": 200, "headers": map[string]string{}, "body": ""})
	if code, raw := c.supplement(id, map[string]any{"responses": responses}); code != 202 {
		t.Fatalf("responses = %d %s", code, raw)
	}
	if final := c.waitStatus(id, 10*time.Second, finalStatus); final.Status != "COMPLETED" {
		t.Fatalf("final %+v", final)
	}
}

// TestCompaniesAndLoginMethodNotApplicable covers availability and the login-method statuses.
func TestCompaniesAndLoginMethodNotApplicable(t *testing.T) {
	t.Parallel()
	c := personaService(t)
	code, raw, _ := c.do("GET", "/companies/availability", nil, nil)
	if code != 200 || !strings.Contains(string(raw), `"MAINTENANCE"`) {
		t.Fatalf("availability = %d %s", code, raw)
	}
	if code, out := c.start(collectionRequest{company: "se-demo-maintenance", pn: "199001010017"}); code != http.StatusConflict || out["code"] != "COMPANY_UNAVAILABLE" {
		t.Fatalf("maintenance = %d %v", code, out)
	}
	id := c.mustStart(collectionRequest{company: "ee-demo-insurer", pn: "199001010017"})
	if final := c.waitStatus(id, 10*time.Second, finalStatus); final.Status != "LOGIN_METHOD_NOT_APPLICABLE" {
		t.Fatalf("ee with EID = %+v", final)
	}
	if got := c.statusAs(id, "2025-01-01").Status; got != "REJECTED_INCORRECT_LOGIN_METHOD" {
		t.Fatalf("2025-01-01 reports %s", got)
	}
}

// TestCollectionCannotBeCancelled: the client cannot end a collection.
func TestCollectionCannotBeCancelled(t *testing.T) {
	t.Parallel()
	c := personaService(t)
	id := c.mustStart(collectionRequest{company: "se-demo-insurer", pn: "199001010017"})
	if code, raw, _ := c.do("DELETE", "/collections/"+id, nil, nil); code != http.StatusMethodNotAllowed ||
		!strings.Contains(string(raw), `"code":"COLLECTION_CANNOT_BE_CANCELLED"`) {
		t.Fatalf("DELETE = %d %s", code, raw)
	}
}
