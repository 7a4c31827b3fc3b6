package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	jsonv2 "github.com/go-json-experiment/json"
)

// collectionLimits are the bounds a POST /collections handler would pass.
var collectionLimits = Limits{Paths: map[string]PathLimits{
	"parameters":                 {MaxItems: 10},
	"parameters[].contentBase64": {MaxStringBytes: 14 << 20},
	"input.*":                    {MaxStringBytes: 300},
	"input.PDF_DOCUMENT":         {MaxStringBytes: 14 << 20},
}}

func TestCheckStopsAtTheFirstViolation(t *testing.T) {
	many := func(n int, item string) string { return strings.TrimSuffix(strings.Repeat(item+",", n), ",") }
	members := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"m` + strings.Repeat("x", i) + `":1`)
		}
		return b.String()
	}
	cases := []struct {
		name, body string
		limits     Limits
		path       string
		violation  ShapeViolation
		limit      int
	}{
		{"array over the default", `{"parameters":[` + many(65, `{}`) + `]}`, Limits{}, "parameters", TooManyItems, 64},
		{"array over its path's bound", `{"parameters":[` + many(11, `{}`) + `]}`, collectionLimits, "parameters", TooManyItems, 10},
		{"nested array named with its index", `{"a":[[1],[` + many(4, `1`) + `]]}`, Limits{MaxItems: 3}, "a[1]", TooManyItems, 3},
		{"root array", `[` + many(65, `1`) + `]`, Limits{}, "", TooManyItems, 64},
		{"object members", `{"x":{` + members(65) + `}}`, Limits{}, "x", TooManyMembers, 64},
		{"members at a path", `{"responses":[{"headers":{` + members(6) + `}}]}`,
			Limits{Paths: map[string]PathLimits{"responses[].headers": {MaxMembers: 5}}}, "responses[0].headers", TooManyMembers, 5},
		{"too deep", `{"a":[{"b":[[]]}]}`, Limits{MaxDepth: 4}, "a[0].b[0]", TooDeep, 4},
		{"deep root", strings.Repeat("[", 11) + strings.Repeat("]", 11), Limits{}, "[0][0][0][0][0][0][0][0][0][0]", TooDeep, 10},
		{"string over the default", `{"name":"` + strings.Repeat("a", DefaultMaxStringBytes+1) + `"}`, Limits{}, "name", StringTooLong, DefaultMaxStringBytes},
		{"string at a wildcard", `{"input":{"ACCOUNT_OWNER_NAME":"` + strings.Repeat("a", 301) + `"}}`, collectionLimits, "input.ACCOUNT_OWNER_NAME", StringTooLong, 300},
		{"string in array items", `{"parameters":[{"name":"ab"},{"name":"abc"}]}`,
			Limits{Paths: map[string]PathLimits{"parameters[].name": {MaxStringBytes: 2}}}, "parameters[1].name", StringTooLong, 2},
		{"escapes count as what they decode to", `{"s":"\u00e9\u00e9"}`, Limits{MaxStringBytes: 3}, "s", StringTooLong, 3},
		{"a surrogate pair is four bytes", `{"s":"\ud83d\ude00x"}`, Limits{MaxStringBytes: 4}, "s", StringTooLong, 4},
		{"member name too long, named at its object", `{"o":{"` + strings.Repeat("k", 11) + `":1}}`, Limits{MaxStringBytes: 10}, "o", StringTooLong, 10},
		{"duplicate member", `{"company":"a","company":"b"}`, Limits{}, "company", DuplicateMember, 0},
		{"duplicate differing in case", `{"company":"a","Company":"b"}`, Limits{}, "Company", DuplicateMember, 0},
		{"duplicate spelled with an escape", `{"company":"a","\u0063ompany":"b"}`, Limits{}, "company", DuplicateMember, 0},
		{"duplicate in an array item", `{"parameters":[{"type":"a"},{"type":"a","type":"b"}]}`, Limits{}, "parameters[1].type", DuplicateMember, 0},
		{"duplicate past the linear names", `{"o":{` + members(40) + `,"m":2}}`, Limits{}, "o.m", DuplicateMember, 0},
		{"duplicate after a reused frame", `[{"a":1,"b":1},{"b":1,"a":1,"a":2}]`, Limits{}, "[1].a", DuplicateMember, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.limits.Check([]byte(tc.body))
			var se *ShapeError
			if !errors.As(err, &se) {
				t.Fatalf("Check = %v, want a *ShapeError", err)
			}
			if se.Path != tc.path || se.Violation != tc.violation || se.Limit != tc.limit {
				t.Fatalf("ShapeError = %+v, want path %q violation %d limit %d", se, tc.path, tc.violation, tc.limit)
			}
		})
	}
}

func TestCheckPassesWhatFits(t *testing.T) {
	for _, body := range []string{
		`{"company":"se-demo-insurer","loginMethod":"PDF_UPLOAD","parameters":[{"type":"PdfDocumentParameter","contentBase64":"` +
			strings.Repeat("QUJD", 1<<20) + `"}]}`,
		`{"input":{"SWEDISH_PERSONAL_NUMBER":"199001010017","PDF_DOCUMENT":"` + strings.Repeat("A", 1<<20) + `"}}`,
		`{"parameters":[{},{},{},{},{},{},{},{},{},{}]}`,
		`{"a":{"b":"x"},"c":{"b":"y"},"b":[{"b":1},{"b":2}]}`, // the same name in different objects
		`{"s":"\u00e9\"\\\/\b\f\n\r\t"}`,
		`[[[[[[[[[[]]]]]]]]]]`,
		`"just a string"`, `12.5e-3`, `true`, `null`, ``, `   `,
	} {
		if err := collectionLimits.Check([]byte(body)); err != nil {
			t.Errorf("Check(%.80s…) = %v, want nil", body, err)
		}
	}
}

// A body the scan cannot tokenize is refused as malformed by the scan itself: were it left to the
// decoder, a body the two judged differently would reach the decoder unchecked.
func TestCheckRefusesMalformedBodies(t *testing.T) {
	for _, body := range []string{`{`, `{"a"`, `{"a":}`, `[1,]`, `{"a":1,}`, `[}`, `{]`, `"\x"`, "\"a\x01\"", `{1:2}`, `"\u12"`} {
		err := (Limits{}).Check([]byte(body))
		var se *ShapeError
		if !errors.Is(err, ErrMalformedJSON) || errors.As(err, &se) {
			t.Errorf("Check(%q) = %v, want ErrMalformedJSON", body, err)
		}
		var v any
		err = StrictUnmarshal([]byte(body), &v, Limits{})
		if err == nil {
			t.Errorf("StrictUnmarshal(%q) accepted invalid JSON", body)
		} else if p := DecodeProblem("", err); p.Code != CodeMalformedJSON {
			t.Errorf("DecodeProblem(%q) = %s, want %s", body, p.Code, CodeMalformedJSON)
		}
	}
	// What follows the first value is the decoder's to refuse (trailing data).
	if err := (Limits{}).Check([]byte(`{"a":1}}`)); err != nil {
		t.Errorf("Check of a value with trailing data = %v, want nil", err)
	}
	// Invalid UTF-8 is what encoding/json replaces, not a reason to stop the scan.
	if err := (Limits{MaxStringBytes: 3}).Check([]byte("{\"s\":\"\xff\xff\xff\xff\"}")); !isShape(err, StringTooLong) {
		t.Errorf("Check of a long string of invalid UTF-8 = %v, want StringTooLong", err)
	}
}

func isShape(err error, v ShapeViolation) bool {
	var se *ShapeError
	return errors.As(err, &se) && se.Violation == v
}

func TestShapeErrorPathEchoesNoHugeName(t *testing.T) {
	name := strings.Repeat("é", 1000)
	err := (Limits{MaxStringBytes: -1}).Check([]byte(`{"` + name + `":{"a":1,"a":2}}`))
	var se *ShapeError
	if !errors.As(err, &se) || se.Violation != DuplicateMember {
		t.Fatalf("Check = %v", err)
	}
	if len(se.Path) > 2*maxEchoedName || !strings.HasSuffix(se.Path, "….a") {
		t.Fatalf("path = %q (%d bytes), want a shortened name", se.Path, len(se.Path))
	}
}

func TestStrictUnmarshalKeepsItsRules(t *testing.T) {
	type target struct {
		Name string `json:"name"`
	}
	var v target
	if err := StrictUnmarshal([]byte(`{"name":"a","extra":1}`), &v, Limits{}); err == nil {
		t.Error("unknown member accepted")
	}
	if err := StrictUnmarshal([]byte(`{"name":"a"} {}`), &v, Limits{}); !errors.Is(err, errTrailingData) {
		t.Errorf("trailing data = %v", err)
	}
	if err := StrictUnmarshal([]byte(" {\"name\":\"a\"} \r\n\t"), &v, Limits{}); err != nil {
		t.Errorf("blanks after the value = %v", err)
	}
	if err := StrictUnmarshal([]byte(" \n"), &v, Limits{}); !errors.Is(err, io.EOF) {
		t.Errorf("a blank body = %v, want io.EOF", err)
	}
	var se *ShapeError
	if err := StrictUnmarshal([]byte(`{"name":"a","name":"b"}`), &v, Limits{}); !errors.As(err, &se) || se.Path != "name" {
		t.Errorf("duplicate member = %v", err)
	}
	// With the string bound lifted strings are bounded by the body alone: a file in a string fits.
	long := `{"name":"` + strings.Repeat("a", 4*DefaultMaxStringBytes) + `"}`
	if err := StrictUnmarshal([]byte(long), &v, Limits{MaxStringBytes: -1}); err != nil || len(v.Name) != 4*DefaultMaxStringBytes {
		t.Errorf("long string = %v", err)
	}
	if err := StrictUnmarshal([]byte(long), &v, Limits{}); !errors.As(err, &se) || se.Violation != StringTooLong {
		t.Errorf("long string within the defaults = %v", err)
	}
	// A body over the route's limit is refused while it is read.
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodPost, "/", nil)
	c.Request.Body = http.MaxBytesReader(w, io.NopCloser(strings.NewReader(long)), 100)
	if DecodeJSON(c, &v, Limits{MaxStringBytes: -1}) || w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("body over the limit = %d, want 413", w.Code)
	}
}

// Which member is wrong comes from the decoder's typed errors, named as encoding/json named it,
// with the array indexes it left out, and never by reading an error's text.
func TestStrictUnmarshalNamesTheMember(t *testing.T) {
	long := strings.Repeat("x", 100)
	cases := []struct {
		name, body, path, message string
		unknown                   bool
	}{
		{"unknown member", `{"company":"a","extra":1}`, "extra", "is not a known member", true},
		{"unknown member spelled with an escape", `{"\u0065xtra":1}`, "extra", "is not a known member", true},
		{"a huge unknown name is shortened", `{"` + long + `":1}`, long[:maxEchoedName] + "…", "is not a known member", true},
		{"unknown member of a nested object", `{"inner":{"b":1}}`, "inner.b", "is not a known member", true},
		{"delimiters are not folded", `{"loginMethod":"x"}`, "loginMethod", "is not a known member", true},
		{"string for an integer", `{"status":"200"}`, "status", "must be an integer, not string", false},
		{"the declared name, whatever the case", `{"STATUS":"200"}`, "status", "must be an integer, not string", false},
		{"a fraction for an integer", `{"status":1.5}`, "status", "must be an integer, not number 1.5", false},
		{"a huge number is not repeated", `{"status":1` + strings.Repeat("0", 100) + `}`, "status", "must be an integer, not number", false},
		{"string for a boolean", `{"reuse":"yes"}`, "reuse", "must be a boolean, not string", false},
		{"number for a string", `{"company":1}`, "company", "must be a string, not number", false},
		{"array item", `{"names":["a",2]}`, "names[1]", "must be a string, not number", false},
		{"map value named at its map", `{"headers":{"A":["b"]}}`, "headers", "must be a string, not array", false},
		{"map key that looks like an index", `{"headers":{"0":true}}`, "headers", "must be a string, not bool", false},
		{"object for an array", `{"parameters":{}}`, "parameters", "must be an array, not object", false},
		{"nested member", `{"inner":{"a":"x"}}`, "inner.a", "must be an integer, not string", false},
		{"the body itself", `[]`, "", "must be an object, not array", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v fuzzTarget
			err := StrictUnmarshal([]byte(tc.body), &v, Limits{})
			var me *MemberError
			if !errors.As(err, &me) || me.Path != tc.path || me.Reason() != tc.message {
				t.Fatalf("StrictUnmarshal = %#v, want a *MemberError at %q: %q", err, tc.path, tc.message)
			}
			var se *jsonv2.SemanticError
			if !errors.As(err, &se) || errors.Is(err, jsonv2.ErrUnknownName) != tc.unknown {
				t.Errorf("error %v wraps %v, want the decoder's *json.SemanticError", err, se)
			}
			fe, ok := JSONFieldError("parameters[2]", err)
			want := "parameters[2]"
			if tc.path != "" {
				want += "." + tc.path
			}
			if !ok || fe != (FieldError{Field: want, Message: tc.message}) {
				t.Errorf("JSONFieldError = %+v %v, want %s: %s", fe, ok, want, tc.message)
			}
		})
	}
	// The body itself of another kind is no member: a malformed request, as before.
	var v fuzzTarget
	if err := StrictUnmarshal([]byte(`"x"`), &v, Limits{}); DecodeProblem("", err).Code != CodeMalformedJSON {
		t.Errorf("a string body = %+v", DecodeProblem("", err))
	}
	// A member error comes before trailing data, as it did with encoding/json's Decoder.
	if p := DecodeProblem("", StrictUnmarshal([]byte(`{"status":"x"} {}`), &v, Limits{})); len(p.Errors) != 1 || p.Errors[0].Field != "status" {
		t.Errorf("a member error followed by data = %+v", p)
	}
}

func TestSubReRootsThePaths(t *testing.T) {
	body := Limits{MaxItems: 5, MaxStringBytes: 100, Paths: map[string]PathLimits{
		"parameters":                 {MaxItems: 10},
		"parameters[]":               {MaxMembers: 3},
		"parameters[].contentBase64": {MaxStringBytes: 1000},
		"parameters[].tags[]":        {MaxStringBytes: 2},
		"parametersExtra":            {MaxItems: 1},
		"input.*":                    {MaxStringBytes: 7},
	}}
	got := body.Sub("parameters[]")
	want := Limits{MaxItems: 5, MaxStringBytes: 100, Paths: map[string]PathLimits{
		"":              {MaxMembers: 3},
		"contentBase64": {MaxStringBytes: 1000},
		"tags[]":        {MaxStringBytes: 2},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Sub = %+v, want %+v", got, want)
	}
	if got := body.Sub("input"); !reflect.DeepEqual(got.Paths, map[string]PathLimits{"*": {MaxStringBytes: 7}}) {
		t.Errorf("Sub(input).Paths = %+v", got.Paths)
	}
	// An item is held to what it was held to in its body.
	item := []byte(`{"type":"PdfDocumentParameter","contentBase64":"` + strings.Repeat("A", 1000) + `","x":1}`)
	if err := body.Check([]byte(`{"parameters":[` + string(item) + `]}`)); err != nil {
		t.Fatalf("body = %v", err)
	}
	var v map[string]any
	if err := StrictUnmarshal(item, &v, got); err != nil {
		t.Errorf("item = %v", err)
	}
	if err := StrictUnmarshal([]byte(`{"a":1,"b":2,"c":3,"d":4}`), &v, got); !isShape(err, TooManyMembers) {
		t.Errorf("an item with too many members = %v", err)
	}
	if err := StrictUnmarshal([]byte(`{"tags":["abc"]}`), &v, got); !isShape(err, StringTooLong) {
		t.Errorf("a tag too long = %v", err)
	}
}

func TestDecodeProblemNamesTheShapeViolation(t *testing.T) {
	p := DecodeProblem("", &ShapeError{Path: "parameters", Violation: TooManyItems, Limit: 10})
	if p.Status != http.StatusBadRequest || p.Code != CodeValidationFailed || len(p.Errors) != 1 ||
		p.Errors[0] != (FieldError{Field: "parameters", Message: "must hold at most 10 items"}) {
		t.Errorf("problem = %+v", p)
	}
	p = DecodeProblem("", &ShapeError{Violation: TooManyItems, Limit: 64})
	if p.Code != CodeValidationFailed || len(p.Errors) != 0 || !strings.Contains(p.Detail, "at most 64 items") {
		t.Errorf("root problem = %+v", p)
	}
	fe, ok := JSONFieldError("parameters[2]", &ShapeError{Path: "headers", Violation: DuplicateMember})
	if !ok || fe.Field != "parameters[2].headers" {
		t.Errorf("prefixed = %+v %v", fe, ok)
	}
	fe, ok = JSONFieldError("inputs", &ShapeError{Path: "[3]", Violation: TooManyMembers, Limit: 2})
	if !ok || fe.Field != "inputs[3]" {
		t.Errorf("prefixed index = %+v %v", fe, ok)
	}
}

// hostileBody is the body of the memory probe: a 9 MB array of empty objects (3 million
// items) where a handful of parameters belong.
func hostileBody() []byte {
	var b bytes.Buffer
	b.WriteString(`{"company":"se-demo-insurer","loginMethod":"SWEDISH_MOBILE_EID","parameters":[`)
	for i := range 3_000_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("{}")
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// collectionsEngine has a route that takes a collection request as POST /collections does,
// with its Limits or with the defaults.
func collectionsEngine(t testing.TB) *gin.Engine {
	t.Helper()
	e := NewEngine(Options{Keys: newFakeKeys(), RateLimit: RateLimit{Disabled: true}})
	type request struct {
		Company     string            `json:"company"`
		LoginMethod string            `json:"loginMethod"`
		Parameters  []json.RawMessage `json:"parameters"`
	}
	validate := func(c *gin.Context, req request) {
		// What a handler does with each item: one field error per bad one.
		var errs []FieldError
		for range req.Parameters {
			errs = append(errs, FieldError{Field: "parameters[i].type", Message: "is required"})
		}
		if len(errs) > 0 {
			AbortValidation(c, "The collection request is invalid.", errs...)
			return
		}
		c.Status(http.StatusCreated)
	}
	e.POST("/collections", MaxBody(14<<20), func(c *gin.Context) {
		var req request
		if DecodeJSON(c, &req, collectionLimits) {
			validate(c, req)
		}
	})
	e.POST("/collections-with-defaults", MaxBody(14<<20), func(c *gin.Context) {
		var req request
		if DecodeJSON(c, &req, Limits{}) {
			validate(c, req)
		}
	})
	return e
}

func postJSON(h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set(HeaderAPIKey, testKey)
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestHostileArrayIsRefusedWithOneSmallProblem(t *testing.T) {
	e := collectionsEngine(t)
	body := hostileBody()
	for path, limit := range map[string]int{"/collections": 10, "/collections-with-defaults": DefaultMaxItems} {
		w := postJSON(e, path, body)
		p := decodeProblem(t, w, http.StatusBadRequest, CodeValidationFailed)
		if len(p.Errors) != 1 || p.Errors[0].Field != "parameters" || p.Errors[0].Message != (&ShapeError{Violation: TooManyItems, Limit: limit}).Reason() {
			t.Errorf("%s: errors = %+v, want one naming parameters", path, p.Errors)
		}
		if w.Body.Len() > 1024 {
			t.Errorf("%s: problem of %d bytes, want a small one", path, w.Body.Len())
		}
	}
}

// allocatedBytes is what f allocates on the heap (also what other goroutines allocate
// meanwhile, so callers leave generous room).
func allocatedBytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestHostileArrayAllocatesAboutItsBody(t *testing.T) {
	e := collectionsEngine(t)
	body := hostileBody()
	postJSON(e, "/collections", body) // warm up the engine's pools
	for _, path := range []string{"/collections", "/collections-with-defaults"} {
		n := allocatedBytes(func() { postJSON(e, path, body) })
		if n > 3*uint64(len(body)) {
			t.Errorf("%s: a %d-byte body allocated %d bytes (%.1f×), want at most 3×", path, len(body), n, float64(n)/float64(len(body)))
		}
	}
}

func TestDuplicateMembersAreRefused(t *testing.T) {
	env := newEnv(t, nil)
	h := authed("Content-Type", "application/json")
	for _, body := range []string{`{"name":"a","name":"b"}`, `{"name":"a","NAME":"b"}`} {
		p := decodeProblem(t, env.do(t, http.MethodPost, "/echo", body, h), http.StatusBadRequest, CodeValidationFailed)
		if len(p.Errors) != 1 || p.Errors[0].Field != strings.Split(body, `"`)[5] {
			t.Errorf("%s: errors = %+v, want the repeated member", body, p.Errors)
		}
	}
}

func TestValidationProblemCapsItsErrors(t *testing.T) {
	errs := make([]FieldError, 3_000_000)
	for i := range errs {
		errs[i] = FieldError{Field: "parameters", Message: "bad"}
	}
	p := ValidationProblem("The collection request is invalid.", errs...)
	if len(p.Errors) != MaxFieldErrors || p.ErrorCount != 3_000_000 {
		t.Fatalf("errors %d, count %d; want %d and 3000000", len(p.Errors), p.ErrorCount, MaxFieldErrors)
	}
	if !strings.HasPrefix(p.Detail, "The collection request is invalid.") || !strings.Contains(p.Detail, "2999980 more") {
		t.Errorf("detail = %q", p.Detail)
	}
	if few := ValidationProblem("d", errs[:MaxFieldErrors]...); len(few.Errors) != MaxFieldErrors || few.ErrorCount != 0 || few.Detail != "d" {
		t.Errorf("a list within the cap changed: %+v", few)
	}

	// A problem built by hand is capped when written.
	e := gin.New()
	e.GET("/", func(c *gin.Context) {
		WriteProblem(c, Problem{Status: http.StatusBadRequest, Code: CodeValidationFailed, Errors: errs[:50]})
	})
	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	var got Problem
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got.Errors) != MaxFieldErrors || got.ErrorCount != 50 {
		t.Errorf("written problem = %+v (%v)", got, err)
	}
}

// BenchmarkHostileArray measures one request with the memory probe's body: bytes allocated per
// byte of body is the number that matters (it was about 20 before Limits, with a 182 MB answer).
func BenchmarkHostileArray(b *testing.B) {
	for _, path := range []string{"/collections", "/collections-with-defaults"} {
		b.Run(strings.TrimPrefix(path, "/"), func(b *testing.B) {
			e := collectionsEngine(b)
			body := hostileBody()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				if w := postJSON(e, path, body); w.Code != http.StatusBadRequest {
					b.Fatalf("status %d", w.Code)
				}
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(len(body)), "alloc-bytes/body-byte")
		})
	}
}

// BenchmarkDecodeJSON measures an ordinary collection request.
func BenchmarkDecodeJSON(b *testing.B) {
	e := collectionsEngine(b)
	body := []byte(`{"company":"se-demo-insurer","loginMethod":"SWEDISH_MOBILE_EID","parameters":[]}`)
	b.ReportAllocs()
	for b.Loop() {
		if w := postJSON(e, "/collections", body); w.Code != http.StatusCreated {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

// decodeLikeEncodingJSON is the strict decode as it was before the decoder moved to
// encoding/json/v2: encoding/json with unknown members refused and nothing after the value.
// FuzzStrictUnmarshal holds StrictUnmarshal to it.
func decodeLikeEncodingJSON(data []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if err := dec.Decode(new(json.RawMessage)); !errors.Is(err, io.EOF) {
		return errTrailingData
	}
	return nil
}

// fuzzTarget has a member of every kind the requests use.
type fuzzTarget struct {
	Company     string                     `json:"company"`
	LoginMethod string                     `json:"login_method"`
	Status      *int                       `json:"status"`
	Reuse       *bool                      `json:"reuse"`
	Body        *string                    `json:"body"`
	Names       []string                   `json:"names"`
	Headers     map[string]string          `json:"headers"`
	Parameters  []json.RawMessage          `json:"parameters"`
	Inputs      *[]json.RawMessage         `json:"inputs"`
	Input       map[string]json.RawMessage `json:"input"`
	Inner       *struct {
		A int `json:"a"`
	} `json:"inner"`
}

// indexes are the array indexes of a path, which encoding/json left out of its field paths.
var indexes = regexp.MustCompile(`\[[0-9]+\]`)

// FuzzStrictUnmarshal feeds arbitrary bodies to the shape scan and the strict decoder: neither
// may panic, with every bound lifted the scan refuses only repeated members and malformed
// bodies, and it never calls a well-formed body malformed. A body the scan passes decodes as it
// did with encoding/json: the same values, or an error where encoding/json had one, and where
// that was a type error, the same member and message.
func FuzzStrictUnmarshal(f *testing.F) {
	for _, seed := range []string{
		`{"company":"a","loginMethod":"b","parameters":[{"type":"SwedishPersonalNumberParameter","personalNumber":"199001010017"}]}`,
		`{"input":{"SWEDISH_PERSONAL_NUMBER":"19900101-0017"}}`,
		`{"responses":[{"requestId":"r","status":200,"headers":{"A":"b"},"body":"\u00e9\ud83d\ude00"}]}`,
		`{"company":"a","company":"b"}`, `[[[[[[[[[[[[]]]]]]]]]]]]`, `{"a":[{},{},{}]}`, `"\u12"`, `{"a":1}}`,
		`{"Company":1}`, `{"LOGIN_METHOD":"x","loginMethod":"y"}`, `{"status":1.5}`, `{"status":"200"}`, `{"reuse":"yes"}`,
		`{"names":["a",2]}`, `{"headers":{"A":["b"]}}`, `{"inputs":null,"input":{"A":null}}`, `{"inner":{"a":"x"}}`,
		`{"inner":{"b":1}}`, "{\"body\":\"\xff\\ud800\"}", `{"parameters":[null, 1 ,"x",{"y":[]}]} `, `[]`, ``,
	} {
		f.Add([]byte(seed))
	}
	lifted := Limits{MaxDepth: -1, MaxItems: -1, MaxMembers: -1, MaxStringBytes: -1}
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = collectionLimits.Check(data)
		scanErr := lifted.Check(data)
		switch {
		case scanErr == nil, isShape(scanErr, DuplicateMember):
		case errors.Is(scanErr, ErrMalformedJSON):
			if json.Valid(data) {
				t.Fatalf("well-formed %q called malformed: %v", data, scanErr)
			}
		default:
			t.Fatalf("with every bound lifted Check = %v", scanErr)
		}
		var got, want fuzzTarget
		err := StrictUnmarshal(data, &got, lifted)
		if err != nil {
			_ = DecodeProblem("", err)
		}
		if scanErr == nil {
			wantErr := decodeLikeEncodingJSON(data, &want)
			switch {
			case (err == nil) != (wantErr == nil):
				t.Fatalf("%q: StrictUnmarshal = %v, encoding/json = %v", data, err, wantErr)
			case err == nil && !reflect.DeepEqual(got, want):
				t.Fatalf("%q decoded to\n%+v, encoding/json to\n%+v", data, got, want)
			}
			var te *json.UnmarshalTypeError
			if errors.As(wantErr, &te) && te.Field != "" {
				var me *MemberError
				if !errors.As(err, &me) || errors.Is(err, jsonv2.ErrUnknownName) {
					t.Fatalf("%q: StrictUnmarshal = %v, want the type error of encoding/json (%v)", data, err, wantErr)
				}
				if path := indexes.ReplaceAllString(me.Path, ""); path != te.Field {
					t.Fatalf("%q: error at %q (%q without indexes), encoding/json's at %q", data, me.Path, path, te.Field)
				}
				if msg := fmt.Sprintf("must be %s, not %s", jsonKind(te.Type), te.Value); len(te.Value) <= len("number ")+maxEchoedName && me.Reason() != msg {
					t.Fatalf("%q: reason %q, encoding/json's %q", data, me.Reason(), msg)
				}
			}
		}
		var generic any
		if err := StrictUnmarshal(data, &generic, lifted); err == nil && !json.Valid(data) {
			t.Fatalf("invalid JSON %q decoded", data)
		}
	})
}
