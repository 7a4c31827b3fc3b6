package service_test

import (
	"net/http"
	"sort"
	"testing"
	"time"
)

// BenchmarkPostToRunningVisible measures, on the embedded default, the time from
// POST /collections to RUNNING being served by GET /collections/{id}/status: the durable append,
// the relay to Kafka, the projection and the query together. It reports p50 and p99.
func BenchmarkPostToRunningVisible(b *testing.B) {
	cfg := testConfig(b, b.TempDir())
	cfg.MockSignDelay = time.Hour // the connector's later steps are not what is measured
	cfg.CompanyPoll = time.Second
	cfg.RateLimit, cfg.RateBurst = 1e6, 1e6
	svc := start(b, cfg)
	defer stop(b, svc)
	c := apiClient{t: b, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		begin := time.Now()
		id := c.startCollection("199001010017")
		for {
			code, body, _ := c.do("GET", "/collections/"+id+"/status", nil, nil)
			if code == http.StatusOK {
				break
			}
			if code != http.StatusNotFound {
				b.Fatalf("status poll = %d %s", code, body)
			}
			time.Sleep(100 * time.Microsecond)
		}
		latencies = append(latencies, time.Since(begin))
	}
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
