package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// firstReadBody serves body and records how much room the reader offered at its first Read:
// what decodeBody allocated from the Content-Length before any byte of the body arrived.
type firstReadBody struct {
	r     io.Reader
	first int
}

func (b *firstReadBody) Read(p []byte) (int, error) {
	if b.first == 0 {
		b.first = len(p)
	}
	return b.r.Read(p)
}

func (b *firstReadBody) Close() error { return nil }

// A Content-Length of 1 MiB used to allocate 1 MiB before a byte arrived, held until the
// listener's read timeout by a client that sends nothing more: 500 connections, 500 MB; 4000
// HTTP/2 streams, 4 GB. A body outside the large-body budget now gets at most
// maxUnbudgetedPrealloc up front (rounded up to a size class); a budgeted large one still
// gets its whole size.
func TestDecodeDoesNotPreallocateAnnouncedBodies(t *testing.T) {
	e := collectionsEngine(t) // POST /collections: MaxBody(14 MiB), budgeted above 1 MiB
	cases := []struct {
		name    string
		size    int
		atMost  int
		atLeast int
	}{
		{"small", 100, 2 * bytes.MinRead, 100},
		{"just under the default limit", int(DefaultMaxBodyBytes) - 10, 2 * maxUnbudgetedPrealloc, 1},
		{"large, budgeted", 2 << 20, 2<<20 + 2<<20/8, 2 << 20},
	}
	for _, tc := range cases {
		body := &firstReadBody{r: bytes.NewReader(append([]byte(`{"company":"`), bytes.Repeat([]byte{'a'}, tc.size-len(`{"company":"`)-2)...))}
		body.r = io.MultiReader(body.r, bytes.NewReader([]byte(`"}`)))
		req := httptest.NewRequest(http.MethodPost, "/collections", nil)
		req.Body, req.ContentLength = body, int64(tc.size)
		req.Header.Set(HeaderAPIKey, testKey)
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		if w.Code == http.StatusRequestEntityTooLarge || w.Code >= 500 {
			t.Fatalf("%s: %d %s", tc.name, w.Code, w.Body)
		}
		if body.first > tc.atMost || body.first < tc.atLeast {
			t.Errorf("%s: %d bytes of room before the first read, want %d..%d", tc.name, body.first, tc.atLeast, tc.atMost)
		}
	}
}
