package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"golang.org/x/sync/semaphore"

	"github.com/samla/samla/platform/metrics"
)

// maxIDLength bounds a client-supplied request or correlation id; longer ones are replaced, so
// that a client cannot bloat every log line.
const maxIDLength = 128

// validID accepts the characters ids are made of (UUIDs, ULIDs, trace ids) and nothing that
// could forge a log line or a header.
func validID(s string) bool {
	if s == "" || len(s) > maxIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		ok := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' ||
			b == '-' || b == '_' || b == '.' || b == ':'
		if !ok {
			return false
		}
	}
	return true
}

// requestContext puts the request and correlation ids and a logger carrying them into the
// request context, and echoes the ids on the response.
func requestContext(base *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		reqID := c.GetHeader(HeaderRequestID)
		if !validID(reqID) {
			reqID = uuid.NewString()
		}
		corrID := c.GetHeader(HeaderCorrelationID)
		if !validID(corrID) {
			corrID = reqID
		}
		info := &requestInfo{
			requestID: reqID, correlationID: corrID, version: DefaultVersion, base: base,
			logAttrs: []slog.Attr{slog.String("request_id", reqID), slog.String("correlation_id", corrID)},
		}
		c.Request = c.Request.WithContext(withInfo(c.Request.Context(), info))
		c.Header(HeaderRequestID, reqID)
		c.Header(HeaderCorrelationID, corrID)
		c.Next()
	}
}

// ginUnmatchedKey marks a request refused before routing mattered (a non-canonical path), so
// that its metrics do not count under the route its path happened to match.
const ginUnmatchedKey = "samla.unmatched"

// routeLabel is the route template of the request: ids in paths would make the metric's label
// set unbounded, so unmatched requests share one label.
func routeLabel(c *gin.Context) string {
	if r := c.FullPath(); r != "" && !c.GetBool(ginUnmatchedKey) {
		return r
	}
	return "unmatched"
}

// StatusClientClosedRequest is the status the access log and the metrics record for a request
// whose client went away before it was answered: nginx's 499. It is never sent; nobody is
// left to read it.
const StatusClientClosedRequest = 499

// ClientClosed reports whether ctx, a request's context, ended because the client went away:
// net/http cancels it when the connection closes (or an HTTP/2 client resets the stream). A
// deadline that passed is the server's own limit, not the client's doing.
func ClientClosed(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled)
}

// observe records metrics and writes the access log after the rest of the chain ran. It sits
// outside recovery so that recovered panics are counted and logged as the 500 they became. It
// logs no body, query string or header value: those may carry personal data. A request whose
// client went away is recorded as 499 at warning level, whatever the handler wrote into the
// closed connection (written_status says what that was).
func observe(m *metrics.Metrics) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		elapsed := time.Since(start)
		ctx := c.Request.Context()
		route, status, written := routeLabel(c), c.Writer.Status(), c.Writer.Status()
		level := slog.LevelInfo
		switch {
		case ClientClosed(ctx):
			status, level = StatusClientClosedRequest, slog.LevelWarn
		case status >= 500:
			level = slog.LevelError
		case status < 400 && quiet(ctx):
			// A poll that succeeded (QuietAccessLog): clients poll every collection every
			// second, and a line per poll was a fifth of a poll's CPU and most of the log. The
			// metrics count them; SAMLA_LOG_LEVEL=debug logs them too.
			level = slog.LevelDebug
		}
		if m != nil {
			m.HTTPRequests.WithLabelValues(c.Request.Method, route, strconv.Itoa(status)).Inc()
			m.HTTPDuration.WithLabelValues(c.Request.Method, route).Observe(elapsed.Seconds())
		}
		attrs := []slog.Attr{
			slog.String("method", c.Request.Method), slog.String("route", route),
			slog.Int("status", status), slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
			slog.Int("response_bytes", c.Writer.Size()), slog.String("service_version", string(ServiceVersion(c))),
		}
		if status != written {
			attrs = append(attrs, slog.Int("written_status", written))
		}
		if info := infoFrom(ctx); info != nil && info.base != nil {
			info.logLine(ctx, level, "http request", attrs...)
		} else {
			Logger(ctx).LogAttrs(ctx, level, "http request", attrs...)
		}
	}
}

// recovery turns a panic into a 500 problem so that one bad request never takes the process
// down, and logs the panic with its stack for the operator.
func recovery(c *gin.Context) {
	defer func() {
		rec := recover()
		if rec == nil {
			return
		}
		if rec == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as net/http does
			// net/http's way to abort a response on purpose; let the server handle it quietly.
			panic(rec)
		}
		Logger(c.Request.Context()).Error("panic serving request",
			"panic", fmt.Sprint(rec), "stack", string(debug.Stack()))
		if c.Writer.Written() {
			// The status line is gone already; all that is left is to stop the chain.
			c.Abort()
			return
		}
		AbortProblem(c, http.StatusInternalServerError, CodeInternal,
			"An unexpected error occurred; quote the X-Request-Id header when reporting it.")
	}()
	c.Next()
}

// Body size limits. Requests without a route-specific limit get DefaultMaxBodyBytes; a route that
// takes uploads raises its own limit with MaxBody.
const DefaultMaxBodyBytes int64 = 1 << 20 // 1 MiB: every JSON command without a file fits easily

// Large bodies. A body above DefaultMaxBodyBytes (only routes that take a file allow one) costs
// a few times its size while it is decoded, so the bytes of large bodies in flight are bounded
// process-wide, whoever sends them: at most LargeBodyBudget bytes are decoded at once, and a
// request that finds the budget spent waits for it up to LargeBodyWait, then gets a 503 with
// Retry-After. Small bodies never wait.
const (
	DefaultLargeBodyBudget int64 = 64 << 20
	LargeBodyWait                = 10 * time.Second
)

// largeBodies is the budget of large bodies in flight.
type largeBodies struct {
	sem    *semaphore.Weighted
	budget int64
	wait   time.Duration // how long a request waits for room: LargeBodyWait
}

// errBodyBudget is a body that found no room in the budget of large bodies in time: a 503
// with Retry-After (bodyBudgetDetail, largeBodies.retryAfter).
var errBodyBudget = errors.New("too many large request bodies in flight")

const bodyBudgetDetail = "Too many large requests are being processed; retry shortly."

// take takes size bytes from the budget (the whole budget at most: a body larger than it goes
// alone), waiting up to l.wait for room, and returns what to give back with sem.Release. It
// fails with ctx's error when the client went away meanwhile, else with errBodyBudget.
func (l *largeBodies) take(ctx context.Context, size int64) (int64, error) {
	weight := min(size, l.budget)
	waitCtx, cancel := context.WithTimeout(ctx, l.wait)
	defer cancel()
	if err := l.sem.Acquire(waitCtx, weight); err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, errBodyBudget
	}
	return weight, nil
}

// retryAfter is the Retry-After of a request refused for want of room: the wait it had.
func (l *largeBodies) retryAfter() string { return strconv.Itoa(max(1, int(l.wait/time.Second))) }

// limitedBody enforces the request's body limit lazily, at the first read, so that a route-level
// MaxBody (which runs after the global middleware) can still change the limit.
type limitedBody struct {
	body          io.ReadCloser
	w             http.ResponseWriter
	limit         int64
	contentLength int64
	reader        io.ReadCloser
	large         *largeBodies
	budgeted      bool // MaxBody took the body's size from large's budget
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.reader == nil {
		if b.contentLength > b.limit {
			return 0, &http.MaxBytesError{Limit: b.limit}
		}
		b.reader = http.MaxBytesReader(b.w, b.body, b.limit)
	}
	return b.reader.Read(p)
}

func (b *limitedBody) Close() error { return b.body.Close() }

const ginBodyKey = "samla.body"

func bodyLimit(defaultMax int64, large *largeBodies) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.Body != nil && c.Request.Body != http.NoBody {
			lb := &limitedBody{body: c.Request.Body, w: c.Writer, limit: defaultMax, contentLength: c.Request.ContentLength, large: large}
			c.Request.Body = lb
			c.Set(ginBodyKey, lb)
		}
		c.Next()
	}
}

// MaxBody sets the body limit of one route. It must be placed before the handler reads the body.
// A limit above DefaultMaxBodyBytes makes the route's large bodies share the engine's budget of
// large bodies in flight (Options.LargeBodyBudget).
func MaxBody(n int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		v, ok := c.Get(ginBodyKey)
		if !ok {
			c.Next()
			return
		}
		lb := v.(*limitedBody)
		lb.limit = n
		size := lb.contentLength
		if size < 0 || size > n {
			size = n // chunked: as large as the route allows (a longer body fails at the limit)
		}
		if size <= DefaultMaxBodyBytes || lb.large == nil {
			c.Next()
			return
		}
		weight, err := lb.large.take(c.Request.Context(), size)
		if err != nil {
			if !errors.Is(err, errBodyBudget) {
				c.Abort() // the client went away while waiting; the access log says 499
				return
			}
			c.Header("Retry-After", lb.large.retryAfter())
			AbortProblem(c, http.StatusServiceUnavailable, CodeServiceUnavailable, bodyBudgetDetail)
			return
		}
		defer lb.large.sem.Release(weight)
		lb.budgeted = true
		c.Next()
	}
}

// IsBodyTooLarge reports whether err came from reading past the request's body limit.
func IsBodyTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// requireJSON answers 415 to a request that carries a body in anything but JSON, before a handler
// tries to decode it. Bodiless requests pass: GET, DELETE and empty POSTs have nothing to type.
func requireJSON(c *gin.Context) {
	hasBody := c.Request.ContentLength > 0 || c.Request.ContentLength == -1 // -1: chunked, unknown
	if len(c.Request.Header.Values("Content-Type")) > 1 {
		// Two types for one body: which one a reader believes would be a guess.
		AbortValidation(c, "The request has invalid headers.", FieldError{Field: "Content-Type", Message: "must be sent once"})
		return
	}
	if hasBody {
		mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
		if err != nil || mt != "application/json" {
			AbortProblem(c, http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
				"Request bodies must be sent as Content-Type: application/json.")
			return
		}
	}
	c.Next()
}

// Header bounds. Go's http.Server answers 431 in plain text, before any handler, when the
// request line and headers pass its MaxHeaderBytes; the listener sets that to
// ServerMaxHeaderBytes, well above Samla's own MaxHeaderBytes, so that Samla refuses oversize
// headers itself, as problem+json. Only above the server's hard limit does Go's own answer
// remain.
const (
	// MaxHeaderBytes bounds the header fields of a request, names and values together; real
	// clients send a few hundred bytes.
	MaxHeaderBytes = 32 << 10
	// MaxHeaderValueBytes bounds one header value.
	MaxHeaderValueBytes = 8 << 10
	// ServerMaxHeaderBytes is what http.Server.MaxHeaderBytes should be for listeners that
	// serve NewEngine's engine: room for the engine to see and refuse headers a few times
	// MaxHeaderBytes, and no more, since net/http holds a connection's header bytes until they
	// end (Go's default of 1 MiB let 300 connections sending one long header line hold 530 MB).
	ServerMaxHeaderBytes = 128 << 10
	// OpsMaxHeaderBytes is http.Server.MaxHeaderBytes of the ops listener, whose callers (a
	// metrics scraper, a liveness probe) send a few hundred bytes and which has no header
	// limits of its own.
	OpsMaxHeaderBytes = 16 << 10
)

// headerFieldOverhead is what a header line costs beyond its name and value (": ", CRLF).
const headerFieldOverhead = 4

// limitHeaders answers 431 problem+json to a request whose headers pass MaxHeaderBytes in
// total or MaxHeaderValueBytes in one value. It names the header that is too long, never its
// value.
func limitHeaders(c *gin.Context) {
	total := len(c.Request.Host) + len("Host") + headerFieldOverhead
	for name, values := range c.Request.Header {
		for _, v := range values {
			if len(v) > MaxHeaderValueBytes {
				headersTooLarge(c, fmt.Sprintf("The %s header exceeds %d bytes.", headerNameForAnswer(name), MaxHeaderValueBytes))
				return
			}
			total += len(name) + len(v) + headerFieldOverhead
		}
	}
	if total > MaxHeaderBytes {
		headersTooLarge(c, fmt.Sprintf("The request headers exceed %d bytes in total.", MaxHeaderBytes))
		return
	}
	c.Next()
}

// headerNameForAnswer bounds a header name repeated in an answer; only a value is bounded by
// MaxHeaderValueBytes, and a name is the client's own choice.
func headerNameForAnswer(name string) string { return clip(name, maxEchoedName) }

func headersTooLarge(c *gin.Context, detail string) {
	AbortProblem(c, http.StatusRequestHeaderFieldsTooLarge, CodeHeadersTooLarge, detail)
}

// CanonicalPath reports whether p is a path as Samla's routes spell them: it starts with a
// slash and has no empty, "." or ".." segment in its middle or at its end (a trailing slash is
// left to routing, which does not know such paths). Other paths are answered 404 instead of
// being cleaned and redirected as http.ServeMux would, so every answer stays a problem and no
// route is reached under a second spelling.
func CanonicalPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	rest := p[1:]
	for {
		seg, after, more := strings.Cut(rest, "/")
		switch {
		case seg == "." || seg == "..":
			return false
		case seg == "" && more:
			return false // an empty segment: "//"
		case !more:
			return true
		}
		rest = after
	}
}

// canonicalPath answers 404 to a path that is not CanonicalPath, before authentication: such a
// path names no resource, whoever asks.
func canonicalPath(c *gin.Context) {
	if !CanonicalPath(c.Request.URL.Path) {
		c.Set(ginUnmatchedKey, true)
		AbortProblem(c, http.StatusNotFound, CodeNotFound, "No such resource.")
		return
	}
	c.Next()
}
