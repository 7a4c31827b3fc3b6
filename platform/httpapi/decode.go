package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/gin-gonic/gin"
)

// errTrailingData is a body with more after its JSON value.
var errTrailingData = errors.New("unexpected data after the JSON value")

// StrictDecode decodes exactly one JSON value from r into dst: unknown object members,
// repeated members and anything after the value are errors, so a client's typo never silently
// drops a field and a second value never hides behind the first. The value's shape is bounded
// by the default Limits, except that strings are bounded by the body alone (see DecodeJSON).
func StrictDecode(r io.Reader, dst any) error {
	return StrictDecodeWithin(r, dst, compatLimits)
}

// StrictUnmarshal is StrictDecode over bytes.
func StrictUnmarshal(data []byte, dst any) error {
	return strictUnmarshal(data, dst, compatLimits)
}

// StrictDecodeWithin is StrictDecode under limits: it reads r to its end (the body limit bounds
// that), scans the value's shape and stops with a *ShapeError at the first place that breaks
// limits or repeats a member, before anything is decoded; only a body that passes is decoded
// into dst.
func StrictDecodeWithin(r io.Reader, dst any, limits Limits) error {
	data, err := readAll(r, 0)
	if err != nil {
		return err
	}
	return strictUnmarshal(data, dst, limits)
}

func strictUnmarshal(data []byte, dst any, limits Limits) error {
	if err := limits.Check(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		return nil
	default:
		return errTrailingData
	}
}

// readAll reads r to its end. sizeHint, when it is the exact size (a Content-Length within the
// body limit), makes that one allocation.
func readAll(r io.Reader, sizeHint int64) ([]byte, error) {
	var buf bytes.Buffer
	if sizeHint > 0 {
		buf.Grow(int(sizeHint) + bytes.MinRead) // MinRead: room to see EOF without growing
	}
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

const unknownFieldPrefix = "json: unknown field "

// JSONFieldError turns a decoding error that concerns one member into a field error, its path
// under prefix ("parameters[2]"), or reports false for errors of the document as a whole.
func JSONFieldError(prefix string, err error) (FieldError, bool) {
	join := func(name string) string {
		switch {
		case prefix == "":
			return name
		case name == "":
			return prefix
		}
		return prefix + "." + name
	}
	var se *ShapeError
	if errors.As(err, &se) {
		if se.Path == "" && prefix == "" {
			return FieldError{}, false
		}
		path := se.Path
		if prefix != "" && strings.HasPrefix(path, "[") {
			return FieldError{Field: prefix + path, Message: se.Reason()}, true
		}
		return FieldError{Field: join(path), Message: se.Reason()}, true
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" && prefix == "" {
			return FieldError{}, false
		}
		return FieldError{Field: join(te.Field), Message: fmt.Sprintf("must be %s, not %s", jsonKind(te.Type), te.Value)}, true
	}
	if msg := err.Error(); strings.HasPrefix(msg, unknownFieldPrefix) {
		name := strings.Trim(strings.TrimPrefix(msg, unknownFieldPrefix), `"`)
		return FieldError{Field: join(name), Message: "is not a known member"}, true
	}
	return FieldError{}, false
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a value"
}

// DecodeJSON strictly decodes the request body into dst (StrictDecode's rules: unknown and
// repeated members, trailing data and a body over the route's limit are refused). On failure it
// has answered with the fitting problem (413, 400 with one field error, or 400 MALFORMED_JSON)
// and returns false.
//
// A handler states the bounds of its body with one Limits, so that a small body cannot unfold
// into millions of values; the scan stops at the first place that breaks them, which the 400
// names ("parameters": "must hold at most 10 items"):
//
//	if !httpapi.DecodeJSON(c, &req, httpapi.Limits{Paths: map[string]httpapi.PathLimits{
//		"parameters":                 {MaxItems: 10},
//		"parameters[].contentBase64": {MaxStringBytes: base64.StdEncoding.EncodedLen(MaxPDFBytes)},
//	}}) {
//		return
//	}
//
// Zero fields of the Limits take the Default* bounds (at most 10 levels, 64 items, 64 members,
// 64 KiB strings). Without a Limits, DecodeJSON applies the same defaults except that strings
// are bounded by the body limit alone: that keeps handlers that take a file in a string working
// until they state their own bounds, and strings cannot unfold (a string costs about its own
// bytes), but every handler should pass its Limits. More than one Limits is a wiring mistake
// and panics.
func DecodeJSON(c *gin.Context, dst any, limits ...Limits) bool {
	lim := compatLimits
	switch len(limits) {
	case 0:
	case 1:
		lim = limits[0]
	default:
		panic("httpapi.DecodeJSON: at most one Limits")
	}
	err := decodeBody(c, dst, lim)
	if err == nil {
		return true
	}
	WriteProblem(c, DecodeProblem("", err))
	return false
}

// decodeBody reads the body in one allocation when its Content-Length is known and within the
// route's limit (a larger one fails at the first read anyway).
func decodeBody(c *gin.Context, dst any, lim Limits) error {
	var hint int64
	if v, ok := c.Get(ginBodyKey); ok {
		if n := c.Request.ContentLength; n > 0 && n <= v.(*limitedBody).limit {
			hint = n
		}
	}
	if c.Request.Body == nil {
		return io.EOF
	}
	data, err := readAll(c.Request.Body, hint)
	if err != nil {
		return err
	}
	return strictUnmarshal(data, dst, lim)
}

// DecodeProblem maps an error of StrictDecode or StrictUnmarshal to its problem.
func DecodeProblem(prefix string, err error) Problem {
	if IsBodyTooLarge(err) {
		var mbe *http.MaxBytesError
		errors.As(err, &mbe)
		return NewProblem(http.StatusRequestEntityTooLarge, CodePayloadTooLarge,
			fmt.Sprintf("The request body exceeds %d bytes.", mbe.Limit))
	}
	if fe, ok := JSONFieldError(prefix, err); ok {
		return ValidationProblem("The request has invalid members.", fe)
	}
	var se *ShapeError
	if errors.As(err, &se) {
		// The body as a whole breaks a bound (a root array too long, say): no member to name.
		return ValidationProblem("The request body " + se.Reason() + ".")
	}
	detail := "The request body is not a valid JSON object."
	switch {
	case errors.Is(err, io.EOF):
		detail = "The request body is empty; a JSON object is required."
	case errors.Is(err, errTrailingData):
		detail = "The request body has data after its JSON object."
	}
	return NewProblem(http.StatusBadRequest, CodeMalformedJSON, detail)
}
