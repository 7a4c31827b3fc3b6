package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with a space and a ')' must not shift the fields.
	stat := "4242 (sam la) x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 731 269 5 7 20 0 12 0 100 2000000 3000 18446744073709551615"
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 731+269 {
		t.Fatalf("utime+stime = %d, want %d", got, 731+269)
	}
	if _, err := parseStatCPU("4242 (samla) S 1 2"); err == nil {
		t.Fatal("a short stat line parsed")
	}
	if _, err := parseStatCPU("no parentheses"); err == nil {
		t.Fatal("a line without a command name parsed")
	}
}

func TestParseStatCPUOfThisProcess(t *testing.T) {
	// The harness's own stat must parse: the format is the kernel's, not the test's idea of it.
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	if _, err := parseStatCPU(string(b)); err != nil {
		t.Fatal(err)
	}
	if _, err := rss(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, err := rssAnon(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\tsamla\nVmPeak:\t  900000 kB\nVmRSS:\t  104512 kB\nRssAnon:\t 90000 kB\n"
	for field, want := range map[string]int64{"VmRSS": 104512, "RssAnon": 90000} {
		got, err := parseStatusKB(status, field)
		if err != nil || got != want {
			t.Fatalf("%s = %d kB, %v; want %d", field, got, err, want)
		}
	}
	if _, err := parseStatusKB("Name:\tkthreadd\n", "VmRSS"); err == nil {
		t.Fatal("a status without VmRSS parsed")
	}
	if _, err := parseStatusKB("VmRSS:\t 12 MB\n", "VmRSS"); err == nil {
		t.Fatal("a VmRSS in another unit parsed")
	}
}

func TestParseRebuildEvents(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want int64
		ok   bool
	}{
		{"rebuilt the read models from 48213 events\n", 48213, true},
		{"rebuilt 48213 events into 7 read models in 1.9s (25375 events/s)\n", 48213, true},
		{"rebuilt 1,048,213 events into 7 read models in 4.2s (249574 events/s)", 1048213, true},
		{"progress 10%\r progress 100%\nrebuilt 12 events into 7 read models in 1ms (12000 events/s)\n", 12, true},
		{"Rebuilt the read models from 0 events", 0, true},
		{"rebuilt the read models\n", 0, false},
		{"12 events", 0, false},
		{"", 0, false},
	} {
		got, ok := parseRebuildEvents(tc.out)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRebuildEvents(%q) = %d, %v; want %d, %v", tc.out, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseRebuildRate(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want float64
		ok   bool
	}{
		{"rebuilt 48213 events into 7 read models in 1.9s (25375 events/s)\n", 25375, true},
		{"rebuilt 48213 events into 7 read models in 190ms (253,752.6 events/s)", 253752.6, true},
		{"rebuilt the read models from 48213 events\n", 0, false},
	} {
		got, ok := parseRebuildRate(tc.out)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRebuildRate(%q) = %v, %v; want %v, %v", tc.out, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseClientKey(t *testing.T) {
	got, err := parseClientKey("client bench-client-b created; its API key (shown once): sk_test_abc123\n")
	if err != nil || got != "sk_test_abc123" {
		t.Fatalf("parseClientKey = %q, %v", got, err)
	}
	if _, err := parseClientKey("client created\n"); err == nil {
		t.Fatal("output without a key parsed")
	}
	if _, err := parseClientKey("its API key (shown once): \n"); err == nil {
		t.Fatal("an empty key parsed")
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0, 1 * time.Millisecond}, {0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {2, 100 * time.Millisecond}} {
		if got := percentile(d, tc.q); got != tc.want {
			t.Errorf("percentile(1..100 ms, %v) = %s, want %s", tc.q, got, tc.want)
		}
	}
	if got := percentile(nil, 0.99); got != 0 {
		t.Errorf("percentile of nothing = %s", got)
	}
	if got := percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("percentile of one sample = %s", got)
	}
}

func TestTimingCountsMissingAsSlowest(t *testing.T) {
	s := time.Second
	all := timing{n: 4, lat: []time.Duration{1 * s, 2 * s, 3 * s, 4 * s}}
	if d, ok := all.quantile(1); !ok || d != 4*s {
		t.Fatalf("max of all = %s, %v", d, ok)
	}
	// Two of four never completed: the median (rank 1 of 0..3) is still known, the max is not.
	half := timing{n: 4, lat: []time.Duration{1 * s, 2 * s}}
	if d, ok := half.quantile(0.5); !ok || d != 2*s {
		t.Fatalf("p50 of half = %s, %v", d, ok)
	}
	if _, ok := half.quantile(1); ok {
		t.Fatal("the max of a measurement with missing collections is known")
	}
	if got, want := fairRatio(all, half, 60*s), "p50 1.00×, max > 15× the time alone"; got != want {
		t.Fatalf("fairRatio = %q, want %q", got, want)
	}
	if got := half.summary(60 * s); got != "p50 2.00 s, max > 1m0s (2 of 4 within 1m0s)" {
		t.Fatalf("summary = %q", got)
	}
}

func TestParseSkip(t *testing.T) {
	got, err := parseSkip(" memory, Fairness ,")
	if err != nil || !got["memory"] || !got["fairness"] || got["rebuild"] {
		t.Fatalf("parseSkip = %v, %v", got, err)
	}
	if _, err := parseSkip("memroy"); err == nil {
		t.Fatal("a misspelt part was accepted")
	}
}

func TestApplyQuickKeepsExplicitFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	d := fs.Duration("d", 10*time.Second, "")
	postD := fs.Duration("post-d", 5*time.Second, "")
	for name := range quickDefaults {
		if fs.Lookup(name) == nil {
			fs.String(name, "", "")
		}
	}
	if err := fs.Parse([]string{"-post-d", "7s"}); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := applyQuick(fs, set); err != nil {
		t.Fatal(err)
	}
	if *d != 3*time.Second || *postD != 7*time.Second {
		t.Fatalf("-d %s -post-d %s, want 3s (quick) and 7s (explicit)", *d, *postD)
	}
}

func TestRowsFollowTheIssuesOrder(t *testing.T) {
	got := []int{rowRank("status poll, SQLite read models"), rowRank("poll right after the 201 (SQLite)"),
		rowRank("POST /collections, durable, whole pipeline running (SQLite)"), rowRank("201 → status visible (SQLite)"),
		rowRank("projection rebuild (SQLite)"), rowRank("completed collections per CPU-second (SQLite)"),
		rowRank("memory after a 30s POST load (SQLite)"), rowRank("one client's 600 collections waiting for a contact form (SQLite)")}
	for i, r := range got {
		if r != i {
			t.Fatalf("row %d ranks %d: %v", i, r, got)
		}
	}
	if r := rowRank("something else"); r != len(rowOrder) {
		t.Fatalf("an unknown row ranks %d, want last", r)
	}
}

func TestCountEventsReadsTheEventStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE events (position INTEGER PRIMARY KEY, type TEXT)"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := db.Exec("INSERT INTO events (type) VALUES ('x')"); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	n, err := countEvents(context.Background(), path)
	if err != nil || n != 3 {
		t.Fatalf("countEvents = %d, %v; want 3", n, err)
	}
	if _, err := countEvents(context.Background(), filepath.Join(t.TempDir(), "missing.db")); err == nil {
		t.Fatal("a missing event store counted")
	}
}

func TestFormatCounts(t *testing.T) {
	got := formatCounts(map[string]int{"LOGIN": 88, "CONTACT_FORM_PENDING": 512, "HTTP 404": 88})
	if want := "512 CONTACT_FORM_PENDING, 88 HTTP 404, 88 LOGIN"; got != want {
		t.Fatalf("formatCounts = %q, want %q", got, want)
	}
}

func TestParseCounts(t *testing.T) {
	if got, err := parseCounts("600, 10000"); err != nil || !slices.Equal(got, []int{600, 10000}) {
		t.Fatalf("parseCounts = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-1", "6,x", "600,"} {
		if got, err := parseCounts(bad); err == nil {
			t.Fatalf("parseCounts(%q) = %v, want an error", bad, got)
		}
	}
}

// waitIdle returns once its probe answers idle, or with the probe's error, without waiting out
// its bound.
func TestWaitIdleStopsAtTheFirstIdleAnswerOrError(t *testing.T) {
	calls := 0
	err := waitIdle(context.Background(), config{}, "test", func() (bool, error) {
		calls++
		return calls == 3, nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d probes, want nil after 3", err, calls)
	}
	broken := errors.New("probe broken")
	calls = 0
	err = waitIdle(context.Background(), config{}, "test", func() (bool, error) {
		calls++
		return false, broken
	})
	if !errors.Is(err, broken) || calls != 1 {
		t.Fatalf("err %v after %d probes, want the probe's error after 1", err, calls)
	}
}
