package eventschema

import (
	"fmt"
	"testing"
)

// TestAdditionalDataIsItsFormat: the additional data every sealed value was sealed with stays
// byte for byte what it was, or nothing sealed before opens.
func TestAdditionalDataIsItsFormat(t *testing.T) {
	for _, s := range []sealed{{V: 1, Subject: "collection-c1", KeyID: "k1"},
		{V: 12, Subject: "user-ü", KeyID: "", Compression: compressionDeflate}, {}} {
		want := fmt.Sprintf("samla.personal.v%d\x00%s\x00%s\x00%s", s.V, s.Subject, s.KeyID, s.Compression)
		if got := string(s.additionalData()); got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}
