package httpquery_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/query/httpquery"
)

func TestCompanies(t *testing.T) {
	e := newEnv(t)
	w := e.get(t, "/companies", acmeKey, "")
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d %s", w.Code, w.Body)
	}
	var list []map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 6 {
		t.Fatalf("companies = %v", list)
	}
	byID := map[string]map[string]any{}
	for _, c := range list {
		if len(c) != 5 {
			t.Fatalf("members of %v", c)
		}
		byID[c["id"].(string)] = c
	}
	insurer := byID["se-demo-insurer"]
	if insurer["displayName"] != "Demo Försäkring" || insurer["market"] != "se" ||
		len(insurer["products"].([]any)) != 1 || insurer["products"].([]any)[0] != "INSURANCE" ||
		len(insurer["loginMethods"].([]any)) != 4 {
		t.Fatalf("se-demo-insurer = %v", insurer)
	}
	if byID["fr-demo-pension-info"]["products"].([]any)[0] != "WEALTH" {
		t.Fatalf("fr-demo-pension-info = %v", byID["fr-demo-pension-info"])
	}
	// Unauthenticated callers get nothing.
	if w := e.get(t, "/companies", "nope", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("unauthenticated = %d", w.Code)
	}
}

func TestCompaniesAvailability(t *testing.T) {
	e := newEnv(t)
	w := e.get(t, "/companies/availability", acmeKey, "2026-04-01")
	if w.Code != http.StatusOK || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("status = %d %v %s", w.Code, w.Header(), w.Body)
	}
	var list []httpquery.AvailabilityResponse
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	statuses := map[string]httpquery.AvailabilityResponse{}
	for _, a := range list {
		statuses[a.Company] = a
	}
	if len(statuses) != 6 || statuses["se-demo-insurer"].Status != string(company.Available) ||
		statuses["se-demo-maintenance"].Status != string(company.Maintenance) || statuses["se-demo-maintenance"].Message == "" ||
		len(statuses["ee-demo-insurer"].LoginMethods) != 1 {
		t.Fatalf("availability = %+v", list)
	}

	w = e.get(t, "/companies/se-demo-maintenance/availability", acmeKey, "")
	want := `{"company":"se-demo-maintenance","status":"MAINTENANCE","loginMethods":["SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK"],` +
		`"message":"Planned maintenance; try again later."}`
	if w.Code != http.StatusOK || w.Body.String() != want {
		t.Fatalf("one = %d %s", w.Code, w.Body)
	}
	// An available company has no message member.
	w = e.get(t, "/companies/ee-demo-insurer/availability", acmeKey, "")
	if w.Body.String() != `{"company":"ee-demo-insurer","status":"AVAILABLE","loginMethods":["PDF_UPLOAD"]}` {
		t.Fatalf("ee = %s", w.Body)
	}
	for _, id := range []string{"no-such-company", "SE-DEMO-INSURER"} {
		if code := problemCode(t, e.get(t, "/companies/"+id+"/availability", acmeKey, ""), http.StatusNotFound); code != httpquery.CodeCompanyNotFound {
			t.Fatalf("%s: code = %s", id, code)
		}
	}
}
