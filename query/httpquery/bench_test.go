package httpquery_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
	"github.com/samla/samla/query"
	"github.com/samla/samla/query/httpquery"
)

// BenchmarkStatusPoll is one status poll through the whole engine (authentication, rate limit,
// version mapping, the presenter, JSON), with the reader answering from memory as the status
// view does: what the framework and Samla's own code cost per poll, storage aside. The
// WAITING case computes the animated QR data of the second.
func BenchmarkStatusPoll(b *testing.B) {
	started := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	const waitingID = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a61"
	status := &fakeStatus{rows: map[string]query.StatusView{
		acmeID: {CollectionID: acmeID, Tenant: "acme", Company: "se-demo-insurer", Product: "INSURANCE",
			LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01", Status: "COMPLETED",
			ExtraInformation: map[string]any{}, UpdatedAt: started},
		waitingID: {CollectionID: waitingID, Tenant: "acme", Company: "se-demo-insurer", Product: "INSURANCE",
			LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", Status: "WAITING_FOR_USER_ACTION", UpdatedAt: started,
			Message: "Scan the QR code", QRStartSecret: "d28db9a7-4cde-429e-a983-359be676944c",
			EIDOrder: &query.EIDOrderView{QRStartToken: "67df3917-fa0d-44e5-b327-edcc928297f8", AutoStartToken: "auto-1", StartedAt: started}},
	}}
	eng := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme"},
		RateLimit: httpapi.RateLimit{PerSecond: 1e9, Burst: 1e9}})
	httpquery.RegisterRoutes(eng, httpquery.Deps{Status: status, History: &fakeHistory{}, Companies: companytest.Catalog(),
		Now: func() time.Time { return started.Add(7 * time.Second) }})
	for _, bc := range []struct{ name, id string }{{"completed", acmeID}, {"waiting-qr", waitingID}} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/collections/"+bc.id+"/status", nil)
			req.Header.Set("Authorization-token", acmeKey)
			req.Header.Set("Service-Version", "2026-04-01")
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				eng.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status = %d %s", w.Code, w.Body)
				}
			}
		})
	}
}
