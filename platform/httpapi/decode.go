package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// errTrailingData is a body with more after its JSON value.
var errTrailingData = errors.New("unexpected data after the JSON value")

// unmarshalOptions are the semantics of the strict decoder: encoding/json/v2's, with its errors
// (*json.SemanticError, which say where and why without being parsed), plus the few rules of
// encoding/json (v1) that requests and their idempotency fingerprints rely on. Each is chosen:
//
//   - Unknown members are refused, so that a client's typo never silently drops a field.
//   - Member names match fields ignoring case, as encoding/json does ("Company" is company),
//     but not ignoring "_" and "-" (v2's folding would take "login_method" for loginMethod,
//     which encoding/json refused as unknown).
//   - Invalid UTF-8 in a string is replaced by U+FFFD, as encoding/json does, rather than
//     refused: the shape scan accepts it too, and a fingerprint of a stored request must not
//     change because the decoder did.
//
// The rest of v2's semantics equal v1's for what requests hold (strings, numbers, booleans,
// pointers that tell an absent or null member from an empty one, maps, slices and
// encoding/json.RawMessage, whose UnmarshalJSON gets the raw member, null included), or cannot
// be reached: repeated members never get here (the shape scan refuses them, comparing names
// case-insensitively), and a request is decoded into a zero value, so v1's merging rules do not
// apply. A failure stops the decode at once, and it is the one encoding/json reported first.
var unmarshalOptions = json.JoinOptions(
	json.RejectUnknownMembers(true),
	json.MatchCaseInsensitiveNames(true),
	jsonv1.MatchCaseSensitiveDelimiter(true),
	jsontext.AllowInvalidUTF8(true),
)

// StrictUnmarshal decodes exactly one JSON value from data into dst under limits: it scans the
// value's shape and stops with a *ShapeError at the first place that breaks limits or repeats a
// member, before anything is decoded; only a value that passes is decoded. Unknown members and a
// value of another JSON kind than dst's field are a *MemberError, anything after the value is an
// error, and data without a value is io.EOF.
//
// A handler that decodes an item of a body on its own (each parameter object, say) passes the
// body's Limits at the item's place (Limits.Sub), so that the item is held to what the body was.
func StrictUnmarshal(data []byte, dst any, limits Limits) error {
	end, err := limits.scan(data)
	if err != nil {
		return err
	}
	if end == 0 {
		return io.EOF
	}
	if err := json.Unmarshal(data[:end], dst, unmarshalOptions); err != nil {
		return memberError(reflect.TypeOf(dst), err)
	}
	// After the value, as encoding/json's Decoder did: a member error in the value is the
	// answer even when something follows it.
	if len(bytes.TrimLeft(data[end:], " \t\r\n")) > 0 {
		return errTrailingData
	}
	return nil
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

// MemberError is a member that does not fit the type the body is decoded into: one the type
// does not know, or a value of another JSON kind. It wraps the decoder's *json.SemanticError.
type MemberError struct {
	// Path is where, as the client wrote it ("parameters", "responses[0].headers"), and as
	// encoding/json named it: member names as the type declares them (whatever their case in
	// the body), an unknown one as written; the keys of a map are not named, since they are
	// the client's data rather than members of the contract. "" is the body itself.
	Path   string
	reason string
	err    *json.SemanticError
}

// Reason says what is wrong at Path, for the client.
func (e *MemberError) Reason() string { return e.reason }

func (e *MemberError) Error() string {
	if e.Path == "" {
		return "json body " + e.reason
	}
	return "json body at " + e.Path + ": " + e.reason
}

// Unwrap returns the decoder's *json.SemanticError.
func (e *MemberError) Unwrap() error { return e.err }

// memberError turns a semantic error of decoding into a value of type root into a *MemberError.
// Errors that concern no JSON value (a Go type the decoder cannot fill, a programming error)
// are returned as they are.
func memberError(root reflect.Type, err error) error {
	var se *json.SemanticError
	if !errors.As(err, &se) {
		var syn *jsontext.SyntacticError
		if errors.As(err, &syn) && errors.Is(err, jsontext.ErrDuplicateName) {
			// The shape scan refuses repeated names first; this is a second line, should the
			// decoder's folding ever find a repeat the scan's did not.
			return &ShapeError{Path: memberPath(root, syn.JSONPointer, true), Violation: DuplicateMember}
		}
		return err
	}
	if errors.Is(err, json.ErrUnknownName) {
		return &MemberError{Path: memberPath(root, se.JSONPointer, true), reason: "is not a known member", err: se}
	}
	if se.JSONKind == 0 {
		return err
	}
	return &MemberError{Path: memberPath(root, se.JSONPointer, false),
		reason: fmt.Sprintf("must be %s, not %s", jsonKind(se.GoType), valueKind(se)), err: se}
}

// valueKind names the JSON value that did not fit as encoding/json did: its kind, and for a
// number that does not fit a numeric field the number itself (1.5 for an integer, 1e400),
// unless it is too long to repeat.
func valueKind(se *json.SemanticError) string {
	switch se.JSONKind {
	case '"':
		return "string"
	case '0':
		if se.GoType != nil && isNumeric(se.GoType.Kind()) && len(se.JSONValue) > 0 && len(se.JSONValue) <= maxEchoedName {
			return "number " + string(se.JSONValue)
		}
		return "number"
	case 't', 'f':
		return "bool"
	case '[':
		return "array"
	case '{':
		return "object"
	case 'n':
		return "null"
	}
	return "a value"
}

func isNumeric(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// memberPath turns the JSON pointer of an error in a value of type t into the client's path
// (see MemberError.Path). Walking the type is what tells an array index from a map key that
// looks like one, and a member's declared name from its spelling in the body. When last is
// true, the pointer's last token is a name the type does not know, kept as written.
func memberPath(t reflect.Type, ptr jsontext.Pointer, last bool) string {
	var b strings.Builder
	member := func(name string) {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(echoedName(name))
	}
	tokens := make([]string, 0, 4)
	for tok := range ptr.Tokens() {
		tokens = append(tokens, tok)
	}
	for i, tok := range tokens {
		if last && i == len(tokens)-1 {
			member(tok)
			break
		}
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t == nil:
			member(tok)
		case t.Kind() == reflect.Struct:
			name, ft := structField(t, tok)
			member(name)
			t = ft
		case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
			b.WriteString("[" + tok + "]")
			t = t.Elem()
		case t.Kind() == reflect.Map:
			t = t.Elem() // a key is not named (MemberError.Path)
		default:
			member(tok)
			t = nil
		}
	}
	return b.String()
}

// structField finds the field of struct type t that the member name matched, as the decoder did
// (exactly, else ignoring case), and returns its declared JSON name and type; a name it cannot
// find (an embedded struct's, say) is returned as written, with a nil type.
func structField(t reflect.Type, name string) (string, reflect.Type) {
	var (
		folded   string
		foldedTo reflect.Type
	)
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Anonymous {
			continue
		}
		declared, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch declared {
		case "-":
			continue
		case "":
			declared = f.Name
		}
		if declared == name {
			return declared, f.Type
		}
		if folded == "" && strings.EqualFold(declared, name) {
			folded, foldedTo = declared, f.Type
		}
	}
	if folded != "" {
		return folded, foldedTo
	}
	return name, nil
}

// JSONFieldError turns a decoding error that concerns one member into a field error, its path
// under prefix ("parameters[2]"), or reports false for errors of the document as a whole.
func JSONFieldError(prefix string, err error) (FieldError, bool) {
	var (
		path, reason string
		se           *ShapeError
		me           *MemberError
	)
	switch {
	case errors.As(err, &se):
		path, reason = se.Path, se.Reason()
	case errors.As(err, &me):
		path, reason = me.Path, me.Reason()
	default:
		return FieldError{}, false
	}
	switch {
	case prefix == "" && path == "":
		return FieldError{}, false
	case prefix == "":
	case path == "":
		path = prefix
	case strings.HasPrefix(path, "["):
		path = prefix + path
	default:
		path = prefix + "." + path
	}
	return FieldError{Field: path, Message: reason}, true
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

// DecodeJSON strictly decodes the request body into dst under limits (StrictUnmarshal's rules:
// the shape is scanned first and the scan stops at the first violation; unknown and repeated
// members and trailing data are refused; a body over the route's limit is refused while it is
// read). On failure it has answered with the fitting problem (413, 400 with one field error, or
// 400 MALFORMED_JSON) and returns false.
//
// A handler states the bounds of its body with its Limits, so that a small body cannot unfold
// into millions of values; the 400 names the place that breaks them ("parameters": "must hold
// at most 10 items"):
//
//	if !httpapi.DecodeJSON(c, &req, httpapi.Limits{Paths: map[string]httpapi.PathLimits{
//		"parameters":                 {MaxItems: 10},
//		"parameters[].contentBase64": {MaxStringBytes: base64.StdEncoding.EncodedLen(MaxPDFBytes)},
//	}}) {
//		return
//	}
//
// Zero fields of the Limits take the Default* bounds (at most 10 levels, 64 items, 64 members,
// 64 KiB strings), so Limits{} is a sound choice for a small body.
func DecodeJSON(c *gin.Context, dst any, limits Limits) bool {
	err := decodeBody(c, dst, limits)
	if err == nil {
		return true
	}
	if v, ok := c.Get(ginBodyKey); ok && errors.Is(err, errBodyBudget) {
		c.Header("Retry-After", v.(*limitedBody).large.retryAfter())
	}
	WriteProblem(c, DecodeProblem("", err))
	return false
}

// budgetedBodyBytes is the size above which a body MaxBody did not budget takes its size from
// the budget of large bodies in flight while decodeBody reads and decodes it. Commands are a
// few hundred bytes; without this, bodies of up to a route's 1 MiB that clients really send,
// slowly, were buffered whole per request (300 connections: 240 MB for up to a minute).
const budgetedBodyBytes = 64 << 10

// maxUnbudgetedPrealloc bounds the buffer decodeBody sizes from a Content-Length before the
// body's bytes arrive, for a body outside the budget of large bodies. Sizing it to the whole
// Content-Length let a client that announced 1 MiB and sent one byte hold 1 MiB until the
// listener's ReadTimeout: 500 such HTTP/1.1 connections held 500 MB, 4000 HTTP/2 streams on
// the mutual-TLS listener 4 GB. Past this size the buffer grows as bytes arrive.
const maxUnbudgetedPrealloc = 16 << 10

// decodeBody reads the body into a buffer sized from its Content-Length when that is known and
// within the route's limit (a larger one fails at the first read anyway): the whole of it for
// a large body, whose size MaxBody has taken from the budget of large bodies in flight, at
// most maxUnbudgetedPrealloc for any other.
//
// A body above budgetedBodyBytes that MaxBody did not budget (its Content-Length, or the route's
// limit when it has none) takes its size from that budget until it is decoded, waiting up to
// LargeBodyWait (then errBodyBudget).
func decodeBody(c *gin.Context, dst any, lim Limits) error {
	var hint int64
	if v, ok := c.Get(ginBodyKey); ok {
		lb := v.(*limitedBody)
		n := c.Request.ContentLength
		if n > 0 && n <= lb.limit {
			hint = n
		}
		if !lb.budgeted && n <= lb.limit { // a longer body fails at its first read
			size := n
			if size < 0 {
				size = lb.limit // chunked: as long as the route allows
			}
			if size > budgetedBodyBytes && lb.large != nil {
				weight, err := lb.large.take(c.Request.Context(), size)
				if err != nil {
					return err
				}
				defer lb.large.sem.Release(weight)
			} else {
				hint = min(hint, maxUnbudgetedPrealloc)
			}
		}
	}
	if c.Request.Body == nil {
		return io.EOF
	}
	data, err := readAll(c.Request.Body, hint)
	if err != nil {
		return err
	}
	return StrictUnmarshal(data, dst, lim)
}

// DecodeProblem maps an error of StrictUnmarshal (or of reading the body) to its problem.
func DecodeProblem(prefix string, err error) Problem {
	if IsBodyTooLarge(err) {
		var mbe *http.MaxBytesError
		errors.As(err, &mbe)
		return NewProblem(http.StatusRequestEntityTooLarge, CodePayloadTooLarge,
			fmt.Sprintf("The request body exceeds %d bytes.", mbe.Limit))
	}
	if errors.Is(err, errBodyBudget) {
		return NewProblem(http.StatusServiceUnavailable, CodeServiceUnavailable, bodyBudgetDetail)
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
