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

// StrictDecode decodes exactly one JSON value from r into dst: unknown object members and
// anything after the value are errors, so a client's typo never silently drops a field.
func StrictDecode(r io.Reader, dst any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil && IsBodyTooLarge(err):
		return err
	default:
		return errTrailingData
	}
}

// StrictUnmarshal is StrictDecode over bytes.
func StrictUnmarshal(data []byte, dst any) error {
	return StrictDecode(bytes.NewReader(data), dst)
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

// DecodeJSON strictly decodes the request body into dst. On failure it has answered with the
// fitting problem (413, 400 with field errors, or 400 MALFORMED_JSON) and returns false.
func DecodeJSON(c *gin.Context, dst any) bool {
	err := StrictDecode(c.Request.Body, dst)
	if err == nil {
		return true
	}
	WriteProblem(c, DecodeProblem("", err))
	return false
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
	detail := "The request body is not a valid JSON object."
	switch {
	case errors.Is(err, io.EOF):
		detail = "The request body is empty; a JSON object is required."
	case errors.Is(err, errTrailingData):
		detail = "The request body has data after its JSON object."
	}
	return NewProblem(http.StatusBadRequest, CodeMalformedJSON, detail)
}
