package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// wantSecurityHeaders are on every answer of the engine.
var wantSecurityHeaders = map[string]string{
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"X-Frame-Options":         "DENY",
	"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
}

// TestSecurityHeadersOnEveryAnswer sends requests over a real connection (so that what net/http
// adds is seen too) and expects the security headers on every answer, problems included, no
// header that names the software, and no-store unless the handler made its answer cacheable.
func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	env := newEnv(t, func(o *Options) { o.JWKS = []byte(`{"keys":[]}`) })
	// Handlers that try to name the software: the header must not go out, whichever way the
	// answer is written.
	env.engine.GET("/json-with-server", func(c *gin.Context) {
		c.Header("Server", "gin/1.12")
		c.Header("X-Powered-By", "Go")
		c.JSON(http.StatusOK, gin.H{"ok": true})
	})
	env.engine.DELETE("/status-only", func(c *gin.Context) {
		c.Header("Server", "gin/1.12")
		c.Status(http.StatusNoContent)
	})
	env.engine.GET("/file", func(c *gin.Context) {
		c.Header("Server", "gin/1.12")
		c.Data(http.StatusOK, "application/pdf", []byte("%PDF-1.7"))
	})
	env.engine.GET("/fails", func(c *gin.Context) { AbortInternal(c, errors.New("store down")) })
	env.engine.GET("/cacheable", func(c *gin.Context) {
		c.Header("Cache-Control", "public, max-age=60")
		c.JSON(http.StatusOK, gin.H{"ok": true})
	})
	srv := httptest.NewServer(env.engine)
	defer srv.Close()

	many := authed()
	for i := 0; i < MaxHeaderBytes/MaxHeaderValueBytes+1; i++ {
		many[fmt.Sprintf("X-Filler-%d", i)] = strings.Repeat("v", MaxHeaderValueBytes)
	}
	big := `{"name":"` + strings.Repeat("a", int(DefaultMaxBodyBytes)) + `"}`
	jsonBody := map[string]string{"Content-Type": "application/json"}
	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		headers      map[string]string
		status       int
		cacheControl string
	}{
		{"health", "GET", "/health", "", nil, 200, "no-store"},
		{"an authenticated answer", "GET", "/whoami", "", authed(), 200, "no-store"},
		{"the JWKS may be cached", "GET", JWKSPath, "", nil, 200, "public, max-age=300"},
		{"a handler's own caching", "GET", "/cacheable", "", authed(), 200, "public, max-age=60"},
		{"JSON, a Server header set by the handler", "GET", "/json-with-server", "", authed(), 200, "no-store"},
		{"a status alone, a Server header set by the handler", "DELETE", "/status-only", "", authed(), 204, "no-store"},
		{"a PDF, a Server header set by the handler", "GET", "/file", "", authed(), 200, "no-store"},
		{"a decoded body", "POST", "/echo", `{"name":"a"}`, merge(authed(), jsonBody), 200, "no-store"},
		{"400", "POST", "/echo", `{"name":1}`, merge(authed(), jsonBody), 400, "no-store"},
		{"401 without a key", "GET", "/whoami", "", nil, 401, "no-store"},
		{"401 with a bad key", "GET", "/whoami", "", map[string]string{HeaderAPIKey: "bad-key-0123456789abcdef0123456789abcdef"}, 401, "no-store"},
		{"404 unknown route", "GET", "/nope", "", authed(), 404, "no-store"},
		{"404 non-canonical path", "GET", "/whoami/../whoami", "", authed(), 404, "no-store"},
		{"405", "POST", "/health", "", authed(), 405, "no-store"},
		{"413", "POST", "/echo", big, merge(authed(), jsonBody), 413, "no-store"},
		{"415", "POST", "/echo", `{"name":"a"}`, merge(authed(), map[string]string{"Content-Type": "text/plain"}), 415, "no-store"},
		{"431", "GET", "/whoami", "", many, 431, "no-store"},
		{"400 unknown version", "GET", "/whoami", "", merge(authed(), map[string]string{HeaderServiceVersion: "1999-01-01"}), 400, "no-store"},
		{"500 panic", "GET", "/panic", "", authed(), 500, "no-store"},
		{"500 AbortInternal", "GET", "/fails", "", authed(), 500, "no-store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			checkSecurityHeaders(t, srv.Client(), req, tc.status, tc.cacheControl)
		})
	}
}

// TestSecurityHeadersOnRateLimited: a 429, refused before any handler, carries them too.
func TestSecurityHeadersOnRateLimited(t *testing.T) {
	env := newEnv(t, func(o *Options) { o.RateLimit = RateLimit{PerSecond: 1, Burst: 1} })
	srv := httptest.NewServer(env.engine)
	defer srv.Close()
	for _, status := range []int{http.StatusOK, http.StatusTooManyRequests} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/whoami", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(HeaderAPIKey, testKey)
		checkSecurityHeaders(t, srv.Client(), req, status, "no-store")
	}
}

// checkSecurityHeaders sends req and checks the answer's status and its headers.
func checkSecurityHeaders(t *testing.T, client *http.Client, req *http.Request, status int, cacheControl string) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, b)
	}
	for name, want := range wantSecurityHeaders {
		if got := resp.Header.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if got := resp.Header.Values("Cache-Control"); len(got) != 1 || got[0] != cacheControl {
		t.Errorf("Cache-Control = %q, want %q", got, cacheControl)
	}
	for _, name := range revealingHeaders {
		if v := resp.Header.Get(name); v != "" {
			t.Errorf("%s: %q names the software", name, v)
		}
	}
	if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != ContentTypeProblem {
		t.Errorf("Content-Type %q of a %d", resp.Header.Get("Content-Type"), resp.StatusCode)
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestInternalErrorsStayInTheLog: a panic and an AbortInternal answer a 500 problem that says
// nothing of what went wrong (the panic's value, the error's text, a stack, a source file);
// the log has it, under the request id the answer names.
func TestInternalErrorsStayInTheLog(t *testing.T) {
	const secret = "pq: relation collection_status at /var/lib/samla/read.db for 191212121212"
	logs := newRecordingHandler()
	env := newEnv(t, func(o *Options) { o.Logger = slog.New(logs) })
	env.engine.GET("/panics", func(*gin.Context) { panic(secret) })
	env.engine.GET("/panics-with-error", func(*gin.Context) { panic(fmt.Errorf("wrapped: %w", errors.New(secret))) })
	env.engine.GET("/fails", func(c *gin.Context) { AbortInternal(c, fmt.Errorf("load: %w", errors.New(secret))) })
	for _, path := range []string{"/panics", "/panics-with-error", "/fails"} {
		t.Run(path, func(t *testing.T) {
			w := env.do(t, http.MethodGet, path, "", authed())
			p := decodeProblem(t, w, http.StatusInternalServerError, CodeInternal)
			body := w.Body.String()
			for _, leak := range []string{"191212121212", "collection_status", "/var/lib", "pq:", "wrapped", "load:",
				"goroutine", ".go:", "runtime/", "panic", "httpapi"} {
				if strings.Contains(body, leak) {
					t.Errorf("the body carries %q: %s", leak, body)
				}
			}
			// Only the problem's own members.
			var members map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &members); err != nil {
				t.Fatal(err)
			}
			for k := range members {
				switch k {
				case "type", "title", "status", "detail", "code":
				default:
					t.Errorf("member %q in %s", k, body)
				}
			}
			if !strings.Contains(p.Detail, "X-Request-Id") || w.Header().Get(HeaderRequestID) == "" {
				t.Errorf("the problem does not point at the request id: %+v", p)
			}
		})
	}
	// The operator finds it in the log.
	var found int
	for _, r := range logs.all() {
		if r.Message == "panic serving request" || r.Message == "request failed" {
			found++
		}
	}
	if found != 3 {
		t.Errorf("%d failure records in the log, want 3", found)
	}
}
