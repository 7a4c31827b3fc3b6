package httpquery_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/domain/eid"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
	"github.com/samla/samla/query"
	"github.com/samla/samla/query/httpquery"
)

const (
	acmeKey   = "acme-key-0123456789abcdef0123456789abcdef"
	globexKey = "globex-key-0123456789abcdef0123456789abcd"
	acmeID    = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	eeID      = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c"
)

type env struct {
	engine  *gin.Engine
	status  *fakeStatus
	history *fakeHistory
}

func newEnv(t *testing.T) *env {
	t.Helper()
	updated := time.Date(2026, 5, 1, 12, 0, 3, 0, time.UTC)
	e := &env{
		status: &fakeStatus{rows: map[string]query.StatusView{
			acmeID: {CollectionID: acmeID, Tenant: "acme", Company: "se-demo-insurer", Product: "INSURANCE",
				LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01", Status: "AUTHENTICATION_ERROR",
				ExtraInformation: map[string]any{"MESSAGE": "Sign-in was rejected"}, UpdatedAt: updated},
			eeID: {CollectionID: eeID, Tenant: "acme", Company: "ee-demo-insurer", Product: "INSURANCE",
				LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", Status: "LOGIN_METHOD_NOT_APPLICABLE", UpdatedAt: updated},
		}},
		history: &fakeHistory{},
	}
	stream := collection.StreamName(acmeID)
	for rev := uint64(0); rev < 5; rev++ {
		e.history.events = append(e.history.events, query.HistoryEvent{
			EventID: "e" + string(rune('0'+rev)), Type: "collection.status-changed", SchemaVersion: 1, Tenant: "acme",
			Stream: stream, Revision: rev, Position: 10 + rev, OccurredAt: updated,
			Summary: json.RawMessage(`{"from":"RUNNING","to":"LOGIN","changedAt":"2026-05-01T12:00:03Z"}`),
		})
	}
	eng := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme", globexKey: "globex"}})
	httpquery.RegisterRoutes(eng, httpquery.Deps{Status: e.status, History: e.history, Companies: companytest.Catalog()})
	e.engine = eng
	return e
}

func (e *env) get(t *testing.T, path, key, version string) *httptest.ResponseRecorder {
	return httpapitest.Get(e.engine, path, key, version)
}

// problemCode checks the status and problem+json body of w and returns its code.
func problemCode(t *testing.T, w *httptest.ResponseRecorder, status int) string {
	t.Helper()
	return httpapitest.Problem(t, w, status).Code
}

func TestStatusPerVersion(t *testing.T) {
	e := newEnv(t)
	w := e.get(t, "/collections/"+acmeID+"/status", acmeKey, "2026-04-01")
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d %s", w.Code, w.Body)
	}
	want := `{"collectionId":"` + acmeID + `","company":"se-demo-insurer","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE",` +
		`"status":"AUTHENTICATION_ERROR","extraInformation":{"MESSAGE":"Sign-in was rejected"},"pollingInterval":1000,` +
		`"updatedAt":"2026-05-01T12:00:03.000Z"}`
	if w.Body.String() != want {
		t.Fatalf("got  %s\nwant %s", w.Body, want)
	}
	if w.Header().Get(httpapi.HeaderServiceVersion) != "2026-04-01" || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("headers = %v", w.Header())
	}
	var body map[string]any
	w = e.get(t, "/collections/"+acmeID+"/status", acmeKey, "")
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	if body["status"] != "FAILED" {
		t.Fatalf("2025-01-01 status = %v, want FAILED", body["status"])
	}
	// The company's market comes from the catalog: ee on 2025-01-01 → REJECTED_INCORRECT_LOGIN_METHOD.
	w = e.get(t, "/collections/"+eeID+"/status", acmeKey, "2025-01-01")
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	if body["status"] != "REJECTED_INCORRECT_LOGIN_METHOD" {
		t.Fatalf("ee 2025-01-01 status = %v", body["status"])
	}
	w = e.get(t, "/collections/"+eeID+"/status", acmeKey, "2026-04-01")
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	if body["status"] != "LOGIN_METHOD_NOT_APPLICABLE" {
		t.Fatalf("ee 2026-04-01 status = %v", body["status"])
	}
}

func TestStatusNotFound(t *testing.T) {
	e := newEnv(t)
	for name, tc := range map[string]struct{ path, key string }{
		"another client's":  {"/collections/" + acmeID + "/status", globexKey},
		"unknown":           {"/collections/0196a1b2-c3d4-7e5f-8a9b-000000000000/status", acmeKey},
		"not a uuid":        {"/collections/not-a-uuid/status", acmeKey},
		"events of another": {"/collections/" + acmeID + "/events", globexKey},
		"events not a uuid": {"/collections/x/events", acmeKey},
	} {
		t.Run(name, func(t *testing.T) {
			if code := problemCode(t, e.get(t, tc.path, tc.key, ""), http.StatusNotFound); code != httpquery.CodeCollectionNotFound {
				t.Fatalf("code = %s", code)
			}
		})
	}
	if len(e.history.calls) != 0 {
		t.Fatal("history was read for a collection the client cannot see")
	}
	// An uppercase spelling is the same id (uuids.Canonical), answered in its canonical form.
	w := e.get(t, "/collections/"+strings.ToUpper(acmeID)+"/status", acmeKey, "")
	var upper map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &upper); w.Code != http.StatusOK || err != nil || upper["collectionId"] != acmeID {
		t.Fatalf("uppercase id: %d %s", w.Code, w.Body)
	}
	if code := problemCode(t, e.get(t, "/collections/"+strings.ToUpper(acmeID)+"/status", globexKey, ""), http.StatusNotFound); code != httpquery.CodeCollectionNotFound {
		t.Fatalf("uppercase id of another client's: %s", code)
	}
}

func TestTenantGuardAgainstLeakyReader(t *testing.T) {
	e := newEnv(t)
	e.status.leakyRead = true
	problemCode(t, e.get(t, "/collections/"+acmeID+"/status", globexKey, ""), http.StatusNotFound)
}

func TestStatusReaderFaultIs500(t *testing.T) {
	e := newEnv(t)
	e.status.err = errors.New("read model down")
	w := e.get(t, "/collections/"+acmeID+"/status", acmeKey, "")
	if code := problemCode(t, w, http.StatusInternalServerError); code != httpapi.CodeInternal || strings.Contains(w.Body.String(), "read model down") {
		t.Fatalf("code = %s body %s", code, w.Body)
	}
}

func TestEvents(t *testing.T) {
	e := newEnv(t)
	w := e.get(t, "/collections/"+acmeID+"/events", acmeKey, "")
	if w.Code != http.StatusOK {
		t.Fatalf("events = %d %s", w.Code, w.Body)
	}
	var body struct {
		CollectionID string `json:"collectionId"`
		Events       []struct {
			EventID  string         `json:"eventId"`
			Revision uint64         `json:"revision"`
			Payload  map[string]any `json:"payload"`
		} `json:"events"`
	}
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	if body.CollectionID != acmeID || len(body.Events) != 5 || body.Events[0].Revision != 0 || body.Events[4].Revision != 4 {
		t.Fatalf("body = %+v", body)
	}
	if strings.Contains(w.Body.String(), "199001010017") {
		t.Fatal("personal data in the history")
	}
	call := e.history.calls[0]
	if call.tenant != "acme" || call.stream != "collection-"+acmeID || call.after != nil || call.limit != httpquery.DefaultEventsLimit {
		t.Fatalf("list call = %+v", call)
	}

	w = e.get(t, "/collections/"+acmeID+"/events?afterRevision=1&limit=2", acmeKey, "")
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	if len(body.Events) != 2 || body.Events[0].Revision != 2 || body.Events[1].Revision != 3 {
		t.Fatalf("page = %+v", body.Events)
	}
	if w = e.get(t, "/collections/"+acmeID+"/events?limit=1000", acmeKey, ""); w.Code != http.StatusOK {
		t.Fatalf("limit 1000 = %d", w.Code)
	}
}

func TestEventsQueryValidation(t *testing.T) {
	e := newEnv(t)
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "afterRevision=-1", "afterRevision=abc"} {
		w := e.get(t, "/collections/"+acmeID+"/events?"+q, acmeKey, "")
		if code := problemCode(t, w, http.StatusBadRequest); code != httpapi.CodeValidationFailed {
			t.Errorf("%s: code %s", q, code)
		}
	}
}

// TestStatusPollComputesTheQRData polls an EID order twice, a second apart on an injected clock:
// the animated QR data changes, follows the algorithm, and the secret never leaves the server.
func TestStatusPollComputesTheQRData(t *testing.T) {
	const (
		id     = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a60"
		token  = "67df3917-fa0d-44e5-b327-edcc928297f8"
		secret = "d28db9a7-4cde-429e-a983-359be676944c"
	)
	started := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := started.Add(10*time.Second + 400*time.Millisecond)
	status := &fakeStatus{rows: map[string]query.StatusView{id: {
		CollectionID: id, Tenant: "acme", Company: "se-demo-insurer", Product: "INSURANCE",
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", Status: "WAITING_FOR_USER_ACTION", UpdatedAt: started,
		Message: "Scan the QR code with the EID app", QRStartSecret: secret,
		EIDOrder: &query.EIDOrderView{QRStartToken: token, AutoStartToken: "auto-1", StartedAt: started},
	}}}
	eng := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme"}})
	httpquery.RegisterRoutes(eng, httpquery.Deps{Status: status, History: &fakeHistory{}, Companies: companytest.Catalog(),
		Now: func() time.Time { return now }})
	e := &env{engine: eng}

	poll := func() (map[string]any, string) {
		w := e.get(t, "/collections/"+id+"/status", acmeKey, "2026-04-01")
		if w.Code != http.StatusOK {
			t.Fatalf("status = %d %s", w.Code, w.Body)
		}
		if strings.Contains(w.Body.String(), secret) {
			t.Fatal("the QR secret is in the response")
		}
		var body struct {
			ExtraInformation map[string]any `json:"extraInformation"`
			PollingInterval  int64          `json:"pollingInterval"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		if body.PollingInterval != 1000 {
			t.Fatalf("pollingInterval = %d", body.PollingInterval)
		}
		qr, _ := body.ExtraInformation["SWEDISH_MOBILE_EID_ANIMATED_QR_DATA"].(string)
		return body.ExtraInformation, qr
	}
	first, qr1 := poll()
	now = now.Add(time.Second)
	_, qr2 := poll()
	if qr1 != eid.QRData(token, secret, started, started.Add(10*time.Second)) || !strings.HasPrefix(qr1, "bankid."+token+".10.") {
		t.Fatalf("first QR data %q", qr1)
	}
	if qr2 != eid.QRData(token, secret, started, started.Add(11*time.Second)) || qr2 == qr1 {
		t.Fatalf("second QR data %q (first %q)", qr2, qr1)
	}
	if first["SWEDISH_MOBILE_EID_AUTOSTART_TOKEN"] != "auto-1" || first["MESSAGE"] != "Scan the QR code with the EID app" {
		t.Fatalf("extraInformation = %v", first)
	}
	// 2025-01-01 presents wealth's WAITING_FOR_USER_ACTION as LOGIN, but the QR code still shows:
	// LOGIN says "check extraInformation for further actions".
	row := status.rows[id]
	row.Product = "WEALTH"
	status.rows[id] = row
	w := e.get(t, "/collections/"+id+"/status", acmeKey, "2025-01-01")
	var body map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	if body["status"] != "LOGIN" || body["extraInformation"].(map[string]any)["SWEDISH_MOBILE_EID_ANIMATED_QR_DATA"] == nil {
		t.Fatalf("2025-01-01 wealth = %v", body)
	}
	// Once final, the order is gone from the poll.
	row.Status = "AUTHENTICATION_TIMEOUT"
	status.rows[id] = row
	if extra, qr := poll(); qr != "" || extra["SWEDISH_MOBILE_EID_AUTOSTART_TOKEN"] != nil {
		t.Fatalf("final status shows %v", extra)
	}
}

func TestStatusPollShowsWhatTheStatusAsks(t *testing.T) {
	e := newEnv(t)
	row := e.status.rows[acmeID]
	row.Status, row.ExtraInformation = "CONTACT_FORM_PENDING", nil
	row.RequiredInputTypes = []string{"EMAIL", "MOBILE_PHONE_NUMBER"}
	row.Instructions = []query.InstructionView{{RequestID: "r1", Method: "GET", URL: "https://company.example/x"}}
	e.status.rows[acmeID] = row
	w := e.get(t, "/collections/"+acmeID+"/status", acmeKey, "2026-04-01")
	want := `"extraInformation":{"INSTRUCTIONS":[{"requestId":"r1","method":"GET","url":"https://company.example/x","headers":{}}],` +
		`"REQUIRED_INPUT_TYPES":["EMAIL","MOBILE_PHONE_NUMBER"]}`
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), want) {
		t.Fatalf("status = %d %s", w.Code, w.Body)
	}
}
