package httpapi

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

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
			requestID: reqID, correlationID: corrID, version: DefaultVersion,
			logger: base.With("request_id", reqID, "correlation_id", corrID),
		}
		c.Request = c.Request.WithContext(withInfo(c.Request.Context(), info))
		c.Header(HeaderRequestID, reqID)
		c.Header(HeaderCorrelationID, corrID)
		c.Next()
	}
}

// routeLabel is the route template of the request: ids in paths would make the metric's label
// set unbounded, so unmatched requests share one label.
func routeLabel(c *gin.Context) string {
	if r := c.FullPath(); r != "" {
		return r
	}
	return "unmatched"
}

// observe records metrics and writes the access log after the rest of the chain ran. It sits
// outside recovery so that recovered panics are counted and logged as the 500 they became. It
// logs no body, query string or header value: those may carry personal data.
func observe(m *metrics.Metrics) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		elapsed := time.Since(start)
		route, status := routeLabel(c), c.Writer.Status()
		if m != nil {
			m.HTTPRequests.WithLabelValues(c.Request.Method, route, strconv.Itoa(status)).Inc()
			m.HTTPDuration.WithLabelValues(c.Request.Method, route).Observe(elapsed.Seconds())
		}
		ctx := c.Request.Context()
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		Logger(ctx).LogAttrs(ctx, level, "http request",
			slog.String("method", c.Request.Method), slog.String("route", route),
			slog.Int("status", status), slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
			slog.Int("response_bytes", c.Writer.Size()), slog.String("service_version", string(ServiceVersion(c))))
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

// limitedBody enforces the request's body limit lazily, at the first read, so that a route-level
// MaxBody (which runs after the global middleware) can still change the limit.
type limitedBody struct {
	body          io.ReadCloser
	w             http.ResponseWriter
	limit         int64
	contentLength int64
	reader        io.ReadCloser
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

func bodyLimit(defaultMax int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.Body != nil && c.Request.Body != http.NoBody {
			lb := &limitedBody{body: c.Request.Body, w: c.Writer, limit: defaultMax, contentLength: c.Request.ContentLength}
			c.Request.Body = lb
			c.Set(ginBodyKey, lb)
		}
		c.Next()
	}
}

// MaxBody sets the body limit of one route. It must be placed before the handler reads the body.
func MaxBody(n int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if v, ok := c.Get(ginBodyKey); ok {
			v.(*limitedBody).limit = n
		}
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
