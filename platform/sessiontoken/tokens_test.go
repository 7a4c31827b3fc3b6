package sessiontoken

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	testIssuer = "samla-test"
	testClient = "acme"
	testUser   = "3f2b8c1e-5d4a-4b6f-9e7d-2a1c0b9f8e7d"
	// testAPIKeyID is an API key id as the apikeys read model stores it.
	testAPIKeyID = "k-0123456789ab"
)

var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func newTestTokens(t *testing.T, keys *KeySet, now time.Time) *Tokens {
	t.Helper()
	tokens, err := New(keys, Config{Issuer: testIssuer, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

func generate(t *testing.T) *KeySet {
	t.Helper()
	keys, err := GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// handMade builds a JWS compact serialization from its parts, without the JWT library, so that
// the tests can forge what the library would refuse to write.
func handMade(t *testing.T, header, payload map[string]any, sign func(input string) []byte) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(header) + "." + enc(payload)
	return input + "." + base64.RawURLEncoding.EncodeToString(sign(input))
}

// validPayload is what Issue would sign at testNow.
func validPayload() map[string]any {
	return map[string]any{
		"iss": testIssuer, "sub": testUser, "aud": testClient, "jti": "abc",
		"iat": testNow.Unix(), "nbf": testNow.Unix(), "exp": testNow.Add(15 * time.Minute).Unix(),
	}
}

func ed25519Signer(priv ed25519.PrivateKey) func(string) []byte {
	return func(input string) []byte { return ed25519.Sign(priv, []byte(input)) }
}

func TestIssueAndVerify(t *testing.T) {
	keys := generate(t)
	tokens := newTestTokens(t, keys, testNow)
	issued, err := tokens.Issue(testClient, testUser, testAPIKeyID)
	if err != nil {
		t.Fatal(err)
	}
	if issued.Claims.APIKeyID != testAPIKeyID {
		t.Errorf("issued claims name API key %q, want %q", issued.Claims.APIKeyID, testAPIKeyID)
	}
	if want := testNow.Add(DefaultTTL); !issued.ExpiresAt.Equal(want) {
		t.Errorf("expiresAt = %s, want %s", issued.ExpiresAt, want)
	}
	header, payload := decodeParts(t, issued.Token)
	if header["alg"] != "EdDSA" || header["kid"] != keys.SigningKeyID() {
		t.Errorf("header = %v", header)
	}
	for name, want := range map[string]any{"iss": testIssuer, "sub": testUser, "aud": testClient, "akid": testAPIKeyID,
		"iat": float64(testNow.Unix()), "nbf": float64(testNow.Unix()), "exp": float64(testNow.Add(DefaultTTL).Unix())} {
		if payload[name] != want {
			t.Errorf("claim %s = %v, want %v", name, payload[name], want)
		}
	}
	if jti, _ := payload["jti"].(string); len(jti) < 20 {
		t.Errorf("jti = %v, want a random id", payload["jti"])
	}
	for _, audience := range []string{"", testClient} {
		got, err := tokens.Verify(issued.Token, audience)
		if err != nil {
			t.Fatalf("Verify(audience %q): %v", audience, err)
		}
		if got != issued.Claims {
			t.Errorf("claims = %+v, want %+v", got, issued.Claims)
		}
	}
	second, err := tokens.Issue(testClient, testUser, "")
	if err != nil {
		t.Fatal(err)
	}
	if second.Claims.TokenID == issued.Claims.TokenID {
		t.Error("two tokens share a jti")
	}
}

// TestTokensWithoutAnAPIKey: a token issued without an API key id carries no akid claim at all,
// and one without it (as every token minted before the claim existed) verifies, naming none.
func TestTokensWithoutAnAPIKey(t *testing.T) {
	keys := generate(t)
	tokens := newTestTokens(t, keys, testNow)
	issued, err := tokens.Issue(testClient, testUser, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, payload := decodeParts(t, issued.Token); payload["akid"] != nil {
		t.Errorf("akid = %v in a token issued without an API key id", payload["akid"])
	}
	old := handMade(t, map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": keys.SigningKeyID()}, validPayload(),
		ed25519Signer(keys.signer().private))
	got, err := tokens.Verify(old, testClient)
	if err != nil || got.APIKeyID != "" || got.UserUUID != testUser {
		t.Fatalf("Verify(a token without akid) = %+v, %v", got, err)
	}
	if _, err := tokens.Issue(testClient, testUser, strings.Repeat("k", maxAPIKeyIDBytes+1)); err == nil {
		t.Error("Issue took an API key id longer than the bound")
	}
}

func decodeParts(t *testing.T, token string) (header, payload map[string]any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts", len(parts))
	}
	for i, dst := range []*map[string]any{&header, &payload} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			t.Fatal(err)
		}
	}
	return header, payload
}

func TestVerifyRefusesEachFailureMode(t *testing.T) {
	keys := generate(t)
	tokens := newTestTokens(t, keys, testNow)
	kid := keys.SigningKeyID()
	signer := ed25519Signer(keys.signer().private)
	_, foreign, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edHeader := map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": kid}
	with := func(name string, value any) map[string]any {
		p := validPayload()
		if value == nil {
			delete(p, name)
		} else {
			p[name] = value
		}
		return p
	}
	valid := handMade(t, edHeader, validPayload(), signer)
	if _, err := tokens.Verify(valid, testClient); err != nil {
		t.Fatalf("the hand-made reference token does not verify: %v", err)
	}
	// A valid token with its payload replaced by another user's: the signature no longer fits.
	parts := strings.Split(valid, ".")
	otherUser := with("sub", "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d")
	otherPayload, _ := json.Marshal(otherUser)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(otherPayload) + "." + parts[2]

	cases := []struct {
		name     string
		token    string
		audience string
		want     error
	}{
		{"alg none", handMade(t, map[string]any{"alg": "none", "typ": "JWT", "kid": kid}, validPayload(),
			func(string) []byte { return nil }), "", ErrUnsupportedAlgorithm},
		{"alg none without kid", handMade(t, map[string]any{"alg": "none"}, validPayload(),
			func(string) []byte { return nil }), "", ErrUnsupportedAlgorithm},
		{"HS256 keyed with the public key", handMade(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": kid}, validPayload(),
			func(input string) []byte {
				mac := hmac.New(sha256.New, keys.signer().public)
				mac.Write([]byte(input))
				return mac.Sum(nil)
			}), "", ErrUnsupportedAlgorithm},
		{"an algorithm nobody knows", handMade(t, map[string]any{"alg": "XY999", "kid": kid}, validPayload(), signer), "", ErrUnsupportedAlgorithm},
		{"no alg", handMade(t, map[string]any{"kid": kid}, validPayload(), signer), "", ErrUnsupportedAlgorithm},
		{"foreign key under a known kid", handMade(t, edHeader, validPayload(), ed25519Signer(foreign)), "", ErrInvalidSignature},
		{"unknown kid", handMade(t, map[string]any{"alg": "EdDSA", "kid": "not-a-key-of-ours"}, validPayload(), signer), "", ErrUnknownKey},
		{"no kid", handMade(t, map[string]any{"alg": "EdDSA"}, validPayload(), signer), "", ErrUnknownKey},
		{"tampered payload", tampered, "", ErrInvalidSignature},
		{"expired", handMade(t, edHeader, with("exp", testNow.Add(-ClockSkew-time.Second).Unix()), signer), "", ErrExpired},
		{"nbf in the future", handMade(t, edHeader, with("nbf", testNow.Add(ClockSkew+time.Minute).Unix()), signer), "", ErrNotYetValid},
		{"iat in the future", handMade(t, edHeader, with("iat", testNow.Add(ClockSkew+time.Minute).Unix()), signer), "", ErrNotYetValid},
		{"wrong audience", valid, "other-client", ErrWrongAudience},
		{"wrong issuer", handMade(t, edHeader, with("iss", "another-deployment"), signer), "", ErrWrongIssuer},
		{"missing sub", handMade(t, edHeader, with("sub", nil), signer), "", ErrMalformed},
		{"sub that is no user uuid", handMade(t, edHeader, with("sub", "admin"), signer), "", ErrMalformed},
		{"sub in uppercase", handMade(t, edHeader, with("sub", strings.ToUpper(testUser)), signer), "", ErrMalformed},
		// Signed with our key but valid for years: no deployment issues that, a leaked key might.
		{"exp years after iat", handMade(t, edHeader, with("exp", testNow.Add(5*365*24*time.Hour).Unix()), signer), "", ErrMalformed},
		{"exp just past the longest TTL", handMade(t, edHeader, with("exp", testNow.Add(MaxTTL+time.Second).Unix()), signer), "", ErrMalformed},
		{"a crit header", handMade(t, map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": kid, "crit": []string{"exp"}}, validPayload(), signer),
			"", ErrMalformed},
		{"a crit header naming an extension", handMade(t, map[string]any{"alg": "EdDSA", "kid": kid, "crit": []string{"samla-x"}, "samla-x": true},
			validPayload(), signer), "", ErrMalformed},
		{"missing aud", handMade(t, edHeader, with("aud", nil), signer), "", ErrMalformed},
		{"akid that is no string", handMade(t, edHeader, with("akid", 42), signer), "", ErrMalformed},
		{"akid longer than the bound", handMade(t, edHeader, with("akid", strings.Repeat("k", maxAPIKeyIDBytes+1)), signer), "", ErrMalformed},
		{"aud of two clients", handMade(t, edHeader, with("aud", []string{testClient, "other"}), signer), "", ErrMalformed},
		{"missing exp", handMade(t, edHeader, with("exp", nil), signer), "", ErrMalformed},
		{"missing jti", handMade(t, edHeader, with("jti", nil), signer), "", ErrMalformed},
		{"exp that is no number", handMade(t, edHeader, with("exp", "tomorrow"), signer), "", ErrMalformed},
		{"garbage", "this is not a token", "", ErrMalformed},
		{"two parts", "eyJhbGciOiJFZERTQSJ9.e30", "", ErrMalformed},
		{"four parts", valid + ".x", "", ErrMalformed},
		{"empty", "", "", ErrMalformed},
		{"header not base64", "%%%." + parts[1] + "." + parts[2], "", ErrMalformed},
		{"oversized", valid + strings.Repeat("A", maxTokenBytes), "", ErrMalformed},
	}
	failures := []error{ErrMalformed, ErrUnsupportedAlgorithm, ErrUnknownKey, ErrInvalidSignature, ErrExpired,
		ErrNotYetValid, ErrWrongAudience, ErrWrongIssuer}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tokens.Verify(tc.token, tc.audience)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			for _, other := range failures {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("the error also wraps %v", other)
				}
			}
		})
	}
}

func TestVerifyToleratesClockSkew(t *testing.T) {
	keys := generate(t)
	issuer := newTestTokens(t, keys, testNow)
	issued, err := issuer.Issue(testClient, testUser, "")
	if err != nil {
		t.Fatal(err)
	}
	// A replica whose clock is a little behind the issuer's, and one at the token's very end.
	for _, now := range []time.Time{testNow.Add(-ClockSkew + time.Second), issued.ExpiresAt.Add(ClockSkew - time.Second)} {
		if _, err := newTestTokens(t, keys, now).Verify(issued.Token, testClient); err != nil {
			t.Errorf("at %s: %v", now, err)
		}
	}
	if _, err := newTestTokens(t, keys, issued.ExpiresAt.Add(ClockSkew)).Verify(issued.Token, ""); !errors.Is(err, ErrExpired) {
		t.Errorf("after the skew: %v, want ErrExpired", err)
	}
}

func TestNewRefusesABadConfig(t *testing.T) {
	keys := generate(t)
	for _, cfg := range []Config{{}, {Issuer: "x", TTL: -time.Second}, {Issuer: "x", TTL: MaxTTL + time.Second}} {
		if _, err := New(keys, cfg); err == nil {
			t.Errorf("New(%+v) accepted it", cfg)
		}
	}
	if _, err := New(nil, Config{Issuer: "x"}); err == nil {
		t.Error("New without keys accepted it")
	}
	tokens, err := New(keys, Config{Issuer: "x", TTL: time.Minute, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	issued, err := tokens.Issue(testClient, testUser, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := testNow.Add(time.Minute); !issued.ExpiresAt.Equal(want) {
		t.Errorf("expiresAt = %s, want %s (the configured TTL)", issued.ExpiresAt, want)
	}
}

// BenchmarkVerify is the cost a session token adds to each request before the user lookup.
func BenchmarkVerify(b *testing.B) {
	keys, err := GenerateKeySet()
	if err != nil {
		b.Fatal(err)
	}
	tokens, err := New(keys, Config{Issuer: testIssuer})
	if err != nil {
		b.Fatal(err)
	}
	issued, err := tokens.Issue(testClient, testUser, "")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tokens.Verify(issued.Token, testClient); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTheLongestTTLVerifies: the bound on a token's lifetime refuses only what no deployment
// issues.
func TestTheLongestTTLVerifies(t *testing.T) {
	keys := generate(t)
	tokens, err := New(keys, Config{Issuer: testIssuer, TTL: MaxTTL, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	issued, err := tokens.Issue(testClient, testUser, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Verify(issued.Token, testClient); err != nil {
		t.Fatalf("a token of the longest TTL: %v", err)
	}
}
