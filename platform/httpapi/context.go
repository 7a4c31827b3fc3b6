package httpapi

import (
	"context"
	"log/slog"

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
	session       *session // nil unless a session token authenticated the request
	version       Version
	logger        *slog.Logger
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

// Logger returns the request's logger, which carries the request, correlation and client ids,
// or slog.Default() outside a request.
func Logger(ctx context.Context) *slog.Logger {
	if info := infoFrom(ctx); info != nil && info.logger != nil {
		return info.logger
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
