package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// acceptAsync accepts one connection from ln in the background.
func acceptAsync(ln net.Listener) chan net.Conn {
	got := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(got)
			return
		}
		got <- c
	}()
	return got
}

func listen(t *testing.T, b *connBudget) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln = b.wrap(ln)
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

func dial(t *testing.T, ln net.Listener) {
	t.Helper()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
}

// TestConnBudgetIsSharedByItsListeners: two listeners of one budget of 2 hold 2 connections
// together; the third waits until one closes (a second Close releases nothing more), and
// closing a waiting listener ends its Accept.
func TestConnBudgetIsSharedByItsListeners(t *testing.T) {
	b := newConnBudget(2)
	a, c := listen(t, b), listen(t, b)
	dial(t, a)
	dial(t, c)
	first, second := <-acceptAsync(a), <-acceptAsync(c)
	if first == nil || second == nil {
		t.Fatal("the first two connections were not accepted")
	}
	dial(t, a)
	third := acceptAsync(a)
	select {
	case <-third:
		t.Fatal("a third connection was accepted beyond the budget of 2")
	case <-time.After(100 * time.Millisecond):
	}
	_ = second.Close()
	_ = second.Close() // releases its slot once
	select {
	case conn := <-third:
		if conn == nil {
			t.Fatal("the waiting Accept failed")
		}
		defer conn.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a closed connection did not let the waiting one in")
	}
	if n := len(b.slots); n != 2 {
		t.Fatalf("%d slots taken, want 2 (the first and the third)", n)
	}
	waiting := acceptAsync(c)
	_ = c.Close()
	select {
	case conn := <-waiting:
		if conn != nil {
			t.Fatal("a closed listener accepted a connection")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing the listener did not end its waiting Accept")
	}
	_ = first.Close()
	if _, err := c.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener: %v", err)
	}
}

// TestOpsAnswersWhileThePublicBudgetIsTaken: idle connections that take every slot of the API
// listener leave the ops listener's probes answering.
func TestOpsAnswersWhileThePublicBudgetIsTaken(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.MaxConnections = 3
	svc := start(t, cfg)
	defer stop(t, svc)
	for range cfg.MaxConnections + 2 {
		c, err := net.Dial("tcp", svc.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	client := &http.Client{Timeout: 500 * time.Millisecond}
	if res, err := client.Get("http://" + svc.HTTPAddr() + "/health"); err == nil {
		_ = res.Body.Close()
		t.Fatal("the API answered past its budget of 3 held connections")
	}
	res, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + svc.OpsAddr() + "/livez")
	if err != nil {
		t.Fatalf("GET /livez while the API's connections are all held: %v", err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /livez = %d", res.StatusCode)
	}
}

// TestConnBudgetsStayWithinTheFileLimit: the budgets together leave fdReserve of the process's
// descriptor limit, however many connections are asked for.
func TestConnBudgetsStayWithinTheFileLimit(t *testing.T) {
	limit, ok := fileLimit()
	if !ok {
		t.Skip("no finite RLIMIT_NOFILE")
	}
	_, public := newConnBudgets(1 << 30)
	if total := public + opsConnections + sandboxConnections; total > limit-fdReserve && public > 64 {
		t.Fatalf("budgets of %d connections with a limit of %d descriptors", total, limit)
	}
	if _, public := newConnBudgets(10); public != 10 {
		t.Fatalf("a small --max-connections became %d", public)
	}
}

// TestReadyzSeesTheBroker: /readyz answers 503 once the Kafka broker takes no connections.
func TestReadyzSeesTheBroker(t *testing.T) {
	svc := start(t, testConfig(t, t.TempDir()))
	defer stop(t, svc)
	client := &http.Client{Timeout: 5 * time.Second}
	readyz := func() int {
		t.Helper()
		res, err := client.Get("http://" + svc.OpsAddr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	if code := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz = %d with the broker up", code)
	}
	svc.broker.Close()
	if code := readyz(); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d with the broker down, want 503", code)
	}
}

// TestPublicConnectionsAreCutNeverRaised: --max-connections is cut to what the descriptor
// limit leaves, to no less than 64, and never raised above what was asked; 0 asks for what the
// limit leaves. (A limit of 2,000 used to turn --max-connections 10 into 64.)
func TestPublicConnectionsAreCutNeverRaised(t *testing.T) {
	others := fdReserve + opsConnections + sandboxConnections
	for _, tc := range []struct {
		asked, limit int
		finite       bool
		want         int
	}{
		{10000, 1 << 20, true, 10000},
		{10000, others + 5000, true, 5000},
		{10, 2000, true, 10},
		{100, 2000, true, 64},
		{0, others + 5000, true, 5000},
		{0, 2000, true, 64},
		{0, 0, false, 0},
		{10000, 0, false, 10000},
	} {
		if got := publicConnections(tc.asked, tc.limit, tc.finite); got != tc.want {
			t.Errorf("asked %d, limit %d (finite %v): %d, want %d", tc.asked, tc.limit, tc.finite, got, tc.want)
		}
	}
}

// TestListenerConnectionGauges: /metrics shows what each budget holds and may hold.
func TestListenerConnectionGauges(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.MaxConnections = 50
	svc := start(t, cfg)
	defer stop(t, svc)
	c, err := net.Dial("tcp", svc.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	scrape := func() string {
		res, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + svc.OpsAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(body)
	}
	body := scrape()
	for _, want := range []string{
		`samla_listener_connections_max{budget="public"} 50`,
		`samla_listener_connections_max{budget="ops"} 64`,
		`samla_listener_connections_max{budget="sandbox"} 1024`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The idle connection to the API and the scrape itself on ops, each beside the slot its
	// listener's waiting Accept holds ahead. The dial returns once the kernel has the
	// connection, which the server's Accept may take a moment later: scrape until it has.
	held := func(body, gauge string) int {
		i := strings.Index(body, gauge)
		if i < 0 {
			t.Fatalf("/metrics lacks %s", gauge)
		}
		var n int
		if _, err := fmt.Sscan(body[i+len(gauge):], &n); err != nil {
			t.Fatalf("%s: %v", gauge, err)
		}
		return n
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, gauge := range []string{`samla_listener_connections{budget="public"} `, `samla_listener_connections{budget="ops"} `} {
		for n := held(body, gauge); n < 2; n = held(body, gauge) {
			if time.Now().After(deadline) {
				t.Fatalf("%s%d after 5 s, want at least 2", gauge, n)
			}
			time.Sleep(10 * time.Millisecond)
			body = scrape()
		}
	}
}
