package httpapi

import (
	"net/url"
	"sort"

	"github.com/gin-gonic/gin"
)

// singleQueryValues answers 400 to a request that gives a query parameter more than once,
// naming each such parameter: no route takes a list in its query, and a second value would
// otherwise be dropped silently by whichever handler reads the first (a limit, a cursor), or
// refused by one that looks (an externalId). Unknown paths and methods stay the 404 or 405 they
// are. A parameter's name counts as given, whatever its value, empty included.
func singleQueryValues(c *gin.Context) {
	if c.FullPath() == "" || c.Request.URL.RawQuery == "" {
		c.Next()
		return
	}
	values, _ := url.ParseQuery(c.Request.URL.RawQuery) // what gin's handlers read, errors and all
	var errs []FieldError
	for name, vs := range values {
		if len(vs) > 1 {
			errs = append(errs, FieldError{Field: name, Message: "must be given once"})
		}
	}
	if len(errs) > 0 {
		sort.Slice(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
		AbortValidation(c, "The query parameters are invalid.", errs...)
		return
	}
	c.Next()
}
