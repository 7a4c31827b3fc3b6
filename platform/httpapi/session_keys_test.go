package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

// fakeSessionKeys is a SessionKeys over a client's key ids: a key listed is active
// until its end (zero: none) on clock; a key not listed, or revoked, is not. It counts lookups.
type fakeSessionKeys struct {
	mu      sync.Mutex
	clock   *clock
	until   map[[2]string]time.Time
	revoked map[[2]string]bool
	err     error
	calls   int
}

func newFakeSessionKeys(clk *clock) *fakeSessionKeys {
	return &fakeSessionKeys{clock: clk, until: map[[2]string]time.Time{}, revoked: map[[2]string]bool{}}
}

func (f *fakeSessionKeys) add(clientID, keyID string, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.until[[2]string{clientID, keyID}] = until
}

func (f *fakeSessionKeys) revoke(clientID, keyID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked[[2]string{clientID, keyID}] = true
}

func (f *fakeSessionKeys) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeSessionKeys) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeSessionKeys) KeyActiveUntil(_ context.Context, clientID, keyID string) (bool, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return false, time.Time{}, f.err
	}
	id := [2]string{clientID, keyID}
	until, ok := f.until[id]
	if !ok || f.revoked[id] || (!until.IsZero() && !f.clock.now().Before(until)) {
		return false, time.Time{}, nil
	}
	return true, until, nil
}

// newSessionKeysEnv is newSessionEnv with SessionKeys, acme's keys k-a and k-b active, and the
// engine's caches on a clock of the test's (returned).
func newSessionKeysEnv(t *testing.T) (*sessionEnv, *fakeSessionKeys, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	keys := newFakeSessionKeys(clk)
	keys.add("acme", "k-a", time.Time{})
	keys.add("acme", "k-b", time.Time{})
	env := newSessionEnv(t, func(o *Options) { o.SessionKeys, o.Now = keys, clk.now })
	return env, keys, clk
}

func (e *sessionEnv) tokenOfKey(t *testing.T, clientID, userUUID, apiKeyID string) string {
	t.Helper()
	issued, err := e.tokens.Issue(clientID, userUUID, apiKeyID)
	if err != nil {
		t.Fatal(err)
	}
	return issued.Token
}

// TestSessionEndsWithItsAPIKey: a session minted with an API key that is then revoked is refused
// (401 TOKEN_REVOKED, saying so) once the cache's PositiveTTL has passed, with the API key sent
// beside it too; the same user's session minted with another, active key of the client goes on.
func TestSessionEndsWithItsAPIKey(t *testing.T) {
	env, keys, clk := newSessionKeysEnv(t)
	path := "/users/" + sessUser
	ofA, ofB := env.tokenOfKey(t, "acme", sessUser, "k-a"), env.tokenOfKey(t, "acme", sessUser, "k-b")
	for _, tok := range []string{ofA, ofB, ofA, ofB} {
		if w := env.do(t, http.MethodGet, path, "", bearer(tok)); w.Code != http.StatusOK {
			t.Fatalf("a session of an active key: %d %s", w.Code, w.Body)
		}
	}
	if got := keys.callCount(); got != 2 {
		t.Errorf("%d key lookups for 2 keys, want one each: the answers are cached", got)
	}

	keys.revoke("acme", "k-a")
	// Cached as active: the revocation takes effect within PositiveTTL, as for the key itself.
	clk.advance(DefaultAuthPositiveTTL)
	p := decodeProblem(t, env.do(t, http.MethodGet, path, "", bearer(ofA)), http.StatusUnauthorized, CodeTokenRevoked)
	if !strings.Contains(p.Detail, "API key that created this session") {
		t.Errorf("detail %q does not say the API key was revoked", p.Detail)
	}
	decodeProblem(t, env.do(t, http.MethodGet, path, "", bearer(ofA, HeaderAPIKey, testKey)), http.StatusUnauthorized, CodeTokenRevoked)
	if client, user, session := principalOf(t, env.do(t, http.MethodGet, path, "", bearer(ofB))); client != "acme" || user != sessUser || !session {
		t.Errorf("the session of the other key: principal %s/%s/%v", client, user, session)
	}
	// A key id is the client's: acme's k-b names no key of another client.
	env.users.set("other", sessUser, true)
	decodeProblem(t, env.do(t, http.MethodGet, path, "", bearer(env.tokenOfKey(t, "other", sessUser, "k-b"))),
		http.StatusUnauthorized, CodeTokenRevoked)
}

// TestSessionOfARetiringKey: a key in its rotation grace still authenticates, and so do its
// sessions, until its end, which the cache honours rather than its PositiveTTL.
func TestSessionOfARetiringKey(t *testing.T) {
	env, keys, clk := newSessionKeysEnv(t)
	end := clk.now().Add(2 * time.Second)
	keys.add("acme", "k-old", end)
	tok := env.tokenOfKey(t, "acme", sessUser, "k-old")
	path := "/users/" + sessUser
	if w := env.do(t, http.MethodGet, path, "", bearer(tok)); w.Code != http.StatusOK {
		t.Fatalf("a session of a retiring key: %d %s", w.Code, w.Body)
	}
	clk.advance(2 * time.Second) // the end, well before PositiveTTL
	decodeProblem(t, env.do(t, http.MethodGet, path, "", bearer(tok)), http.StatusUnauthorized, CodeTokenRevoked)
}

// TestSessionWithoutItsAPIKey: a token that names no API key (minted before tokens did) is not
// checked against any: it stays valid until it expires.
func TestSessionWithoutItsAPIKey(t *testing.T) {
	env, keys, _ := newSessionKeysEnv(t)
	keys.revoke("acme", "k-a")
	keys.revoke("acme", "k-b")
	if client, user, session := principalOf(t, env.do(t, http.MethodGet, "/users/"+sessUser, "", bearer(env.token(t, "acme", sessUser)))); client != "acme" || user != sessUser || !session {
		t.Errorf("a token without akid: principal %s/%s/%v", client, user, session)
	}
	if got := keys.callCount(); got != 0 {
		t.Errorf("%d key lookups for a token that names no key", got)
	}
}

// TestSessionKeyLookupFails: a failing key lookup is a 503, not a refusal, and is not cached.
func TestSessionKeyLookupFails(t *testing.T) {
	env, keys, _ := newSessionKeysEnv(t)
	tok := env.tokenOfKey(t, "acme", sessUser, "k-a")
	path := "/users/" + sessUser
	keys.setErr(errors.New("read model down"))
	decodeProblem(t, env.do(t, http.MethodGet, path, "", bearer(tok)), http.StatusServiceUnavailable, CodeServiceUnavailable)
	keys.setErr(nil)
	if w := env.do(t, http.MethodGet, path, "", bearer(tok)); w.Code != http.StatusOK {
		t.Fatalf("once the lookup works again: %d %s", w.Code, w.Body)
	}
}

// infoKeys is a KeyInfoLookup over fakeKeys that names each key k-<client>.
type infoKeys struct{ *fakeKeys }

func (k infoKeys) LookupValidUntil(ctx context.Context, apiKey string) (string, time.Time, error) {
	id, err := k.Lookup(ctx, apiKey)
	return id, time.Time{}, err
}

func (k infoKeys) LookupKey(ctx context.Context, apiKey string) (KeyInfo, error) {
	id, err := k.Lookup(ctx, apiKey)
	if err != nil {
		return KeyInfo{}, err
	}
	return KeyInfo{ClientID: id, KeyID: "k-" + id}, nil
}

// TestAPIKeyIDOfTheRequest: a request authenticated by API key knows the key's id, from the
// lookup and from the cache alike (what a session it mints records); a session's request does
// not have one.
func TestAPIKeyIDOfTheRequest(t *testing.T) {
	fake := newFakeKeys()
	env := newSessionEnv(t, func(o *Options) { o.Keys = infoKeys{fake} })
	keyID := func(c *gin.Context) { c.String(http.StatusOK, APIKeyID(c)) }
	env.engine.GET("/keyid", keyID)
	env.engine.GET("/keyid/:userUuid", AllowSessionsOfPathUser, keyID)
	for i := range 2 {
		if w := env.do(t, http.MethodGet, "/keyid", "", authed()); w.Code != http.StatusOK || w.Body.String() != "k-acme" {
			t.Errorf("request %d: APIKeyID = %d %q, want k-acme", i, w.Code, w.Body)
		}
	}
	if got := fake.callCount(); got != 1 {
		t.Errorf("%d key lookups, want 1: the second request's key id comes from the cache", got)
	}
	if w := env.do(t, http.MethodGet, "/keyid/"+sessUser, "", bearer(env.token(t, "acme", sessUser))); w.Code != http.StatusOK || w.Body.String() != "" {
		t.Errorf("a session's APIKeyID = %d %q, want none", w.Code, w.Body)
	}
}
