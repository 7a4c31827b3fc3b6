package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// fairClientB is the second client the fairness run registers beside the bootstrap one (A).
const fairClientB = "bench-client-b"

// benchFairness measures how client A's collections waiting for a contact form affect client B's
// new ones: B's -fair-b collections (a persona that completes without input) are timed from POST
// to COMPLETED on an idle service, then again right after A has created waiting collections
// of the persona that waits in CONTACT_FORM_PENDING (their timeout set beyond the run).
func benchFairness(ctx context.Context, c config, tmp string, waiting int) ([]row, error) {
	what := fmt.Sprintf("one client's %d collections waiting for a contact form (SQLite)", waiting)
	goal := "goal: no effect on others (≈ 1×)"
	in, err := startSamla(ctx, c, tmp, fmt.Sprintf("fairness-%d", waiting), map[string]string{"SAMLA_CONTACT_FORM_TIMEOUT": c.contactTimeout.String()})
	if err != nil {
		return nil, err
	}
	defer in.p.stop()
	keyB, err := createClient(ctx, c, in, fairClientB)
	if err != nil {
		return nil, in.p.withLog(err)
	}
	cl := &http.Client{Timeout: 10 * time.Second}

	c.logf("fairness: client B's %d collections alone", c.fairB)
	alone, err := timeCollections(ctx, cl, in.base, keyB, c.fairB, c.fairTimeout)
	if err != nil {
		return nil, in.p.withLog(err)
	}
	c.logf("fairness: client A's %d collections waiting for a contact form", waiting)
	idsA, err := createMany(ctx, in.base, in.key, personaContactForm, waiting, 8)
	if err != nil {
		return nil, in.p.withLog(fmt.Errorf("client A's collections: %w", err))
	}
	c.logf("fairness: client B's %d collections beside A's", c.fairB)
	loaded, err := timeCollections(ctx, cl, in.base, keyB, c.fairB, c.fairTimeout)
	if err != nil {
		return nil, in.p.withLog(err)
	}
	// Where A's collections are at the end tells whether they waited parked (CONTACT_FORM_PENDING)
	// or queued behind each other for a worker.
	statesA := statusCounts(ctx, cl, in.base, in.key, idsA, 20*time.Second)
	v := fmt.Sprintf("client B's %d new collections, POST → COMPLETED: alone %s; beside A's %d: %s (A's at the end: %s)",
		c.fairB, alone.summary(c.fairTimeout), len(idsA), loaded.summary(c.fairTimeout), formatCounts(statesA))
	return []row{{what, v, "—", fairRatio(alone, loaded, c.fairTimeout) + "; " + goal}}, nil
}

// createClient registers a client with `samla clients create` beside the running service (the
// command takes the data dir's lock shared) and waits until its key authenticates.
func createClient(ctx context.Context, c config, in *instance, id string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, c.samlaBin, "clients", "create", "--id", id, "--name", "bench-http client "+id)
	cmd.Env = childEnv(map[string]string{"SAMLA_DATA_DIR": in.data})
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("samla clients create: %w\n%s", err, tail(stderr.String()))
	}
	key, err := parseClientKey(stdout.String())
	if err != nil {
		return "", err
	}
	// The key authenticates once the service has projected the new client: a poll of an unknown
	// collection is then 404, not 401.
	cl := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, err := status(cl, in.base, key, "00000000-0000-4000-8000-000000000000")
		if err == nil && code != http.StatusUnauthorized {
			return key, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("client %s's key still not accepted 30 s after it was created (last answer %d, %v)", id, code, err)
		}
		sleep(ctx, 50*time.Millisecond)
	}
}

// parseClientKey takes the key from `samla clients create`'s "… API key (shown once): KEY".
func parseClientKey(out string) (string, error) {
	const marker = "(shown once):"
	i := strings.LastIndex(out, marker)
	if i < 0 {
		return "", errors.New("samla clients create printed no API key")
	}
	f := strings.Fields(out[i+len(marker):])
	if len(f) == 0 {
		return "", errors.New("samla clients create printed an empty API key")
	}
	return f[0], nil
}

// timing is one fairness measurement: n collections, the sorted times to COMPLETED of those that
// completed within the bound.
type timing struct {
	n   int
	lat []time.Duration
}

// quantile answers the q-quantile with the collections that did not complete counted as slower
// than every one that did; ok is false when it falls on one of those.
func (t timing) quantile(q float64) (time.Duration, bool) {
	if t.n == 0 {
		return 0, false
	}
	i := int(q * float64(t.n-1))
	if i >= len(t.lat) {
		return 0, false
	}
	return t.lat[i], true
}

func (t timing) summary(bound time.Duration) string {
	f := func(q float64) string {
		if d, ok := t.quantile(q); ok {
			return fmt.Sprintf("%.2f s", d.Seconds())
		}
		return fmt.Sprintf("> %s", bound)
	}
	return fmt.Sprintf("p50 %s, max %s (%d of %d within %s)", f(0.5), f(1), len(t.lat), t.n, bound)
}

// fairRatio compares the loaded measurement with the one alone at p50 and at the maximum; a
// quantile beyond the bound gives a lower bound of the ratio.
func fairRatio(alone, loaded timing, bound time.Duration) string {
	f := func(q float64, name string) string {
		a, okA := alone.quantile(q)
		l, okL := loaded.quantile(q)
		switch {
		case !okA || a <= 0:
			return name + " n/a"
		case !okL:
			return fmt.Sprintf("%s > %.0f×", name, bound.Seconds()/a.Seconds())
		default:
			return fmt.Sprintf("%s %.2f×", name, l.Seconds()/a.Seconds())
		}
	}
	return f(0.5, "p50") + ", " + f(1, "max") + " the time alone"
}

// timeCollections creates n collections that complete without input, one after another, and
// polls them every 50 ms until COMPLETED or bound.
func timeCollections(ctx context.Context, cl *http.Client, base, key string, n int, bound time.Duration) (timing, error) {
	items := make([]*tracked, 0, n)
	for range n {
		t0 := time.Now()
		id, err := create(cl, base, key)
		if err != nil {
			return timing{}, err
		}
		items = append(items, &tracked{id: id, started: t0})
	}
	track(ctx, cl, base, key, items, 50*time.Millisecond, bound)
	return timing{n: n, lat: tookSorted(items, "COMPLETED")}, ctx.Err()
}

// statusCounts polls each id once (within bound) and counts them by status; a poll that failed
// or was not 200 counts under its code, those not polled in time under "not polled".
func statusCounts(ctx context.Context, cl *http.Client, base, key string, ids []string, bound time.Duration) map[string]int {
	deadline := time.Now().Add(bound)
	out := map[string]int{}
	for _, id := range ids {
		if ctx.Err() != nil || time.Now().After(deadline) {
			out["not polled"]++
			continue
		}
		code, st, err := status(cl, base, key, id)
		switch {
		case err != nil:
			out["poll failed"]++
		case code != http.StatusOK:
			out[fmt.Sprintf("HTTP %d", code)]++
		default:
			out[st]++
		}
	}
	return out
}

// formatCounts lists counts by decreasing count, then name: "512 CONTACT_FORM_PENDING, 88 LOGIN".
func formatCounts(m map[string]int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}
