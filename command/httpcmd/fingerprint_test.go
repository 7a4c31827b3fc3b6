package httpcmd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/samla/samla/platform/httpapi"
)

func TestFingerprintIsKeyed(t *testing.T) {
	canonical := map[string]any{"company": "se-demo-insurer", "parameters": []any{
		map[string]string{"type": ParamSwedishPersonalNumber, "personalNumber": "199001010017"}}}
	k1, k2 := []byte(strings.Repeat("1", 32)), []byte(strings.Repeat("2", 32))
	a, err := fingerprint(k1, "acme", httpapi.V20260401, canonical)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := fingerprint(k1, "acme", httpapi.V20260401, canonical)
	b, _ := fingerprint(k2, "acme", httpapi.V20260401, canonical)
	if a != again {
		t.Fatalf("one key, one request: %s and %s", a, again)
	}
	if a == b {
		t.Fatal("two keys give the same fingerprint")
	}
	for _, f := range []string{a, b} {
		if !strings.HasPrefix(f, FingerprintScheme) || len(f) != len(FingerprintScheme)+64 {
			t.Fatalf("fingerprint %q lacks the scheme prefix or a 256-bit value", f)
		}
	}
	// The unkeyed hash of the same input, which anyone could compute from a guessed number.
	body, _ := json.Marshal(canonical)
	plain := sha256.Sum256(append(append([]byte(httpapi.V20260401), 0), body...))
	if strings.TrimPrefix(a, FingerprintScheme) == hex.EncodeToString(plain[:]) {
		t.Fatal("the fingerprint is the plain SHA-256")
	}
}

// TestFingerprintBindsTheClient: one request of two clients (one person's users at two clients,
// or one person's collections) has two fingerprints, and neither is the scheme before, which did
// not bind the client and is computed only to recognise what older builds stored.
func TestFingerprintBindsTheClient(t *testing.T) {
	key := []byte(strings.Repeat("1", 32))
	canonical := map[string]any{"externalId": "customer-42"}
	acme, _ := fingerprint(key, "acme", httpapi.V20260401, canonical)
	globex, _ := fingerprint(key, "globex", httpapi.V20260401, canonical)
	legacy, err := legacyFingerprint(key, httpapi.V20260401, canonical)
	if err != nil {
		t.Fatal(err)
	}
	if acme == globex || acme == legacy || globex == legacy {
		t.Fatalf("fingerprints collide: %s %s %s", acme, globex, legacy)
	}
	if !strings.HasPrefix(legacy, legacyFingerprintScheme) || strings.HasPrefix(legacy, FingerprintScheme) ||
		strings.HasPrefix(acme, legacyFingerprintScheme) {
		t.Fatalf("the schemes are not told apart: %s, %s", acme, legacy)
	}
	// The client and the version cannot run into each other.
	shifted, _ := fingerprint(key, "acme\x002026", httpapi.Version("-04-01"), canonical)
	if shifted == acme {
		t.Fatal("the client's end is not marked")
	}
}
