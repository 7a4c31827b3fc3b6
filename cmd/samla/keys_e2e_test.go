package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/platform/httpapi"
)

// Issue 10's API keys and rate limits against a running service: a rotation with a grace (both
// keys, then the new one only), a revocation within the cache's bound, a client's own rate limit
// set while the service runs (the 6th quick request is a 429 with Retry-After and RateLimit-*,
// another client unaffected), and the failed-authentication limit per source address. The
// operator's changes go through the same functions as `samla clients rotate-key|revoke-key|set`,
// beside the running service.

// keysWait bounds how long a change takes to reach the API: the projection's lag plus the
// caches (httpapi.DefaultAuthPositiveTTL, httpapi.RateLimitSettingsTTL), with room for a slow
// machine.
const keysWait = httpapi.DefaultAuthPositiveTTL + 10*time.Second

type keysAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (a keysAnswer) code() string {
	var p httpapi.Problem
	_ = json.Unmarshal(a.body, &p)
	return p.Code
}

// call is GET path with key.
func call(t *testing.T, base, key, path string) keysAnswer {
	t.Helper()
	code, body, header := apiClient{t: t, base: base, key: key}.do(http.MethodGet, path, nil, nil)
	return keysAnswer{status: code, header: header, body: body}
}

// until calls until done accepts the answer or keysWait passes; it returns the last answer and
// how long it took.
func until(t *testing.T, c func() keysAnswer, done func(keysAnswer) bool) (keysAnswer, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		a := c()
		if done(a) || time.Since(start) > keysWait {
			return a, time.Since(start)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func answered(status int) func(keysAnswer) bool {
	return func(a keysAnswer) bool { return a.status == status }
}

func TestAPIKeyRotationRevocationAndRateLimitsEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir())
	logger := testLogger(t)
	firstKey, err := CreateClient(ctx, cfg, logger, "keys-acme", "Keys Acme AB")
	if err != nil {
		t.Fatal(err)
	}
	betaKey, err := CreateClient(ctx, cfg, logger, "keys-beta", "Keys Beta AB")
	if err != nil {
		t.Fatal(err)
	}
	svc := start(t, cfg)
	defer stop(t, svc)
	base := "http://" + svc.HTTPAddr()
	const path = "/companies"
	if a, _ := until(t, func() keysAnswer { return call(t, base, firstKey, path) }, answered(200)); a.status != 200 {
		t.Fatalf("the first key: %d %s", a.status, a.body)
	}
	// Every authenticated answer says where the client stands: the default here.
	if a := call(t, base, firstKey, path); a.header.Get("RateLimit-Limit") != strconv.Itoa(cfg.RateBurst) ||
		a.header.Get("RateLimit-Remaining") == "" || a.header.Get("RateLimit-Reset") == "" {
		t.Fatalf("RateLimit headers of a 200: %v", a.header)
	}

	// Rotation with a 2 s grace: the new key works (once projected), the old one too, until
	// its end, then only the new one.
	const grace = 2 * time.Second
	rotated, err := RotateClientKey(ctx, cfg, logger, "keys-acme", grace)
	if err != nil {
		t.Fatal(err)
	}
	if len(rotated.Retiring) != 1 || len(rotated.Revoked) != 0 || !strings.HasPrefix(rotated.Key, "samla_keys-acme_") {
		t.Fatalf("rotated %+v", rotated.Retiring)
	}
	end := rotated.Retiring[0].ValidUntil
	if a, took := until(t, func() keysAnswer { return call(t, base, rotated.Key, path) }, answered(200)); a.status != 200 {
		t.Fatalf("the new key after %s: %d %s", took, a.status, a.body)
	}
	if a := call(t, base, firstKey, path); time.Now().Before(end) && a.status != 200 {
		t.Fatalf("the old key during its grace: %d %s", a.status, a.body)
	}
	retired, took := until(t, func() keysAnswer { return call(t, base, firstKey, path) }, answered(401))
	if retired.status != 401 || retired.code() != httpapi.CodeUnauthorized {
		t.Fatalf("the old key after its grace: %d %s", retired.status, retired.body)
	}
	// A node that cached the old key before the retirement reached it trusts it at most its
	// cache's TTL longer; one that learnt of the end stops at it.
	if now := time.Now(); now.Before(end) || now.After(end.Add(httpapi.DefaultAuthPositiveTTL+3*time.Second)) {
		t.Fatalf("the old key stopped %s after its end", now.Sub(end))
	}
	t.Logf("the old key stopped %s after the rotation, %s after its end", took.Round(time.Millisecond), time.Since(end).Round(time.Millisecond))
	if a := call(t, base, rotated.Key, path); a.status != 200 {
		t.Fatalf("the new key after the grace: %d %s", a.status, a.body)
	}
	keys, err := ClientKeys(ctx, cfg, "keys-acme")
	if err != nil || len(keys) != 2 || keys[1].ID != rotated.KeyID || !keys[1].ActiveAt(time.Now()) || keys[0].ActiveAt(time.Now()) {
		t.Fatalf("keys after the grace: %+v, %v", keys, err)
	}

	// Revocation: a key in use (so cached as valid) stops within the cache's bound.
	third, err := RotateClientKey(ctx, cfg, logger, "keys-acme", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := until(t, func() keysAnswer { return call(t, base, third.Key, path) }, answered(200)); a.status != 200 {
		t.Fatalf("the third key: %d %s", a.status, a.body)
	}
	if a := call(t, base, rotated.Key, path); a.status != 200 {
		t.Fatalf("the second key while retiring: %d %s", a.status, a.body)
	}
	if err := RevokeClientKey(ctx, cfg, logger, "keys-acme", rotated.KeyID); err != nil {
		t.Fatal(err)
	}
	revoked, took := until(t, func() keysAnswer { return call(t, base, rotated.Key, path) }, answered(401))
	if revoked.status != 401 || took > httpapi.DefaultAuthPositiveTTL+3*time.Second {
		t.Fatalf("the revoked key after %s: %d %s", took, revoked.status, revoked.body)
	}
	t.Logf("the revocation took effect after %s (cache TTL %s)", took.Round(time.Millisecond), httpapi.DefaultAuthPositiveTTL)
	if a := call(t, base, third.Key, path); a.status != 200 {
		t.Fatalf("the third key after the revocation: %d %s", a.status, a.body)
	}
	if err := RevokeClientKey(ctx, cfg, logger, "keys-acme", "k-unknown"); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("revoking an unknown key: %v", err)
	}

	// A client's own limit, set while the service runs: 5/s, a burst of 5.
	rate, burst := 5.0, 5
	if _, err := SetClientSettings(ctx, cfg, logger, "keys-beta", &rate, &burst, nil); err != nil {
		t.Fatal(err)
	}
	applied, took := until(t, func() keysAnswer { return call(t, base, betaKey, path) },
		func(a keysAnswer) bool { return a.header.Get("RateLimit-Limit") == "5" })
	if applied.header.Get("RateLimit-Limit") != "5" {
		t.Fatalf("the client's own limit after %s: %v", took, applied.header)
	}
	t.Logf("the client's own limit applied after %s", took.Round(time.Millisecond))
	time.Sleep(1100 * time.Millisecond) // the bucket refills: 5 tokens at 5/s
	var answers []keysAnswer
	started := time.Now()
	for len(answers) == 0 || answers[len(answers)-1].status == 200 {
		if len(answers) > 20 {
			t.Fatal("no 429 in 20 quick requests")
		}
		answers = append(answers, call(t, base, betaKey, path))
	}
	elapsed := time.Since(started)
	refused := answers[len(answers)-1]
	served := len(answers) - 1
	// 5 at once, and one more per 200 ms the burst took.
	if served < burst || served > burst+int(elapsed/(200*time.Millisecond)) || (elapsed < 200*time.Millisecond && served != burst) {
		t.Fatalf("%d served before the 429, in %s", served, elapsed)
	}
	for i, a := range answers[:served] {
		if a.header.Get("RateLimit-Limit") != "5" || a.header.Get("RateLimit-Remaining") == "" {
			t.Fatalf("answer %d: %v", i+1, a.header)
		}
	}
	if refused.status != 429 || refused.code() != httpapi.CodeRateLimited || refused.header.Get("RateLimit-Limit") != "5" ||
		refused.header.Get("RateLimit-Remaining") != "0" || refused.header.Get("RateLimit-Reset") == "" {
		t.Fatalf("the %dth quick request: %d %s %v", len(answers), refused.status, refused.body, refused.header)
	}
	if after, err := strconv.Atoi(refused.header.Get("Retry-After")); err != nil || after < 1 || after > 1 {
		t.Fatalf("Retry-After %q", refused.header.Get("Retry-After"))
	}
	// Another client is unaffected, with the default.
	if a := call(t, base, third.Key, path); a.status != 200 || a.header.Get("RateLimit-Limit") != strconv.Itoa(cfg.RateBurst) {
		t.Fatalf("another client while beta is limited: %d %v", a.status, a.header)
	}
	// Retry-After is enough.
	time.Sleep(time.Second)
	if a := call(t, base, betaKey, path); a.status != 200 {
		t.Fatalf("beta after Retry-After: %d %s", a.status, a.body)
	}
}

// TestAuthFailuresLimitedEndToEnd: with the default limit, a source address (127.0.0.1 here)
// that sent 20 bad API keys gets 429 with Retry-After for its further failures, while a good key
// from the same address still works: nobody locks out the others behind a shared address.
func TestAuthFailuresLimitedEndToEnd(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.AuthFailureLimit = bindConfig(pflag.NewFlagSet("defaults", pflag.ContinueOnError)).AuthFailureLimit // the default, as `samla run` has it
	if cfg.AuthFailureLimit != httpapi.DefaultAuthFailureMax {
		t.Fatalf("default --auth-failure-limit %d", cfg.AuthFailureLimit)
	}
	svc := start(t, cfg)
	defer stop(t, svc)
	base := "http://" + svc.HTTPAddr()
	waitAuthenticated(t, apiClient{t: t, base: base, key: testAPIKey})
	bad := func(i int) string { return "samla_sandbox_guess" + strconv.Itoa(i) + strings.Repeat("0", 40) }
	for i := 0; i < cfg.AuthFailureLimit; i++ {
		if a := call(t, base, bad(i), "/companies"); a.status != 401 {
			t.Fatalf("bad key %d: %d %s", i+1, a.status, a.body)
		}
	}
	refused := call(t, base, bad(cfg.AuthFailureLimit), "/companies")
	if refused.status != 429 || refused.code() != httpapi.CodeRateLimited || refused.header.Get("Retry-After") == "" {
		t.Fatalf("after %d failures: %d %s %v", cfg.AuthFailureLimit, refused.status, refused.body, refused.header)
	}
	if a := call(t, base, testAPIKey, "/companies"); a.status != 200 {
		t.Fatalf("a good key from the address over its limit: %d %s", a.status, a.body)
	}
	wait, _ := strconv.Atoi(refused.header.Get("Retry-After"))
	time.Sleep(time.Duration(wait) * time.Second)
	if a := call(t, base, bad(0), "/companies"); a.status != 401 {
		t.Fatalf("a failure after Retry-After: %d %s", a.status, a.body)
	}
}

// TestClientKeyCommands drives `samla clients rotate-key|revoke-key|list-keys` as a shell would.
func TestClientKeyCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		t.Helper()
		var out, errOut strings.Builder
		root := newRoot(&out, &errOut)
		root.SetArgs(append(args, "--data-dir", dir, "--log-level", "error"))
		err := root.Execute()
		return out.String() + errOut.String(), err
	}
	created, err := run("clients", "create", "--id", "acme", "--name", "Acme")
	if err != nil {
		t.Fatalf("clients create: %v %s", err, created)
	}
	first := created[strings.LastIndex(created, " ")+1:]
	first = strings.TrimSpace(first)
	out, err := run("clients", "list-keys", "--id", "acme")
	if err != nil || !strings.Contains(out, "KEY ID") || strings.Count(out, "active") != 1 {
		t.Fatalf("list-keys: %v\n%s", err, out)
	}
	firstID := strings.Fields(strings.Split(out, "\n")[1])[0]

	out, err = run("clients", "rotate-key", "--id", "acme", "--grace", "1h")
	if err != nil || !strings.Contains(out, "(shown once): samla_acme_") || !strings.Contains(out, "key "+firstID+" works until ") {
		t.Fatalf("rotate-key: %v\n%s", err, out)
	}
	listed, err := run("clients", "list-keys", "--id", "acme")
	if err != nil || !strings.Contains(listed, firstID) || !strings.Contains(listed, "retiring until ") || strings.Count(listed, "active") != 1 {
		t.Fatalf("list-keys after the rotation: %v\n%s", err, listed)
	}
	// Never a key or a hash.
	for _, secret := range []string{first, "samla_acme_"} {
		if strings.Contains(listed, secret) {
			t.Fatalf("list-keys shows %q:\n%s", secret, listed)
		}
	}
	out, err = run("clients", "rotate-key", "--id", "acme", "--grace", "0")
	if err != nil || strings.Count(out, " revoked") != 2 {
		t.Fatalf("rotate-key --grace 0: %v\n%s", err, out)
	}
	newID := strings.Fields(out)[5]
	if out, err := run("clients", "revoke-key", "--id", "acme", "--key-id", newID); err != nil || !strings.Contains(out, "key "+newID+" revoked") {
		t.Fatalf("revoke-key: %v\n%s", err, out)
	}
	if out, err := run("clients", "list-keys", "--id", "acme"); err != nil || strings.Count(out, "revoked 20") != 3 || strings.Contains(out, "active") {
		t.Fatalf("list-keys after revoking all: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"rotate-key"}, {"rotate-key", "--id", "acme", "--grace", "-1s"}, {"rotate-key", "--id", "acme", "--grace", "2200h"},
		{"rotate-key", "--id", "nobody"}, {"revoke-key", "--id", "acme"}, {"revoke-key", "--id", "acme", "--key-id", "k-nope"},
		{"list-keys"}, {"list-keys", "--id", "nobody"},
	} {
		if out, err := run(append([]string{"clients"}, args...)...); err == nil {
			t.Fatalf("clients %v succeeded:\n%s", args, out)
		}
	}
}
