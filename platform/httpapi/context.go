package httpapi

import (
	"context"
	"log/slog"
	"sync"

	"github.com/gin-gonic/gin"
)

// Header names of the request-scoped identifiers.
const (
	HeaderRequestID     = "X-Request-Id"
	HeaderCorrelationID = "X-Correlation-Id"
)

// requestInfo is the per-request state the middleware shares with handlers and with later
// middleware. It is a pointer in the context so that authentication can add the client id after
// the context was built, and the access log written at the end sees it.
type requestInfo struct {
	requestID     string
	correlationID string
	clientID      string
	apiKeyID      string   // the id of the API key that authenticated the request, if known
	session       *session // nil unless a session token authenticated the request
	version       Version
	quiet         bool // QuietAccessLog: a successful answer is logged at debug

	// The request's logger is built from base and logAttrs on first use only: most requests
	// log nothing but the access line, which observe writes with the attributes directly,
	// and a With per request and per id was 4.5 % of the status poll's CPU.
	mu       sync.Mutex
	base     *slog.Logger
	logAttrs []slog.Attr // request_id, correlation_id, then client_id, session_id
	logger   *slog.Logger
}

// addLogAttrs adds ids the request's logger carries from now on.
func (i *requestInfo) addLogAttrs(attrs ...slog.Attr) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.logAttrs = append(i.logAttrs, attrs...)
	i.logger = nil
}

// log is the request's logger, carrying its ids.
func (i *requestInfo) log() *slog.Logger {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.logger == nil {
		args := make([]any, len(i.logAttrs))
		for k, a := range i.logAttrs {
			args[k] = a
		}
		i.logger = i.base.With(args...)
	}
	return i.logger
}

// logLine writes one line with the request's ids and attrs, without building its logger.
func (i *requestInfo) logLine(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if !i.base.Enabled(ctx, level) {
		return
	}
	i.mu.Lock()
	all := append(make([]slog.Attr, 0, len(i.logAttrs)+len(attrs)), i.logAttrs...)
	i.mu.Unlock()
	i.base.LogAttrs(ctx, level, msg, append(all, attrs...)...)
}

type ctxKey struct{}

func withInfo(ctx context.Context, info *requestInfo) context.Context {
	return context.WithValue(ctx, ctxKey{}, info)
}

func infoFrom(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(ctxKey{}).(*requestInfo)
	return info
}

// RequestID returns the request's id ("" outside a request).
func RequestID(ctx context.Context) string {
	if info := infoFrom(ctx); info != nil {
		return info.requestID
	}
	return ""
}

// CorrelationID returns the id that ties this request to the work it causes elsewhere (events,
// connector sessions); it defaults to the request id.
func CorrelationID(ctx context.Context) string {
	if info := infoFrom(ctx); info != nil {
		return info.correlationID
	}
	return ""
}

// ClientIDFrom returns the authenticated client (tenant) of the request, "" before
// authentication or on public routes.
func ClientIDFrom(ctx context.Context) string {
	if info := infoFrom(ctx); info != nil {
		return info.clientID
	}
	return ""
}

// APIKeyID returns the id of the API key that authenticated the request (the key id of the
// client's keys, never the key): "" for a request that a session token authenticated, or when
// the engine's KeyLookup does not name keys (KeyInfoLookup).
func APIKeyID(c *gin.Context) string {
	if info := infoFrom(c.Request.Context()); info != nil && info.session == nil {
		return info.apiKeyID
	}
	return ""
}

// Logger returns the request's logger, which carries the request, correlation and client ids,
// or slog.Default() outside a request.
func Logger(ctx context.Context) *slog.Logger {
	if info := infoFrom(ctx); info != nil && info.base != nil {
		return info.log()
	}
	return slog.Default()
}

// ClientID returns the authenticated client (tenant) of a Gin request: ClientIDFrom its context.
func ClientID(c *gin.Context) string {
	return ClientIDFrom(c.Request.Context())
}

// ServiceVersion returns the version negotiated for the request (DefaultVersion before the
// version middleware ran).
func ServiceVersion(c *gin.Context) Version {
	if info := infoFrom(c.Request.Context()); info != nil && info.version != "" {
		return info.version
	}
	return DefaultVersion
}

// QuietAccessLog marks the request as a poll: answered successfully, its access line is logged
// at debug rather than info. Only for reads that clients repeat every second and that reveal
// nothing personal (the status poll); reads of personal data keep their line at info.
func QuietAccessLog(c *gin.Context) {
	if info := infoFrom(c.Request.Context()); info != nil {
		info.quiet = true
	}
}

func quiet(ctx context.Context) bool {
	info := infoFrom(ctx)
	return info != nil && info.quiet
}
