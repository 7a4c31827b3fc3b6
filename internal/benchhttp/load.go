package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// result is one load run: throughput and the latencies of every request.
type result struct {
	n, errs   int
	codes     map[int]int
	elapsed   time.Duration
	lat       []time.Duration // sorted
	truncated bool
}

func (r result) rps() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.n) / r.elapsed.Seconds()
}

func (r result) pct(q float64) time.Duration { return percentile(r.lat, q) }

// percentile answers the q-quantile (0 ≤ q ≤ 1) of sorted by the nearest rank below
// q·(n−1): p50 of 1..100 is 50, p99 is 99, p100 the maximum; 0 when there is no sample.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	return sorted[int(q*float64(len(sorted)-1))]
}

func (r result) String() string {
	return fmt.Sprintf("%.0f/s, p50 %s, p99 %s", r.rps(), ms(r.pct(0.5)), ms(r.pct(0.99)))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// codeNote names the answers a load run did not expect, if any.
func codeNote(r result) string {
	var parts []string
	for code, n := range r.codes {
		parts = append(parts, fmt.Sprintf("%d×%d", n, code))
	}
	if r.errs > 0 {
		parts = append(parts, fmt.Sprintf("%d errors", r.errs))
	}
	if r.truncated {
		parts = append(parts, "latencies truncated")
	}
	if len(parts) == 0 {
		return ""
	}
	slices.Sort(parts)
	return " (unexpected: " + strings.Join(parts, ", ") + ")"
}

// load drives c.conc workers, each on its own keep-alive connection, for d; every request's
// latency is kept (up to maxSamples). Worker w sends reqs[w], reqs[w+c.conc], … round the list.
// Answers other than want count in codes.
//
// The workers speak HTTP/1.1 on raw connections ((*rawConn).exchange) rather than through
// net/http's client, because the load generator shares the machine's two cores with the server
// it measures: net/http's client (a read and a write goroutine per connection, a response object
// and headers map per request) took about as much CPU as the bare Gin handler it loaded, and
// the generator's CPU is CPU the server does not get. Against the bare handler it reached
// 19.7k/s where wrk -t1 -c32 (the tool) reached 37–43k/s in the same hour.
func load(ctx context.Context, c config, d time.Duration, reqs []*http.Request, want int) result {
	if len(reqs) == 0 {
		return result{errs: 1, codes: map[int]int{}}
	}
	wire := make([][]byte, len(reqs))
	for i, req := range reqs {
		var b bytes.Buffer
		if err := req.Write(&b); err != nil {
			return result{errs: 1, codes: map[int]int{}}
		}
		wire[i] = b.Bytes()
	}
	addr := reqs[0].URL.Host
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	per := c.maxSamples / c.conc
	type wres struct {
		n, errs int
		codes   map[int]int
		lat     []time.Duration
		trunc   bool
	}
	out := make([]wres, c.conc)
	var wg sync.WaitGroup
	began := time.Now()
	for w := range c.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &out[w]
			r.codes = map[int]int{}
			r.lat = make([]time.Duration, 0, 1<<14)
			var conn *rawConn
			drop := func() {
				if conn != nil {
					conn.Close()
					conn = nil
				}
			}
			defer drop()
			for i := w; ctx.Err() == nil; i += c.conc {
				if conn == nil {
					var err error
					if conn, err = dialRaw(ctx, addr); err != nil {
						if ctx.Err() == nil {
							r.errs++
							time.Sleep(10 * time.Millisecond)
						}
						continue
					}
				}
				t0 := time.Now()
				code, keep, err := conn.exchange(wire[i%len(wire)])
				if err != nil {
					drop()
					if ctx.Err() == nil {
						r.errs++
					}
					continue
				}
				lat := time.Since(t0)
				if !keep {
					drop()
				}
				r.n++
				if code != want {
					r.codes[code]++
				}
				if len(r.lat) < per {
					r.lat = append(r.lat, lat)
				} else {
					r.trunc = true
				}
			}
		}()
	}
	wg.Wait()
	res := result{codes: map[int]int{}, elapsed: time.Since(began)}
	for _, r := range out {
		res.n += r.n
		res.errs += r.errs
		res.truncated = res.truncated || r.trunc
		for k, v := range r.codes {
			res.codes[k] += v
		}
		res.lat = append(res.lat, r.lat...)
	}
	slices.Sort(res.lat)
	return res
}

// The sandbox personas the harness uses (see SANDBOX.md): one that completes without input after
// the mock EID signs by itself, and one that waits in CONTACT_FORM_PENDING for the user.
const (
	personaCompletes   = "199001010017"
	personaContactForm = "199001010066"
)

func postBody() []byte { return postBodyFor(personaCompletes) }

func postBodyFor(personalNumber string) []byte {
	return []byte(`{"company":"se-demo-insurer","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",` +
		`"parameters":[{"type":"SwedishPersonalNumberParameter","personalNumber":"` + personalNumber + `"}]}`)
}

func setPostHeaders(req *http.Request, key string) {
	req.Header.Set("Authorization-token", key)
	req.Header.Set("Service-Version", "2026-04-01")
	req.Header.Set("Content-Type", "application/json")
}

func create(cl *http.Client, base, key string) (string, error) {
	return createFor(cl, base, key, personaCompletes)
}

func createFor(cl *http.Client, base, key, personalNumber string) (string, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/collections", bytes.NewReader(postBodyFor(personalNumber)))
	setPostHeaders(req, key)
	resp, err := cl.Do(req)
	if err != nil {
		return "", fmt.Errorf("POST /collections: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("POST /collections: %d %s", resp.StatusCode, b)
	}
	var v struct {
		CollectionID string `json:"collectionId"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.CollectionID == "" {
		return "", fmt.Errorf("POST /collections: no collectionId in %s", b)
	}
	return v.CollectionID, nil
}

// createMany creates n collections of one persona over w concurrent connections and answers
// their ids in no particular order, stopping at the first failure.
func createMany(ctx context.Context, base, key, personalNumber string, n, w int) ([]string, error) {
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: w}}
	defer cl.CloseIdleConnections() // not left open on samla through the loads that follow
	var (
		mu    sync.Mutex
		ids   = make([]string, 0, n)
		first error
		next  int
		wg    sync.WaitGroup
	)
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				if next >= n || first != nil {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				id, err := createFor(cl, base, key, personalNumber)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				} else if err == nil {
					ids = append(ids, id)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return ids, first
	}
	return ids, ctx.Err()
}

// status answers the status code of one poll and the collection's status when 200.
func status(cl *http.Client, base, key, id string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodGet, base+"/collections/"+id+"/status", nil)
	req.Header.Set("Authorization-token", key)
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("GET status: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, "", nil
	}
	var v struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(b, &v)
	return resp.StatusCode, v.Status, nil
}
