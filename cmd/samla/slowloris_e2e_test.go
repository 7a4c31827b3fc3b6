package main

import (
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"
)

// Slow clients (issue 10): connections that send a request's header a byte at a time, never
// finishing it, hold nothing for long. The API keeps answering /health meanwhile, and closes
// each such connection once its header took longer than the read-header timeout, however
// steadily the bytes trickle in.

// slowClient opens a connection to addr that sends a request line and then one header byte
// every interval, never ending the header. closed receives how long after the dial the server
// closed it (or 0 when it was still open at stop).
func slowClient(t *testing.T, addr string, interval time.Duration, stop <-chan struct{}, closed chan<- time.Duration, wg *sync.WaitGroup) {
	defer wg.Done()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Errorf("dial: %v", err)
		closed <- 0
		return
	}
	defer conn.Close()
	dialed := time.Now()
	if _, err := io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: samla\r\nX-Slow: "); err != nil {
		closed <- time.Since(dialed)
		return
	}
	gone := make(chan time.Duration, 1)
	go func() {
		// The server sends nothing to a request it has not read; a read returns when it
		// closes the connection.
		_, _ = conn.Read(make([]byte, 1))
		gone <- time.Since(dialed)
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case d := <-gone:
			closed <- d
			return
		case <-stop:
			closed <- 0
			return
		case <-tick.C:
			_, _ = conn.Write([]byte{'a'}) // an error: the server closed it; the read says when
		}
	}
}

// healthLatency asks for /health on a new connection and returns how long the answer took.
func healthLatency(t *testing.T, base string, limit time.Duration) time.Duration {
	t.Helper()
	client := &http.Client{Timeout: limit, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := client.Get(base + "/health")
	if err != nil {
		t.Errorf("/health: %v", err)
		return time.Since(start)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/health = %d", resp.StatusCode)
	}
	return time.Since(start)
}

func TestSlowlorisKeepsHealthAnsweringAndIsCutOff(t *testing.T) {
	const (
		conns         = 200
		headerTimeout = 1500 * time.Millisecond
		probeLimit    = 500 * time.Millisecond
	)
	cfg := testConfig(t, t.TempDir())
	cfg.ReadHeaderTimeout = headerTimeout
	svc := start(t, cfg)
	defer stop(t, svc)
	base := "http://" + svc.HTTPAddr()

	stopSlow := make(chan struct{})
	closed := make(chan time.Duration, conns)
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go slowClient(t, svc.HTTPAddr(), 100*time.Millisecond, stopSlow, closed, &wg)
	}
	// While they trickle: /health answers fast, every time.
	var probes []time.Duration
	for end := time.Now().Add(headerTimeout); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		probes = append(probes, healthLatency(t, base, 2*time.Second))
	}
	// Each slow connection is closed by the server once its header took the timeout, not
	// sooner (a slow client is not cut off at once) and not much later (trickling bytes does
	// not extend it).
	deadline := time.After(headerTimeout + 3*time.Second)
	var cut []time.Duration
	for len(cut) < conns {
		select {
		case d := <-closed:
			cut = append(cut, d)
		case <-deadline:
			close(stopSlow)
			t.Fatalf("%d of %d slow connections still open %s after the read-header timeout", conns-len(cut), conns, 3*time.Second)
		}
	}
	close(stopSlow)
	wg.Wait()
	sort.Slice(cut, func(i, j int) bool { return cut[i] < cut[j] })
	if cut[0] < headerTimeout-200*time.Millisecond || cut[len(cut)-1] > headerTimeout+2*time.Second {
		t.Errorf("slow connections closed after %s to %s; the read-header timeout is %s", cut[0], cut[len(cut)-1], headerTimeout)
	}
	sort.Slice(probes, func(i, j int) bool { return probes[i] < probes[j] })
	if len(probes) == 0 || probes[len(probes)-1] > probeLimit {
		t.Errorf("/health under %d slow connections: %d probes, slowest %v (limit %s)", conns, len(probes), probes, probeLimit)
	}
	t.Logf("%d slow connections closed after %s–%s; /health in %s (median) to %s (slowest) over %d probes",
		conns, cut[0].Round(time.Millisecond), cut[len(cut)-1].Round(time.Millisecond),
		probes[len(probes)/2].Round(time.Microsecond), probes[len(probes)-1].Round(time.Microsecond), len(probes))
}

// TestSlowlorisConnectionLimit: a listener holds at most SAMLA_MAX_CONNECTIONS connections; a
// connection beyond them waits, unaccepted, until one of those ends (here: a slow client's,
// at its read-header timeout), and is then served.
func TestSlowlorisConnectionLimit(t *testing.T) {
	const (
		limit         = 10
		headerTimeout = time.Second
	)
	cfg := testConfig(t, t.TempDir())
	cfg.ReadHeaderTimeout, cfg.MaxConnections = headerTimeout, limit
	svc := start(t, cfg)
	defer stop(t, svc)
	base := "http://" + svc.HTTPAddr()
	if d := healthLatency(t, base, 2*time.Second); d > 500*time.Millisecond {
		t.Fatalf("/health before the slow clients took %s", d)
	}

	stopSlow := make(chan struct{})
	closed := make(chan time.Duration, limit)
	var wg sync.WaitGroup
	opened := time.Now()
	for i := 0; i < limit; i++ {
		wg.Add(1)
		go slowClient(t, svc.HTTPAddr(), 100*time.Millisecond, stopSlow, closed, &wg)
	}
	time.Sleep(100 * time.Millisecond) // all of them accepted
	// The limit is taken: /health waits until the slow connections are cut off, then answers.
	d := healthLatency(t, base, headerTimeout+3*time.Second)
	waited := time.Since(opened)
	close(stopSlow)
	wg.Wait()
	if waited < headerTimeout-200*time.Millisecond {
		t.Errorf("/health answered after %s (%s since the %d slow connections opened): the limit of %d connections did not hold",
			d, waited, limit, limit)
	}
	if t.Failed() {
		return
	}
	t.Logf("with %d connections held, /health was accepted after %s", limit, d.Round(time.Millisecond))
}
