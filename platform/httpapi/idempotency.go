package httpapi

import (
	"fmt"

	"github.com/gin-gonic/gin"
)

// HeaderIdempotencyKey makes a POST safe to retry.
const HeaderIdempotencyKey = "Idempotency-Key"

// MaxIdempotencyKeyLength bounds the key; it is hashed into ids, but stored ids and logs should
// not have to cope with kilobytes of key.
const MaxIdempotencyKeyLength = 255

// IdempotencyKey returns the request's Idempotency-Key ("" when absent). A key that is too long,
// repeated or not printable ASCII is a field error: silently ignoring it would turn the
// client's safe retry into a duplicate.
func IdempotencyKey(c *gin.Context) (string, *FieldError) {
	values := c.Request.Header.Values(HeaderIdempotencyKey)
	switch {
	case len(values) == 0:
		return "", nil
	case len(values) > 1:
		return "", &FieldError{Field: HeaderIdempotencyKey, Message: "must be sent once"}
	}
	key := values[0]
	if key == "" || len(key) > MaxIdempotencyKeyLength {
		return "", &FieldError{Field: HeaderIdempotencyKey,
			Message: fmt.Sprintf("must have 1 to %d characters", MaxIdempotencyKeyLength)}
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", &FieldError{Field: HeaderIdempotencyKey, Message: "must be printable ASCII"}
		}
	}
	return key, nil
}
