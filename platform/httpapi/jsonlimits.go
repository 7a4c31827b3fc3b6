package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Default bounds of a JSON request body. Every JSON command fits them with room to spare: the
// deepest (a ResponseObject's headers) nests three levels, the longest list (responses) holds
// 50 items, the longest string that is not a file (a ResponseObject body) is 64 KiB. A handler
// tightens or widens them where its contract says so, with Limits.Paths.
const (
	DefaultMaxDepth       = 10
	DefaultMaxItems       = 64
	DefaultMaxMembers     = 64
	DefaultMaxStringBytes = 64 << 10
)

// Limits bound the shape of a JSON body before it is decoded, so that a small body cannot make
// the decoder (or the handler's validation after it) build millions of values. The body limit
// (MaxBody) bounds the bytes; Limits bound what those bytes may unfold into.
//
// A zero field takes its Default* constant; a negative one lifts the bound (the body limit
// still holds).
type Limits struct {
	// MaxDepth bounds how deeply arrays and objects nest; the body's own value is level 1.
	MaxDepth int
	// MaxItems bounds the items of every array.
	MaxItems int
	// MaxMembers bounds the members of every object.
	MaxMembers int
	// MaxStringBytes bounds every string, member names included, in bytes once decoded.
	MaxStringBytes int
	// Paths override MaxItems, MaxMembers and MaxStringBytes at given places of the body. A
	// path names members by name, joined by dots, and array items by [] ("parameters" is the
	// array, "parameters[].contentBase64" the string in each of its items,
	// "responses[].headers" an object); a last segment "*" stands for any member name
	// ("input.*"). The body itself is "". A zero field of a PathLimits keeps the bound that
	// applies elsewhere.
	Paths map[string]PathLimits
}

// PathLimits are the bounds of one place of a body (see Limits.Paths).
type PathLimits struct {
	MaxItems       int
	MaxMembers     int
	MaxStringBytes int
}

// ShapeViolation says which bound a ShapeError broke.
type ShapeViolation int

// The bounds a body can break.
const (
	TooDeep ShapeViolation = iota + 1
	TooManyItems
	TooManyMembers
	StringTooLong
	DuplicateMember
)

// ShapeError is the first place where a JSON body breaks its Limits or repeats a member. The
// scan stops there: a body never yields more than one.
type ShapeError struct {
	// Path is where, as the client wrote it ("parameters", "parameters[3].contentBase64"); ""
	// is the body itself.
	Path      string
	Violation ShapeViolation
	// Limit is the bound that was broken (0 for a duplicate member).
	Limit int
}

// Reason says what is wrong at Path, for the client.
func (e *ShapeError) Reason() string {
	switch e.Violation {
	case TooDeep:
		return fmt.Sprintf("must not nest arrays and objects more than %d levels deep", e.Limit)
	case TooManyItems:
		return fmt.Sprintf("must hold at most %d items", e.Limit)
	case TooManyMembers:
		return fmt.Sprintf("must hold at most %d members", e.Limit)
	case StringTooLong:
		return fmt.Sprintf("must be at most %d bytes long", e.Limit)
	case DuplicateMember:
		return "is given more than once (member names that differ only in case count as the same)"
	}
	return "is not acceptable"
}

func (e *ShapeError) Error() string {
	if e.Path == "" {
		return "json body " + e.Reason()
	}
	return "json body at " + e.Path + ": " + e.Reason()
}

func (l Limits) resolved() Limits {
	pick := func(v, def int) int {
		switch {
		case v == 0:
			return def
		case v < 0:
			return -1
		}
		return v
	}
	l.MaxDepth = pick(l.MaxDepth, DefaultMaxDepth)
	l.MaxItems = pick(l.MaxItems, DefaultMaxItems)
	l.MaxMembers = pick(l.MaxMembers, DefaultMaxMembers)
	l.MaxStringBytes = pick(l.MaxStringBytes, DefaultMaxStringBytes)
	return l
}

// Check scans the first JSON value of data and returns a *ShapeError at the first place that
// breaks l or repeats a member name (compared case-insensitively, as encoding/json matches
// struct fields, so that {"company":"a","Company":"b"} cannot smuggle a second value past
// whoever read the first). It stops there: a hostile body costs the scan of its first
// violation, never of the whole. Tokens come from jsontext (the tokenizer of encoding/json/v2);
// a body it cannot tokenize is refused as malformed (an error wrapping ErrMalformedJSON), so that
// no body reaches the decoder unchecked because the scan gave up on it.
func (l Limits) Check(data []byte) error {
	_, err := l.scan(data)
	return err
}

// scan is Check that also returns where the first value ends in data: 0 when data holds none
// (it is empty or blank).
func (l Limits) scan(data []byte) (end int, err error) {
	s := shapeScanner{lim: l.resolved(),
		// Invalid UTF-8 is what the decoder replaces (unmarshalOptions), and repeated names are
		// for the scan itself to find, comparing them case-insensitively: the tokenizer must
		// see such bodies through rather than stop at them.
		dec: jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))}
	if err := s.scan(); err != nil {
		return 0, err
	}
	return int(s.dec.InputOffset()), nil
}

// Sub returns the Limits of the value at path (a path pattern of Limits.Paths, such as
// "parameters[]"), for a handler that decodes that value on its own: the bounds are l's, and
// the Paths under path are re-rooted at the value ("parameters[].contentBase64" becomes
// "contentBase64", "parameters[]" itself ""). Holding an item to the bounds its body was
// scanned under keeps one truth of them.
func (l Limits) Sub(path string) Limits {
	sub := l
	sub.Paths = nil
	for p, pl := range l.Paths {
		rest, ok := strings.CutPrefix(p, path)
		switch {
		case !ok:
			continue
		case rest == "", strings.HasPrefix(rest, "["):
		case strings.HasPrefix(rest, "."):
			rest = rest[1:]
		default:
			continue // "parametersX" is not under "parameters"
		}
		if sub.Paths == nil {
			sub.Paths = make(map[string]PathLimits)
		}
		sub.Paths[rest] = pl
	}
	return sub
}

// ErrMalformedJSON is a body that is not one well-formed JSON value.
var ErrMalformedJSON = errors.New("malformed JSON")

// unbounded is the limit value of a lifted bound.
const unbounded = -1

func exceeds(n, limit int) bool { return limit != unbounded && n > limit }

// frame is one open array or object of the scan.
type frame struct {
	array  bool
	count  int    // items or members so far
	max    int    // bound of count
	patLen int    // length of the container's own path pattern in shapeScanner.pat
	key    string // object: the current member's name
	// names are the member names so far, folded, to find repeated ones.
	names map[string]struct{}
}

type shapeScanner struct {
	dec     *jsontext.Decoder
	lim     Limits
	frames  []frame
	pat     []byte // path pattern of the value being scanned ("parameters[].type")
	alt     []byte // scratch for the wildcard pattern
	unquote []byte // scratch for the decoded form of an escaped string
}

func (s *shapeScanner) scan() error {
	for {
		if err := s.nextValue(); err != nil {
			return err
		}
		switch kind := s.dec.PeekKind(); kind {
		case '{', '[':
			if err := s.open(kind == '['); err != nil {
				return err
			}
			if _, err := s.dec.ReadToken(); err != nil {
				return malformed(err)
			}
		case '}', ']':
			if _, err := s.dec.ReadToken(); err != nil {
				return malformed(err)
			}
			s.frames = s.frames[:len(s.frames)-1]
			s.pat = s.pat[:s.patLen()]
		case '"':
			raw, err := s.dec.ReadValue()
			if err != nil {
				return malformed(err)
			}
			if max := s.stringLimit(); max != unbounded && len(raw)-2 > max {
				// Escapes make the raw form longer than the decoded one; decode only when that
				// may matter. ReadValue checked the syntax, so unquoting fails only on invalid
				// UTF-8, which encoding/json would turn into longer replacement characters:
				// the raw length then stands.
				n := len(raw) - 2
				if s.unquote, err = jsontext.AppendUnquote(s.unquote[:0], raw); err == nil {
					n = len(s.unquote)
				}
				if n > max {
					return s.violation(len(s.frames), StringTooLong, max)
				}
			}
		case 0:
			_, err := s.dec.ReadToken() // reports why there is no value
			if len(s.frames) == 0 && errors.Is(err, io.EOF) {
				return nil // an empty body: no value, which StrictUnmarshal reports as io.EOF
			}
			return malformed(err)
		default:
			if err := s.dec.SkipValue(); err != nil {
				return malformed(err)
			}
		}
		if len(s.frames) == 0 && s.dec.StackDepth() == 0 {
			return nil // the first value is complete; what follows is StrictUnmarshal's business
		}
	}
}

// nextValue counts the value about to be read in its array, or reads and checks the member
// name in front of it in its object, and sets s.pat to the value's path pattern. At a closing
// delimiter it does nothing.
func (s *shapeScanner) nextValue() error {
	if len(s.frames) == 0 {
		return nil
	}
	kind := s.dec.PeekKind()
	if kind == '}' || kind == ']' {
		return nil
	}
	f := s.top()
	f.count++
	if exceeds(f.count, f.max) {
		violation := TooManyItems
		if !f.array {
			violation = TooManyMembers
		}
		return s.violation(len(s.frames)-1, violation, f.max)
	}
	s.pat = s.pat[:f.patLen]
	if f.array {
		s.pat = append(s.pat, "[]"...)
		return nil
	}
	tok, err := s.dec.ReadToken()
	if err != nil {
		return malformed(err)
	}
	name := tok.String()
	if exceeds(len(name), s.lim.MaxStringBytes) {
		// Named at the object: echoing a name that long back would make the answer as big.
		return s.violation(len(s.frames)-1, StringTooLong, s.lim.MaxStringBytes)
	}
	f.key = name
	folded := strings.ToLower(strings.ToUpper(name))
	if _, dup := f.names[folded]; dup {
		return s.violation(len(s.frames), DuplicateMember, 0)
	}
	if f.names == nil {
		f.names = make(map[string]struct{})
	}
	f.names[folded] = struct{}{}
	if f.patLen > 0 {
		s.pat = append(s.pat, '.')
	}
	s.pat = append(s.pat, name...)
	return nil
}

func (s *shapeScanner) top() *frame { return &s.frames[len(s.frames)-1] }

// patLen is the length of the path pattern of the innermost open container's current value.
func (s *shapeScanner) patLen() int {
	if len(s.frames) == 0 {
		return 0
	}
	return s.top().patLen
}

// open pushes the array or object that starts the current value.
func (s *shapeScanner) open(array bool) error {
	if exceeds(len(s.frames)+1, s.lim.MaxDepth) {
		return s.violation(len(s.frames), TooDeep, s.lim.MaxDepth)
	}
	max := s.lim.MaxMembers
	if array {
		max = s.lim.MaxItems
	}
	if pl, ok := s.pathLimits(); ok {
		if array && pl.MaxItems != 0 {
			max = pl.MaxItems
		} else if !array && pl.MaxMembers != 0 {
			max = pl.MaxMembers
		}
	}
	s.frames = append(s.frames, frame{array: array, max: max, patLen: len(s.pat)})
	return nil
}

// pathLimits returns the overrides of the current value's path, if any.
func (s *shapeScanner) pathLimits() (PathLimits, bool) {
	if len(s.lim.Paths) == 0 {
		return PathLimits{}, false
	}
	if pl, ok := s.lim.Paths[string(s.pat)]; ok {
		return pl, true
	}
	if len(s.frames) == 0 || s.top().array {
		return PathLimits{}, false
	}
	s.alt = append(s.alt[:0], s.pat[:s.top().patLen]...)
	if len(s.alt) > 0 {
		s.alt = append(s.alt, '.')
	}
	s.alt = append(s.alt, '*')
	pl, ok := s.lim.Paths[string(s.alt)]
	return pl, ok
}

func (s *shapeScanner) stringLimit() int {
	if pl, ok := s.pathLimits(); ok && pl.MaxStringBytes != 0 {
		return pl.MaxStringBytes
	}
	return s.lim.MaxStringBytes
}

func malformed(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %w", ErrMalformedJSON, err)
}

// violation builds the error at the value whose path is given by the first depth open
// containers and their current item or member.
func (s *shapeScanner) violation(depth int, v ShapeViolation, limit int) error {
	return &ShapeError{Path: s.path(depth), Violation: v, Limit: limit}
}

// path is the concrete path ("parameters[3].contentBase64") of the current value of
// s.frames[depth-1]; depth 0 is the body itself.
func (s *shapeScanner) path(depth int) string {
	var b strings.Builder
	for _, f := range s.frames[:depth] {
		if f.array {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.count - 1))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(echoedName(f.key))
	}
	return b.String()
}

// maxEchoedName bounds how much of one member name (or number) an error's path or reason
// repeats.
const maxEchoedName = 64

// echoedName is name as an error's path repeats it: the answer names the place, it need not
// repeat a name a client made huge.
func echoedName(name string) string { return clip(name, maxEchoedName) }

// clip shortens s to at most max bytes, at a rune boundary, marking the cut with "…". Answers use
// it for whatever they repeat of a request, so that a client cannot make an error larger than
// what it sent.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
