package httpapi

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
)

// HeaderServiceVersion selects the API version of a request and reports the one used.
const HeaderServiceVersion = "Service-Version"

// Version is an API version date.
type Version string

// The running versions. V20250101 is the stable version, V20260401 the preview.
const (
	V20250101 Version = "2025-01-01"
	V20260401 Version = "2026-04-01"
)

// DefaultVersion is used when a request names none: the spec says the lowest running version.
const DefaultVersion = V20250101

// SupportedVersions lists the running versions, oldest first.
func SupportedVersions() []Version { return []Version{V20250101, V20260401} }

// ParseVersion accepts only a running version.
func ParseVersion(s string) (Version, error) {
	for _, v := range SupportedVersions() {
		if string(v) == s {
			return v, nil
		}
	}
	return "", fmt.Errorf("unknown service version %q", s)
}

// versionMiddleware negotiates Service-Version. The response header is set before anything
// else can answer, so every response, errors included, says which version it speaks. A request
// for an unknown version is answered in the default version, which is what the header says.
func versionMiddleware(c *gin.Context) {
	info := infoFrom(c.Request.Context())
	raw, present := c.Request.Header[HeaderServiceVersion]
	v := DefaultVersion
	var err error
	if present {
		if len(raw) != 1 {
			err = fmt.Errorf("exactly one %s header is allowed", HeaderServiceVersion)
		} else {
			v, err = ParseVersion(raw[0])
		}
	}
	if err != nil {
		v = DefaultVersion
	}
	if info != nil {
		info.version = v
	}
	c.Header(HeaderServiceVersion, string(v))
	if err != nil {
		WriteProblem(c, ValidationProblem(
			fmt.Sprintf("Service-Version must be one of %v.", SupportedVersions()),
			FieldError{Field: HeaderServiceVersion, Message: err.Error()}))
		return
	}
	c.Next()
}

// SinceVersion mounts a route from version v on: a request in an older version is answered
// 404, as for a path that version does not have. Place it before the route's handlers.
func SinceVersion(v Version) gin.HandlerFunc {
	return func(c *gin.Context) {
		if ServiceVersion(c) < v { // ISO dates order lexically
			AbortProblem(c, http.StatusNotFound, CodeNotFound, "No such resource in this Service-Version.")
			return
		}
		c.Next()
	}
}
