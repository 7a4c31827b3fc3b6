package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// Security headers. Samla's API answers JSON (and a few PDFs) to programs, never pages to a
// browser, so every answer says so: nothing is sniffed into another type, framed, given a
// referrer or allowed to load anything, and nothing is cached unless the handler says it may
// be. Personal data must never sit in a shared or a browser cache.
const (
	// CacheControlDefault is the Cache-Control of every answer whose handler sets none. A
	// handler whose answer may be cached sets its own (the JWKS: public, for five minutes).
	CacheControlDefault = "no-store"
	// ContentSecurityPolicy forbids a browser that renders an answer anyway to load or frame
	// anything.
	ContentSecurityPolicy = "default-src 'none'; frame-ancestors 'none'"
)

// securityHeaderValues are set on every answer before the chain runs, so that a problem
// written by any middleware, a recovered panic or a 404/405 carries them too.
var securityHeaderValues = [...][2]string{
	{"X-Content-Type-Options", "nosniff"},
	{"Referrer-Policy", "no-referrer"},
	{"X-Frame-Options", "DENY"},
	{"Content-Security-Policy", ContentSecurityPolicy},
	{"Cache-Control", CacheControlDefault},
}

// revealingHeaders name the software and its version. Neither net/http nor Gin sets them, but
// nothing that runs in a handler may add them either: they are removed just before the header
// goes out.
var revealingHeaders = [...]string{"Server", "X-Powered-By", "X-AspNet-Version", "X-Runtime"}

// securityHeaders sets the security headers on every answer and removes the revealing ones. It
// is the outermost middleware of NewEngine's chain.
func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	for _, kv := range securityHeaderValues {
		h.Set(kv[0], kv[1])
	}
	c.Writer = &headerScrubber{ResponseWriter: c.Writer}
	c.Next()
	// An answer without a body (a 204, a status alone) is written by Gin after the chain,
	// past the scrubber.
	if !c.Writer.Written() {
		scrubHeaders(c.Writer)
	}
}

// scrubHeaders removes the revealing headers while the header can still change.
func scrubHeaders(w gin.ResponseWriter) {
	if w.Written() {
		return
	}
	h := w.Header()
	for _, name := range revealingHeaders {
		h.Del(name)
	}
}

// headerScrubber removes the revealing headers at the moment the header is written: Gin
// writes it at the first byte of the body, a flush or WriteHeaderNow.
type headerScrubber struct {
	gin.ResponseWriter
}

func (w *headerScrubber) WriteHeaderNow() {
	scrubHeaders(w.ResponseWriter)
	w.ResponseWriter.WriteHeaderNow()
}

func (w *headerScrubber) Write(b []byte) (int, error) {
	scrubHeaders(w.ResponseWriter)
	return w.ResponseWriter.Write(b)
}

func (w *headerScrubber) WriteString(s string) (int, error) {
	scrubHeaders(w.ResponseWriter)
	return w.ResponseWriter.WriteString(s)
}

func (w *headerScrubber) Flush() {
	scrubHeaders(w.ResponseWriter)
	w.ResponseWriter.Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer (deadlines, flushes).
func (w *headerScrubber) Unwrap() http.ResponseWriter { return w.ResponseWriter }
