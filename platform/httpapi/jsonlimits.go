package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
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

// compatLimits are the bounds of StrictDecode and of DecodeJSON without Limits: the defaults,
// except that strings are bounded by the body limit alone, so that a handler that takes a file
// in a string keeps working until it states its own bound.
var compatLimits = Limits{MaxStringBytes: -1}

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
// whoever read the first). It allocates next to nothing and never panics. Syntax errors are
// not its business: it stops at the first one and returns nil, leaving the report to the
// decoder.
func (l Limits) Check(data []byte) error {
	s := shapeScanner{data: data, lim: l.resolved()}
	return s.scan()
}

// unbounded is the limit value of a lifted bound.
const unbounded = -1

func exceeds(n, limit int) bool { return limit != unbounded && n > limit }

// frame is one open array or object of the scan.
type frame struct {
	array  bool
	count  int    // items or members so far
	max    int    // bound of count
	patLen int    // length of the container's own path pattern in shapeScanner.pat
	key    []byte // object: the current member's name, decoded
	// names are the first linearNameLimit member names, compared one by one for duplicates;
	// past them set takes over, where comparing with each one would cost too much.
	names [][]byte
	set   map[string]struct{}
}

// linearNameLimit is how many member names an object compares one by one before it keeps a set.
const linearNameLimit = 16

type shapeScanner struct {
	data   []byte
	pos    int
	lim    Limits
	frames []frame
	pat    []byte // path pattern of the value being scanned ("parameters[].type")
	alt    []byte // scratch for the wildcard pattern
}

// errSyntax stops the scan at invalid JSON; Check reports it as nil.
var errSyntax = &ShapeError{}

func (s *shapeScanner) scan() error {
	err := s.value()
	if err == errSyntax { //nolint:errorlint // private sentinel, never wrapped
		return nil
	}
	return err
}

func (s *shapeScanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value scans one whole value, iteratively: the depth of the body must not become the depth of
// Go's stack.
func (s *shapeScanner) value() error {
	for {
		// One value starts here; its path pattern is in s.pat.
		s.skipSpace()
		if s.pos >= len(s.data) {
			return errSyntax
		}
		switch c := s.data[s.pos]; {
		case c == '{' || c == '[':
			if err := s.open(c == '['); err != nil {
				return err
			}
			s.pos++
			s.skipSpace()
			if s.pos < len(s.data) && (s.data[s.pos] == '}' || s.data[s.pos] == ']') {
				if (s.data[s.pos] == ']') != s.top().array {
					return errSyntax
				}
				s.pos++
				s.frames = s.frames[:len(s.frames)-1]
				break // the empty container is the value
			}
			if err := s.next(); err != nil {
				return err
			}
			continue // the first item or member value
		case c == '"':
			n, err := s.str()
			if err != nil {
				return err
			}
			if max := s.stringLimit(); exceeds(n, max) {
				return s.violation(len(s.frames), StringTooLong, max)
			}
		default:
			if err := s.scalar(); err != nil {
				return err
			}
		}
		// A value ended: close the containers it completes and move to the next sibling.
		for {
			if len(s.frames) == 0 {
				return nil
			}
			s.skipSpace()
			if s.pos >= len(s.data) {
				return errSyntax
			}
			f := s.top()
			c := s.data[s.pos]
			s.pos++
			if c == ',' {
				if err := s.next(); err != nil {
					return err
				}
				break
			}
			if f.array && c == ']' || !f.array && c == '}' {
				s.frames = s.frames[:len(s.frames)-1]
				continue
			}
			return errSyntax
		}
	}
}

func (s *shapeScanner) top() *frame { return &s.frames[len(s.frames)-1] }

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
	if len(s.frames) < cap(s.frames) {
		// Reuse the frame's buffers from an earlier container at this depth.
		s.frames = s.frames[:len(s.frames)+1]
		f := s.top()
		names, set := f.names[:0], f.set
		clear(set)
		*f = frame{names: names, set: set}
	} else {
		s.frames = append(s.frames, frame{})
	}
	f := s.top()
	f.array, f.max, f.patLen = array, max, len(s.pat)
	return nil
}

// next starts the next item or member of the innermost container, at s.pos (after its '[',
// '{' or ','), and sets s.pat to the pattern of the value that follows.
func (s *shapeScanner) next() error {
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
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return errSyntax
	}
	start := s.pos
	n, err := s.str()
	if err != nil {
		return err
	}
	if exceeds(n, s.lim.MaxStringBytes) {
		// Named at the object: echoing a name that long back would make the answer as big.
		return s.violation(len(s.frames)-1, StringTooLong, s.lim.MaxStringBytes)
	}
	name := s.data[start+1 : s.pos-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		var decoded string
		if json.Unmarshal(s.data[start:s.pos], &decoded) != nil {
			return errSyntax
		}
		name = []byte(decoded)
	}
	f.key = name
	if s.seen(f, name) {
		return s.violation(len(s.frames), DuplicateMember, 0)
	}
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		return errSyntax
	}
	s.pos++
	if f.patLen > 0 {
		s.pat = append(s.pat, '.')
	}
	s.pat = append(s.pat, name...)
	return nil
}

// seen records name, the latest member of f, and reports whether f had it already, ignoring
// case.
func (s *shapeScanner) seen(f *frame, name []byte) bool {
	if f.count <= linearNameLimit {
		for _, n := range f.names {
			if bytes.EqualFold(n, name) {
				return true
			}
		}
		f.names = append(f.names, name)
		return false
	}
	if f.count == linearNameLimit+1 {
		if f.set == nil {
			f.set = make(map[string]struct{}, 4*linearNameLimit)
		}
		for _, n := range f.names {
			f.set[foldName(n)] = struct{}{}
		}
	}
	k := foldName(name)
	if _, dup := f.set[k]; dup {
		return true
	}
	f.set[k] = struct{}{}
	return false
}

// foldName is name in a form equal for names that differ only in case.
func foldName(name []byte) string {
	return strings.ToLower(strings.ToUpper(string(name)))
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

// str scans the string at s.pos and returns its length once decoded, in bytes (escapes count
// as what they stand for; an invalid one as the U+FFFD that replaces it).
func (s *shapeScanner) str() (int, error) {
	s.pos++ // the opening quote
	n := 0
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return n, nil
		case c < 0x20:
			return 0, errSyntax
		case c != '\\':
			s.pos++
			n++
			continue
		}
		if s.pos+1 >= len(s.data) {
			return 0, errSyntax
		}
		if s.data[s.pos+1] != 'u' {
			switch s.data[s.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			default:
				return 0, errSyntax
			}
			s.pos += 2
			n++
			continue
		}
		r, ok := s.hex4(s.pos + 2)
		if !ok {
			return 0, errSyntax
		}
		s.pos += 6
		if r >= 0xD800 && r < 0xDC00 && s.pos+6 <= len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
			if lo, ok := s.hex4(s.pos + 2); ok && lo >= 0xDC00 && lo < 0xE000 {
				s.pos += 6
				n += 4 // a surrogate pair is one rune outside the BMP
				continue
			}
		}
		if r >= 0xD800 && r < 0xE000 {
			n += utf8.RuneLen(utf8.RuneError)
		} else {
			n += utf8.RuneLen(r)
		}
	}
	return 0, errSyntax
}

func (s *shapeScanner) hex4(at int) (rune, bool) {
	if at+4 > len(s.data) {
		return 0, false
	}
	var r rune
	for _, c := range s.data[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// scalar skips a number, true, false or null. It checks only that the value is made of the
// characters such values are made of; the decoder judges the rest.
func (s *shapeScanner) scalar() error {
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'E' {
			s.pos++
			continue
		}
		break
	}
	if s.pos == start {
		return errSyntax
	}
	return nil
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
		if len(f.key) > maxEchoedName {
			// The answer names the place, it need not repeat a name a client made huge.
			n := maxEchoedName
			for n > 0 && !utf8.RuneStart(f.key[n]) {
				n--
			}
			b.Write(f.key[:n])
			b.WriteString("…")
			continue
		}
		b.Write(f.key)
	}
	return b.String()
}

// maxEchoedName bounds how much of one member name a ShapeError's path repeats.
const maxEchoedName = 64
