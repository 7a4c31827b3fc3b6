package sessiontoken

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadOrCreateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "session-keys.pem")
	first, generated, err := LoadOrCreateKeyFile(path)
	if err != nil || !generated {
		t.Fatalf("first start: generated=%v, %v", generated, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Errorf("mode = %o, want 600", mode)
	}
	again, generated, err := LoadOrCreateKeyFile(path)
	if err != nil || generated {
		t.Fatalf("second start: generated=%v, %v", generated, err)
	}
	if !slices.Equal(again.KeyIDs(), first.KeyIDs()) {
		t.Errorf("second start has keys %v, want %v", again.KeyIDs(), first.KeyIDs())
	}
	// A token of the first start verifies after a restart.
	issued, err := newTestTokens(t, first, testNow).Issue(testClient, testUser, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newTestTokens(t, again, testNow).Verify(issued.Token, testClient); err != nil {
		t.Errorf("after a restart: %v", err)
	}
}

func TestLoadKeyFileRefusesWhatIsNoKeySet(t *testing.T) {
	dir := t.TempDir()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	good, err := generate(t).MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	corrupt := slices.Clone(good)
	// Garble a byte of the base64 body: pem.Decode would skip the block without a word.
	for i := len(corrupt) - 40; i < len(corrupt)-30; i++ {
		corrupt[i] = '!'
	}
	cases := map[string][]byte{
		"empty":           nil,
		"no PEM":          []byte("hello"),
		"an ECDSA key":    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}),
		"a public key":    pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}}),
		"a corrupt block": append(slices.Clone(good), corrupt...),
		"a key twice":     append(slices.Clone(good), good...),
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadKeyFile(path); !errors.Is(err, ErrKeyFile) {
				t.Errorf("LoadKeyFile = %v, want ErrKeyFile", err)
			}
			// A start refuses it too rather than replacing it with a new key.
			if _, _, err := LoadOrCreateKeyFile(path); !errors.Is(err, ErrKeyFile) {
				t.Errorf("LoadOrCreateKeyFile = %v, want ErrKeyFile", err)
			}
		})
	}
}

func TestKeyFileAcceptsOpenSSLKeys(t *testing.T) {
	// What `openssl genpkey -algorithm ed25519` writes: RFC 8410's example key.
	const opensslKey = "-----BEGIN PRIVATE KEY-----\n" +
		"MC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n" +
		"-----END PRIVATE KEY-----\n"
	set, err := ParsePEM([]byte(opensslKey))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(set.signer().public), "19bf44096984cdfe8541bac167dc3b96c85086aa30b6b6cb0c5c38ad703166e1"; got != want {
		t.Errorf("public key = %s, want RFC 8410's %s", got, want)
	}
}

func TestKeyIDIsTheJWKThumbprint(t *testing.T) {
	// RFC 8037 appendix A: the key of A.1 has the thumbprint of A.3.
	seed, err := base64.RawURLEncoding.DecodeString("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")
	if err != nil {
		t.Fatal(err)
	}
	key := newSigningKey(ed25519.NewKeyFromSeed(seed))
	if got, want := base64.RawURLEncoding.EncodeToString(key.public), "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"; got != want {
		t.Fatalf("x = %s, want %s", got, want)
	}
	if got, want := key.id, "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Errorf("kid = %s, want RFC 8037's thumbprint %s", got, want)
	}
}

func TestRotateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session-keys.pem")
	old, _, err := LoadOrCreateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	oldToken, err := newTestTokens(t, old, testNow).Issue(testClient, testUser, "")
	if err != nil {
		t.Fatal(err)
	}

	newID, err := RotateKeyFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{newID, old.SigningKeyID()}; !slices.Equal(rotated.KeyIDs(), want) {
		t.Fatalf("keys after rotation = %v, want %v (the new key first)", rotated.KeyIDs(), want)
	}
	tokens := newTestTokens(t, rotated, testNow)
	if _, err := tokens.Verify(oldToken.Token, testClient); err != nil {
		t.Errorf("a token of the old key after rotation: %v", err)
	}
	fresh, err := tokens.Issue(testClient, testUser, "")
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Claims.KeyID != newID {
		t.Errorf("a new token is signed by %s, want the new key %s", fresh.Claims.KeyID, newID)
	}
	if _, err := tokens.Verify(fresh.Token, testClient); err != nil {
		t.Errorf("a token of the new key: %v", err)
	}
	// A process that has not re-read the file yet does not know the new key.
	if _, err := newTestTokens(t, old, testNow).Verify(fresh.Token, testClient); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("the old key set on a new token: %v, want ErrUnknownKey", err)
	}

	var jwks JWKSet
	if err := json.Unmarshal(rotated.JWKSJSON(), &jwks); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, k := range jwks.Keys {
		if k.KeyType != "OKP" || k.Curve != "Ed25519" || k.Algorithm != "EdDSA" || k.Use != "sig" || len(k.X) != 43 {
			t.Errorf("JWK %+v is not an Ed25519 signing key", k)
		}
		listed = append(listed, k.KeyID)
	}
	if !slices.Equal(listed, rotated.KeyIDs()) {
		t.Errorf("JWKS lists %v, want %v", listed, rotated.KeyIDs())
	}
	if raw := string(rotated.JWKSJSON()); strings.Contains(raw, `"d"`) {
		t.Errorf("JWKS holds a private member: %s", raw)
	}
}

func TestStagePromoteRetire(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session-keys.pem")
	// Rotating a file that does not exist creates it with its first key.
	first, err := RotateKeyFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	staged, err := RotateKeyFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	set, err := LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{first, staged}; !slices.Equal(set.KeyIDs(), want) {
		t.Fatalf("after staging: %v, want %v (a staged key verifies, the signing key stays)", set.KeyIDs(), want)
	}
	if err := PromoteKey(path, staged); err != nil {
		t.Fatal(err)
	}
	if set, _ = LoadKeyFile(path); !slices.Equal(set.KeyIDs(), []string{staged, first}) {
		t.Fatalf("after promoting: %v", set.KeyIDs())
	}
	if err := RetireKey(path, staged); !errors.Is(err, ErrRetireSigningKey) {
		t.Errorf("retiring the signing key: %v, want ErrRetireSigningKey", err)
	}
	if err := RetireKey(path, "nope"); !errors.Is(err, ErrNoSuchKey) {
		t.Errorf("retiring an unknown key: %v, want ErrNoSuchKey", err)
	}
	if err := PromoteKey(path, "nope"); !errors.Is(err, ErrNoSuchKey) {
		t.Errorf("promoting an unknown key: %v, want ErrNoSuchKey", err)
	}
	if err := RetireKey(path, first); err != nil {
		t.Fatal(err)
	}
	if set, _ = LoadKeyFile(path); !slices.Equal(set.KeyIDs(), []string{staged}) {
		t.Fatalf("after retiring: %v", set.KeyIDs())
	}
	if err := PromoteKey(filepath.Join(t.TempDir(), "missing.pem"), staged); err == nil {
		t.Error("promoting in a missing file succeeded")
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".tmp" {
			t.Errorf("a temporary file was left behind: %s", e.Name())
		}
	}
}
