package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/projections"
)

// TestRebuildSummaryLine: the final line has the format the load harness parses.
func TestRebuildSummaryLine(t *testing.T) {
	got := rebuildSummary(projections.RebuildProgress{Events: 72054, ReadModels: 8, Elapsed: 1500 * time.Millisecond, Done: true})
	if got != "rebuilt 72054 events into 8 read models in 1.5s (48036 events/s)" {
		t.Fatalf("summary %q", got)
	}
	re := regexp.MustCompile(`^rebuilt (\d+) events into (\d+) read models in (\S+) \((\d+) events/s\)$`)
	if !re.MatchString(got) {
		t.Fatalf("summary %q does not parse", got)
	}
}

// TestRebuildProgressOffTerminal: without a terminal, a progress line at most every
// progressLogEvery, with done/total, rate and ETA, and nothing at the end (the summary is the
// caller's).
func TestRebuildProgressOffTerminal(t *testing.T) {
	var out bytes.Buffer
	p := newRebuildProgress(&out)
	now := time.Unix(0, 0)
	p.now = func() time.Time { return now }
	for i := 1; i <= 10; i++ {
		now = now.Add(time.Second)
		p.update(projections.RebuildProgress{Events: i * 1000, Position: uint64(i * 1000), Head: 10000,
			ReadModels: 8, Elapsed: time.Duration(i) * time.Second})
	}
	p.update(projections.RebuildProgress{Events: 10000, Position: 10000, Head: 10000, ReadModels: 8,
		Elapsed: 10 * time.Second, Done: true})
	p.finish()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"rebuild progress:  10%  1000/10000 events  1000 events/s  ETA 9s",
		"rebuild progress:  60%  6000/10000 events  1000 events/s  ETA 4s",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("progress lines:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}
}
