package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/command/clients"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/kafka"
	"github.com/samla/samla/platform/sessiontoken"
)

const v2 = "2026-04-01"

// createUser makes a user of c's client and waits until the users read model shows it, as a
// client that creates a session next must.
func (c apiClient) createUser(externalID string) string {
	c.t.Helper()
	code, body, _ := c.do("POST", "/users", map[string]any{"externalId": externalID}, map[string]string{"Service-Version": v2})
	if code != http.StatusCreated {
		c.t.Fatalf("POST /users = %d %s", code, body)
	}
	var u struct{ UserUUID string }
	if err := json.Unmarshal(body, &u); err != nil || u.UserUUID == "" {
		c.t.Fatalf("created user %s (%v)", body, err)
	}
	c.waitFor("user "+u.UserUUID, func() bool {
		code, _, _ := c.do("GET", "/users/"+u.UserUUID, nil, map[string]string{"Service-Version": v2})
		return code == http.StatusOK
	})
	return u.UserUUID
}

func (c apiClient) waitFor(what string, done func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not there after 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createSession returns a session token of user.
func (c apiClient) createSession(user string) (token string, expiresAt time.Time) {
	c.t.Helper()
	code, body, _ := c.do("POST", "/users/"+user+"/sessions", nil, map[string]string{"Service-Version": v2})
	if code != http.StatusCreated {
		c.t.Fatalf("POST sessions = %d %s", code, body)
	}
	var s struct {
		Token     string
		ExpiresAt time.Time
	}
	if err := json.Unmarshal(body, &s); err != nil || s.Token == "" {
		c.t.Fatalf("session %s (%v)", body, err)
	}
	return s.Token, s.ExpiresAt
}

// session is a client that presents a session token instead of an API key.
func (c apiClient) session(token string) sessionClient {
	return sessionClient{apiClient: apiClient{t: c.t, base: c.base}, token: token}
}

type sessionClient struct {
	apiClient
	token string
}

func (s sessionClient) call(method, path string, body any) (int, string, []byte) {
	s.t.Helper()
	code, b, _ := s.do(method, path, body, map[string]string{"Service-Version": v2, "Authorization": "Bearer " + s.token})
	var p struct{ Code string }
	_ = json.Unmarshal(b, &p)
	return code, p.Code, b
}

func (s sessionClient) expect(method, path string, body any, status int, code string) {
	s.t.Helper()
	got, gotCode, b := s.call(method, path, body)
	if got != status || (code != "" && gotCode != code) {
		s.t.Errorf("%s %s = %d %s, want %d %s", method, path, got, b, status, code)
	}
}

func collectionBody(user string) map[string]any {
	b := map[string]any{"company": "se-demo-insurer", "loginMethod": "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",
		"parameters": []map[string]any{{"type": "SwedishPersonalNumberParameter", "personalNumber": "191212121212"}}}
	if user != "" {
		b["userUuid"] = user
	}
	return b
}

func TestSessionsEndToEnd(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	svc := start(t, cfg)
	defer stop(t, svc)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}

	alice, bob := c.createUser("alice-e2e"), c.createUser("bob-e2e")
	token, expiresAt := c.createSession(alice)
	if d := time.Until(expiresAt); d < 14*time.Minute || d > 15*time.Minute+time.Second {
		t.Errorf("expiresAt %s is not 15 minutes ahead", expiresAt)
	}
	bobToken, _ := c.createSession(bob)
	s := c.session(token)

	// The token names its key, which the public JWKS lists.
	code, jwks, header := apiClient{t: t, base: c.base}.do("GET", "/.well-known/jwks.json", nil, nil)
	if code != http.StatusOK || header.Get("Content-Type") != "application/jwk-set+json" {
		t.Fatalf("JWKS = %d %s", code, jwks)
	}
	var set sessiontoken.JWKSet
	if err := json.Unmarshal(jwks, &set); err != nil {
		t.Fatal(err)
	}
	kid := tokenHeader(t, token)["kid"]
	if !slices.ContainsFunc(set.Keys, func(k sessiontoken.JWK) bool { return k.KeyID == kid }) {
		t.Errorf("JWKS %s lacks the token's kid %v", jwks, kid)
	}

	// The session starts a collection for its own user, and reads it, its user and its list.
	code, _, body := s.call("POST", "/collections", collectionBody(alice))
	if code != http.StatusCreated {
		t.Fatalf("session POST /collections = %d %s", code, body)
	}
	var created struct{ CollectionID string }
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	own := created.CollectionID
	s.expect("GET", "/users/"+alice, nil, http.StatusOK, "")
	s.waitFor("alice's collection in her list", func() bool {
		code, _, b := s.call("GET", "/users/"+alice+"/collections", nil)
		return code == http.StatusOK && strings.Contains(string(b), own)
	})
	s.waitFor("alice's collection completed", func() bool {
		code, _, b := s.call("GET", "/collections/"+own+"/status", nil)
		return code == http.StatusOK && strings.Contains(string(b), `"COMPLETED"`)
	})
	s.waitFor("alice's insurance data", func() bool {
		code, _, _ := s.call("GET", "/collections/"+own+"/insurance/data", nil)
		return code == http.StatusOK
	})
	s.expect("GET", "/users/"+alice+"/consents", nil, http.StatusOK, "")

	// Everything else of the client is out of the session's reach.
	bobs := c.startCollectionFor(bob)
	c.waitStatus(bobs, 10*time.Second, func(string) bool { return true })
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/users/" + bob, nil},
		{"GET", "/users/" + bob + "/collections", nil},
		{"GET", "/collections/" + bobs + "/status", nil},
		{"GET", "/collections/" + bobs + "/insurance/data", nil},
		{"GET", "/collections/" + bobs + "/wealth/data", nil},
		{"POST", "/collections/" + bobs + "/supplement-info", map[string]any{"inputs": []map[string]string{{"type": "EMAIL", "value": "a@b.se"}}}},
		{"POST", "/collections", collectionBody(bob)},
		{"POST", "/collections", collectionBody("")},
		{"GET", "/collections/" + own + "/events", nil},
		{"DELETE", "/collections/" + own, nil},
		{"GET", "/companies", nil},
		{"GET", "/companies/availability", nil},
		{"GET", "/companies/se-demo-insurer/availability", nil},
		{"GET", "/data?collectionId=" + own, nil},
		{"GET", "/users?externalId=alice-e2e", nil},
		{"POST", "/users", map[string]any{"externalId": "mallory"}},
		{"DELETE", "/users/" + alice, nil},
		{"POST", "/users/" + alice + "/sessions", nil},
		{"GET", "/users/" + bob + "/consents", nil},
	} {
		got, gotCode, b := s.call(r.method, r.path, r.body)
		if got != http.StatusForbidden || gotCode != "FORBIDDEN_FOR_SESSION" {
			t.Errorf("session %s %s = %d %s, want 403 FORBIDDEN_FOR_SESSION", r.method, r.path, got, b)
		}
	}

	// A token of another client's user: refused beside this client's key, and alone it reaches
	// only its own user, whose uuid names nobody here.
	otherKey, err := CreateClient(context.Background(), cfg, testLogger(t), "other-tenant", "Other")
	if err != nil {
		t.Fatal(err)
	}
	other := apiClient{t: t, base: c.base, key: otherKey}
	other.waitFor("the other client's key", func() bool {
		code, _, _ := other.do("GET", "/companies", nil, nil)
		return code == http.StatusOK
	})
	carol := other.createUser("carol-e2e")
	carolToken, _ := other.createSession(carol)
	code, body, _ = c.do("GET", "/users/"+carol, nil, map[string]string{"Service-Version": v2, "Authorization": "Bearer " + carolToken})
	if code != http.StatusUnauthorized || problemCodeOf(body) != "TOKEN_WRONG_AUDIENCE" {
		t.Errorf("another client's token beside this client's key = %d %s", code, body)
	}
	c.session(carolToken).expect("GET", "/users/"+alice, nil, http.StatusForbidden, "FORBIDDEN_FOR_SESSION")
	c.session(carolToken).expect("GET", "/collections/"+own+"/status", nil, http.StatusNotFound, "")

	// Every way a token fails is a 401 that says which.
	keys, err := sessiontoken.LoadKeyFile(filepath.Join(cfg.DataDir, SessionKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	issueAt := func(keys *sessiontoken.KeySet, issuer string, at time.Time) string {
		tokens, err := sessiontoken.New(keys, sessiontoken.Config{Issuer: issuer, Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		issued, err := tokens.Issue(clients.SandboxClientID, alice, "")
		if err != nil {
			t.Fatal(err)
		}
		return issued.Token
	}
	foreignKeys, err := sessiontoken.GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(token, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(mustDecode(t, parts[1])), alice, bob, 1))) + "." + parts[2]
	for name, tc := range map[string]struct{ token, code string }{
		"expired":       {issueAt(keys, DefaultJWTIssuer, time.Now().Add(-time.Hour)), "TOKEN_EXPIRED"},
		"not yet valid": {issueAt(keys, DefaultJWTIssuer, time.Now().Add(time.Hour)), "TOKEN_NOT_YET_VALID"},
		"unknown key":   {issueAt(foreignKeys, DefaultJWTIssuer, time.Now()), "TOKEN_UNKNOWN_KEY"},
		"other issuer":  {issueAt(keys, "another-deployment", time.Now()), "TOKEN_WRONG_ISSUER"},
		"alg none":      {none, "TOKEN_UNSUPPORTED_ALGORITHM"},
		"tampered":      {tampered, "TOKEN_INVALID_SIGNATURE"},
		"garbage":       {"garbage", "TOKEN_MALFORMED"},
	} {
		got, gotCode, b := c.session(tc.token).call("GET", "/users/"+alice, nil)
		if got != http.StatusUnauthorized || gotCode != tc.code {
			t.Errorf("%s token = %d %s, want 401 %s", name, got, b, tc.code)
		}
	}
	// The test's own token of the service's key is as good as the service's: the cases above
	// fail for their reason alone.
	c.session(issueAt(keys, DefaultJWTIssuer, time.Now())).expect("GET", "/users/"+alice, nil, http.StatusOK, "")

	// Deleting the user ends its sessions at the next request once the users read model has the
	// deletion; the other user's session goes on.
	if code, body, _ := c.do("DELETE", "/users/"+alice, nil, map[string]string{"Service-Version": v2}); code != http.StatusNoContent {
		t.Fatalf("DELETE /users = %d %s", code, body)
	}
	c.waitFor("alice deleted in the read model", func() bool {
		code, b, _ := c.do("GET", "/users/"+alice, nil, map[string]string{"Service-Version": v2})
		return code == http.StatusOK && strings.Contains(string(b), `"deletedAt"`) && !strings.Contains(string(b), `"deletedAt":null`)
	})
	s.expect("GET", "/users/"+alice, nil, http.StatusUnauthorized, "TOKEN_REVOKED")
	s.expect("GET", "/collections/"+own+"/status", nil, http.StatusUnauthorized, "TOKEN_REVOKED")
	c.session(bobToken).expect("GET", "/users/"+bob, nil, http.StatusOK, "")
	// And no new session is made for the deleted user.
	if code, body, _ := c.do("POST", "/users/"+alice+"/sessions", nil, map[string]string{"Service-Version": v2}); code != http.StatusNotFound {
		t.Errorf("a session of a deleted user = %d %s", code, body)
	}
}

func (c apiClient) startCollectionFor(user string) string {
	c.t.Helper()
	code, body, _ := c.do("POST", "/collections", collectionBody(user), map[string]string{"Service-Version": v2})
	if code != http.StatusCreated {
		c.t.Fatalf("POST /collections = %d %s", code, body)
	}
	var created struct{ CollectionID string }
	if err := json.Unmarshal(body, &created); err != nil {
		c.t.Fatal(err)
	}
	return created.CollectionID
}

func tokenHeader(t *testing.T, token string) map[string]any {
	t.Helper()
	var h map[string]any
	if err := json.Unmarshal(mustDecode(t, strings.Split(token, ".")[0]), &h); err != nil {
		t.Fatal(err)
	}
	return h
}

func mustDecode(t *testing.T, segment string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(segment)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func problemCodeOf(body []byte) string {
	var p struct{ Code string }
	_ = json.Unmarshal(body, &p)
	return p.Code
}

// TestSessionRightAfterCreatingTheUser: the command role issues a session for a user the moment
// POST /users answered, and the session works on the command role at once, even while the users
// read model has not seen the user (here: its projection is stopped); the user's DELETE ends it
// at the next request all the same.
func TestSessionRightAfterCreatingTheUser(t *testing.T) {
	dir := t.TempDir()
	broker, err := kafka.StartEmbedded(filepath.Join(dir, "broker"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	run := func(roles Roles) *Service {
		cfg := testConfig(t, dir)
		useBroker(cfg, broker)
		svc, err := Start(t.Context(), cfg, roles, testLogger(t))
		if err != nil {
			t.Fatalf("start %+v: %v", roles, err)
		}
		return svc
	}
	relay := run(Roles{Relay: true})
	defer stop(t, relay)
	project := run(Roles{Project: true})
	command := run(Roles{Command: true})
	defer stop(t, command)
	c := apiClient{t: t, base: "http://" + command.HTTPAddr(), key: testAPIKey}
	waitAuthenticated(t, c)
	stop(t, project) // from here on the users read model sees nothing

	code, body, _ := c.do("POST", "/users", map[string]any{"externalId": "right-after"}, map[string]string{"Service-Version": v2})
	var u struct{ UserUUID string }
	if code != http.StatusCreated || json.Unmarshal(body, &u) != nil {
		t.Fatalf("POST /users = %d %s", code, body)
	}
	token, _ := c.createSession(u.UserUUID)
	s := c.session(token)
	s.expect("POST", "/collections", collectionBody(u.UserUUID), http.StatusCreated, "")

	if code, body, _ := c.do("DELETE", "/users/"+u.UserUUID, nil, map[string]string{"Service-Version": v2}); code != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", code, body)
	}
	s.expect("POST", "/collections", collectionBody(u.UserUUID), http.StatusUnauthorized, "TOKEN_REVOKED")
	if code, body, _ := c.do("POST", "/users/"+u.UserUUID+"/sessions", nil, map[string]string{"Service-Version": v2}); code != http.StatusNotFound {
		t.Fatalf("a session of the deleted user = %d %s", code, body)
	}
}

// TestDeleteWaitsUntilTheUsersReadModelShowsIt: a user deleted before the users read model saw it
// created (here: its projection is stopped) is refused by the session check at once, from the
// event store; but the read model, once it runs, applies the creation before the deletion, and
// would let the user's token work again for a moment. So the DELETE answers only once the read
// model itself shows the deletion, and the token never works again after the 204.
func TestDeleteWaitsUntilTheUsersReadModelShowsIt(t *testing.T) {
	dir := t.TempDir()
	broker, err := kafka.StartEmbedded(filepath.Join(dir, "broker"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	run := func(roles Roles) *Service {
		cfg := testConfig(t, dir)
		useBroker(cfg, broker)
		svc, err := Start(t.Context(), cfg, roles, testLogger(t))
		if err != nil {
			t.Fatalf("start %+v: %v", roles, err)
		}
		return svc
	}
	relay := run(Roles{Relay: true})
	defer stop(t, relay)
	project := run(Roles{Project: true})
	command := run(Roles{Command: true})
	defer stop(t, command)
	c := apiClient{t: t, base: "http://" + command.HTTPAddr(), key: testAPIKey}
	waitAuthenticated(t, c)
	stop(t, project) // the users read model sees nothing until it starts again

	code, body, _ := c.do("POST", "/users", map[string]any{"externalId": "deleted-unseen"}, map[string]string{"Service-Version": v2})
	var u struct{ UserUUID string }
	if code != http.StatusCreated || json.Unmarshal(body, &u) != nil {
		t.Fatalf("POST /users = %d %s", code, body)
	}
	token, _ := c.createSession(u.UserUUID)
	s := c.session(token)

	deleted := make(chan int, 1)
	go func() {
		code, _, _ := c.do("DELETE", "/users/"+u.UserUUID, nil, map[string]string{"Service-Version": v2})
		deleted <- code
	}()
	select {
	case code := <-deleted:
		t.Fatalf("DELETE = %d while the users read model has not seen the user", code)
	case <-time.After(300 * time.Millisecond):
	}
	s.expect("POST", "/collections", collectionBody(u.UserUUID), http.StatusUnauthorized, "TOKEN_REVOKED")

	project = run(Roles{Project: true})
	defer stop(t, project)
	if code := <-deleted; code != http.StatusNoContent {
		t.Fatalf("DELETE = %d once the read model runs", code)
	}
	// The read model shows the deletion: the token stays refused, whatever else it applies.
	for range 5 {
		s.expect("POST", "/collections", collectionBody(u.UserUUID), http.StatusUnauthorized, "TOKEN_REVOKED")
	}
}

// TestSessionRateLimitOfItsUser: as assembled, a session's requests take from its user's
// bucket (--session-rate-burst) besides the client's; an empty one refuses that user's session
// alone, while the client's API key and its other users go on.
func TestSessionRateLimitOfItsUser(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.SessionRateLimit, cfg.SessionRateBurst = 0.001, 3 // no refill during the test
	svc := start(t, cfg)
	defer stop(t, svc)
	api := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	first, second := api.createUser("rate-first"), api.createUser("rate-second")
	firstToken, _ := api.createSession(first)
	secondToken, _ := api.createSession(second)
	s := api.session(firstToken)
	for range 3 {
		s.expect("GET", "/users/"+first, nil, http.StatusOK, "")
	}
	s.expect("GET", "/users/"+first, nil, http.StatusTooManyRequests, "RATE_LIMITED")
	api.session(secondToken).expect("GET", "/users/"+second, nil, http.StatusOK, "")
	if code, body, _ := api.do("GET", "/users/"+first, nil, map[string]string{"Service-Version": v2}); code != http.StatusOK {
		t.Fatalf("the client's API key after its user's bucket ran out: %d %s", code, body)
	}
}

// tokenPayload is a session token's claims as sent.
func tokenPayload(t *testing.T, token string) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(mustDecode(t, strings.Split(token, ".")[1]), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSessionsEndWithTheirAPIKey: as assembled, a session token names the API key it was minted
// with, and revoking that key (as `samla clients revoke-key` does) ends its sessions within the
// key's own bound (the authentication cache's TTL plus the projection's lag), with 401
// TOKEN_REVOKED, while a session of the same user minted with another key of the client goes on.
// A key in its rotation grace still mints sessions that work.
func TestSessionsEndWithTheirAPIKey(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir())
	cfg.SessionRateLimit, cfg.SessionRateBurst = 1000, 1000 // the poll below is no rate-limit test
	logger := testLogger(t)
	const clientID = "sess-revoke"
	keyA, err := CreateClient(ctx, cfg, logger, clientID, "Session Revoke AB")
	if err != nil {
		t.Fatal(err)
	}
	svc := start(t, cfg)
	defer stop(t, svc)
	base := "http://" + svc.HTTPAddr()
	if a, _ := until(t, func() keysAnswer { return call(t, base, keyA, "/companies") }, answered(http.StatusOK)); a.status != http.StatusOK {
		t.Fatalf("key A: %d %s", a.status, a.body)
	}
	// Key B; key A retires in an hour, and works until then.
	rotated, err := RotateClientKey(ctx, cfg, logger, clientID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(rotated.Retiring) != 1 {
		t.Fatalf("rotated: %d retiring keys, want key A", len(rotated.Retiring))
	}
	keyAID := rotated.Retiring[0].ID
	if a, _ := until(t, func() keysAnswer { return call(t, base, rotated.Key, "/companies") }, answered(http.StatusOK)); a.status != http.StatusOK {
		t.Fatalf("key B: %d %s", a.status, a.body)
	}
	withA := apiClient{t: t, base: base, key: keyA}
	withB := apiClient{t: t, base: base, key: rotated.Key}
	user := withA.createUser("revoked-key-user")
	tokenA, _ := withA.createSession(user)
	tokenB, _ := withB.createSession(user)
	// Each token names its key by id, never the key.
	if got := tokenPayload(t, tokenA)["akid"]; got != keyAID {
		t.Errorf("key A's token names key %v, want %s", got, keyAID)
	}
	if got := tokenPayload(t, tokenB)["akid"]; got != rotated.KeyID {
		t.Errorf("key B's token names key %v, want %s", got, rotated.KeyID)
	}
	ofA, ofB := withA.session(tokenA), withB.session(tokenB)
	ofA.expect("GET", "/users/"+user, nil, http.StatusOK, "") // key A is retiring, not revoked
	ofB.expect("GET", "/users/"+user, nil, http.StatusOK, "")

	if err := RevokeClientKey(ctx, cfg, logger, clientID, keyAID); err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Now()
	var (
		code    int
		problem string
		body    []byte
	)
	for {
		code, problem, body = ofA.call("GET", "/users/"+user, nil)
		if code != http.StatusOK || time.Since(revokedAt) > keysWait {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	took := time.Since(revokedAt)
	if code != http.StatusUnauthorized || problem != "TOKEN_REVOKED" || !strings.Contains(string(body), "API key") {
		t.Fatalf("key A's session %s after the revocation: %d %s", took, code, body)
	}
	if took > httpapi.DefaultAuthPositiveTTL+3*time.Second {
		t.Errorf("key A's session stopped %s after the revocation, later than the key's own bound", took)
	}
	t.Logf("key A's session stopped %s after the revocation", took.Round(time.Millisecond))
	ofB.expect("GET", "/users/"+user, nil, http.StatusOK, "")
	if code, body, _ := withB.do("GET", "/users/"+user, nil, map[string]string{"Service-Version": v2}); code != http.StatusOK {
		t.Fatalf("key B after key A's revocation: %d %s", code, body)
	}
	// Key A mints no more sessions: it does not authenticate.
	if code, body, _ := withA.do("POST", "/users/"+user+"/sessions", nil, map[string]string{"Service-Version": v2}); code != http.StatusUnauthorized {
		t.Fatalf("a session of revoked key A = %d %s", code, body)
	}
}
