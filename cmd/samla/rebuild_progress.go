// The progress of `samla projections rebuild`: a redrawn line on a terminal, a line every few
// seconds otherwise, and the final line the load harness parses.

package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/samla/samla/projections"
)

const (
	// progressRedraw is how often the terminal line is redrawn at most.
	progressRedraw = 100 * time.Millisecond
	// progressLogEvery is how often a progress line is written when stderr is no terminal (a
	// log file, CI), so that a long rebuild shows it is alive without flooding the log.
	progressLogEvery = 5 * time.Second
	progressBarWidth = 30
)

// rebuildProgress renders a rebuild's progress to w. Events/s is over the whole run so far,
// which the steady pipeline makes a fair estimate of the rest, and the ETA follows from it.
type rebuildProgress struct {
	w     io.Writer
	tty   bool
	every time.Duration

	mu    sync.Mutex
	last  time.Time // when a line was last written
	drawn bool      // a terminal line is on screen and needs ending
	now   func() time.Time
}

func newRebuildProgress(w io.Writer) *rebuildProgress {
	p := &rebuildProgress{w: w, tty: isTerminal(w), every: progressLogEvery, now: time.Now}
	if p.tty {
		p.every = progressRedraw
	}
	return p
}

// update is a projections.RebuildOptions.Progress.
func (p *rebuildProgress) update(pr projections.RebuildProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if pr.Done {
		if p.drawn {
			// Leave the last state drawn at 100% and end the line, so that the final line
			// (on stdout) starts on its own.
			fmt.Fprintf(p.w, "\r\033[K%s\n", progressLine(pr, true))
			p.drawn = false
		}
		return
	}
	if !p.last.IsZero() && now.Sub(p.last) < p.every {
		return
	}
	p.last = now
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", progressLine(pr, true))
		p.drawn = true
		return
	}
	fmt.Fprintf(p.w, "rebuild progress: %s\n", progressLine(pr, false))
}

// finish ends a terminal line left drawn by a rebuild that failed.
func (p *rebuildProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// progressLine is "[#####.....]  45%  32500/72000 events  41000 events/s  ETA 1s" (the bar only
// with bar; without a head position, no total, percentage or ETA).
func progressLine(pr projections.RebuildProgress, bar bool) string {
	var b strings.Builder
	fraction := -1.0
	if pr.Head > 0 {
		fraction = min(1, float64(pr.Position)/float64(pr.Head))
		if pr.Done {
			fraction = 1
		}
	}
	if bar && fraction >= 0 {
		filled := int(fraction * progressBarWidth)
		fmt.Fprintf(&b, "[%s%s] ", strings.Repeat("#", filled), strings.Repeat(".", progressBarWidth-filled))
	}
	if fraction >= 0 {
		fmt.Fprintf(&b, "%3.0f%%  ", fraction*100)
	}
	rate := rate(pr.Events, pr.Elapsed)
	if fraction > 0 {
		// On the SQLite store positions are dense and the estimate is the count; on
		// EventStoreDB positions are byte offsets and it is one.
		total := int(float64(pr.Events) / fraction)
		fmt.Fprintf(&b, "%d/%d events  %.0f events/s", pr.Events, total, rate)
		if rate > 0 && !pr.Done {
			eta := time.Duration(float64(total-pr.Events) / rate * float64(time.Second))
			fmt.Fprintf(&b, "  ETA %s", eta.Round(time.Second))
		}
		return b.String()
	}
	fmt.Fprintf(&b, "%d events  %.0f events/s", pr.Events, rate)
	return b.String()
}

func rate(events int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(events) / elapsed.Seconds()
}

// rebuildSummary is the final line of a rebuild, which the load harness parses:
//
//	rebuilt <N> events into <M> read models in <T> (<R> events/s)
//
// N and M integers, T a Go duration rounded to the millisecond, R an integer.
func rebuildSummary(pr projections.RebuildProgress) string {
	return fmt.Sprintf("rebuilt %d events into %d read models in %s (%.0f events/s)",
		pr.Events, pr.ReadModels, pr.Elapsed.Round(time.Millisecond), rate(pr.Events, pr.Elapsed))
}
