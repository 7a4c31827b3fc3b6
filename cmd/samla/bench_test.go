package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
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
	b.ReportMetric(percentileMS(latencies, 0.50), "p50-ms")
	b.ReportMetric(percentileMS(latencies, 0.99), "p99-ms")
}

// BenchmarkPersonaRun runs every persona of SANDBOX.md at once on the embedded default, as
// clients would: each polls its collection's status every 100 ms until it is final (answering
// the contact form and the input request where its persona asks). One op is the whole run; the
// p50 and p99 latency of every status poll made meanwhile are reported.
func BenchmarkPersonaRun(b *testing.B) {
	cfg := personaConfig(b, b.TempDir())
	cfg.RateLimit, cfg.RateBurst = 1e6, 1e6
	svc := start(b, cfg)
	defer stop(b, svc)
	c := apiClient{t: b, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	var mu sync.Mutex
	var polls []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		for _, pc := range personaCases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := c.mustStart(collectionRequest{company: "se-demo-insurer", pn: pc.pn})
				if pc.act != nil {
					pc.act(c, id)
				}
				for {
					begin := time.Now()
					code, body, _ := c.do("GET", "/collections/"+id+"/status", nil, nil)
					took := time.Since(begin)
					mu.Lock()
					polls = append(polls, took)
					mu.Unlock()
					if code == http.StatusOK && finalStatus(jsonStatus(body)) {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	b.ReportMetric(percentileMS(polls, 0.50), "poll-p50-ms")
	b.ReportMetric(percentileMS(polls, 0.99), "poll-p99-ms")
	b.ReportMetric(float64(len(polls))/float64(b.N), "polls/op")
}

func jsonStatus(body []byte) string {
	var s struct{ Status string }
	_ = json.Unmarshal(body, &s)
	return s.Status
}

// percentileMS sorts ds and returns its p-th percentile (0 ≤ p ≤ 1) in milliseconds.
func percentileMS(ds []time.Duration, p float64) float64 {
	slices.Sort(ds)
	return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000
}
