package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/sync/semaphore"
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
// maxUnbudgetedPrealloc up front (rounded up to a size class); one that took its size from
// the budget (MaxBody's above 1 MiB, decodeBody's above budgetedBodyBytes) gets its whole size.
func TestDecodeDoesNotPreallocateAnnouncedBodies(t *testing.T) {
	e := collectionsEngine(t) // POST /collections: MaxBody(14 MiB), budgeted above 1 MiB
	cases := []struct {
		name    string
		size    int
		atMost  int
		atLeast int
	}{
		{"small", 100, 2 * bytes.MinRead, 100},
		{"at the size a body is budgeted from", budgetedBodyBytes, 2 * maxUnbudgetedPrealloc, 1},
		{"just under the default limit, budgeted by decodeBody", int(DefaultMaxBodyBytes) - 10, int(DefaultMaxBodyBytes + DefaultMaxBodyBytes/8), int(DefaultMaxBodyBytes) - 10},
		{"large, budgeted by MaxBody", 2 << 20, 2<<20 + 2<<20/8, 2 << 20},
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

// A body above budgetedBodyBytes on a route without MaxBody takes its size from the budget of
// large bodies while it is decoded: with the budget spent it waits, then gets a 503 problem
// with Retry-After; a body at the threshold does not wait.
func TestMidSizeBodyWaitsForTheBudget(t *testing.T) {
	large := &largeBodies{sem: semaphore.NewWeighted(1), budget: 1, wait: 20 * time.Millisecond}
	if !large.sem.TryAcquire(1) { // spent by a body that never finishes
		t.Fatal("fresh budget is spent")
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(bodyLimit(DefaultMaxBodyBytes, large))
	e.POST("/echo", func(c *gin.Context) {
		var v struct{ Name string }
		if DecodeJSON(c, &v, Limits{Paths: map[string]PathLimits{"Name": {MaxStringBytes: 1 << 20}}}) {
			c.Status(http.StatusNoContent)
		}
	})
	post := func(size int) *httptest.ResponseRecorder {
		body := `{"Name":"` + strings.Repeat("a", size-len(`{"Name":""}`)) + `"}`
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/echo", strings.NewReader(body)))
		return w
	}
	if w := post(budgetedBodyBytes); w.Code != http.StatusNoContent {
		t.Fatalf("a body of %d bytes = %d %s, want 204 without the budget", budgetedBodyBytes, w.Code, w.Body)
	}
	w := post(budgetedBodyBytes + 1)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" ||
		!strings.HasPrefix(w.Header().Get("Content-Type"), ContentTypeProblem) {
		t.Fatalf("a body of %d bytes with the budget spent = %d %v %s", budgetedBodyBytes+1, w.Code, w.Header(), w.Body)
	}
	large.sem.Release(1)
	if w := post(budgetedBodyBytes + 1); w.Code != http.StatusNoContent {
		t.Fatalf("a body of %d bytes with room in the budget = %d %s", budgetedBodyBytes+1, w.Code, w.Body)
	}
	if !large.sem.TryAcquire(1) {
		t.Fatal("the decoded body did not give its budget back")
	}
}
