package eventschema

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// PersonalParts is a stored payload's personal member taken apart in one scan, for a reader
// that needs several of OpenPersonal, InspectPersonal, PersonalErased and WithoutPersonal of the
// same payload: a rebuild opens every event once for every read model, the audit history
// included. Each field is what the function it names returns for the payload.
type PersonalParts struct {
	// Opened and Erased are OpenPersonal's out and erased.
	Opened json.RawMessage
	Erased bool
	// Subject, Sealed and Plain are InspectPersonal's.
	Subject       string
	Sealed, Plain bool
	// Marker is PersonalErased's: the payload holds the erased marker.
	Marker bool

	// The payload as stored and the bounds of what WithoutPersonal cuts out of it (Public).
	payload       json.RawMessage
	before, after int
}

// Public is WithoutPersonal's answer, made when asked (the audit history needs it only for an
// event it cannot summarise from the decoded one); nil unless Sealed or Marker (the other
// payloads are their own public part, as far as the audit history is concerned), and nil for
// parts not made by OpenPersonalParts.
func (p PersonalParts) Public() json.RawMessage {
	if !p.Sealed && !p.Marker || p.payload == nil {
		return nil
	}
	return cutMember(p.payload, p.before, p.after)
}

// OpenPersonalParts is OpenPersonal, InspectPersonal, PersonalErased and (for a sealed or
// erased member) WithoutPersonal of payload at once, with the JSON scanned once and the sealed
// form decoded once. It fails where OpenPersonal fails.
func OpenPersonalParts(ctx context.Context, keys Keys, payload json.RawMessage) (PersonalParts, error) {
	scan, err := ScanPersonal(payload)
	if err != nil {
		return PersonalParts{}, err
	}
	return scan.Open(ctx, keys)
}

// PersonalScan is a payload's personal member found and, when sealed, its sealed form decoded:
// OpenPersonalParts in two steps, so that a reader opening many payloads can look up the keys
// of all their subjects (SealedSubject) at once between them.
type PersonalScan struct {
	payload                   json.RawMessage
	before, start, end, after int
	found                     bool
	sealed                    *sealed
}

// ScanPersonal is the first step of OpenPersonalParts: it fails where OpenPersonal fails
// before it needs a key.
func ScanPersonal(payload json.RawMessage) (PersonalScan, error) {
	scan := PersonalScan{payload: payload}
	before, start, end, after, found, err := scanMember(payload, PersonalMember)
	if err != nil {
		// OpenPersonal looks no further than its cheap test; the others read such a payload as
		// holding nothing.
		if bytes.Contains(payload, []byte(`"sealed"`)) || bytes.Contains(payload, []byte(`"erased"`)) {
			return PersonalScan{}, fmt.Errorf("open personal data: %w", err)
		}
		return scan, nil
	}
	if !found {
		return scan, nil
	}
	scan.before, scan.start, scan.end, scan.after, scan.found = before, start, end, after, true
	if value := payload[start:end]; IsSealed(value) {
		if scan.sealed = unmarshalSealed(value); scan.sealed == nil {
			return PersonalScan{}, fmt.Errorf("%w: not a sealed form", ErrSealBroken)
		}
	}
	return scan, nil
}

// SealedSubject is the subject the personal member is sealed under, "" when it is not sealed.
func (s PersonalScan) SealedSubject() string {
	if s.sealed == nil {
		return ""
	}
	return s.sealed.Subject
}

// Inspect is what the scan tells without a key: InspectPersonal's Subject, Sealed and Plain,
// PersonalErased's Marker and, for a sealed or erased member, the cut Public makes. Opened and
// Erased stay unset: a reader that opens nothing (the live audit history) scans a payload once
// instead of once for each of those functions.
func (s PersonalScan) Inspect() PersonalParts {
	var parts PersonalParts
	if !s.found {
		return parts
	}
	switch value := s.payload[s.start:s.end]; {
	case string(value) == "null":
		return parts
	case IsErasedMarker(value):
		parts.Marker = true
	case s.sealed == nil:
		parts.Plain = true
		return parts
	default:
		parts.Sealed, parts.Subject = true, s.sealed.Subject
	}
	parts.payload, parts.before, parts.after = s.payload, s.before, s.after
	return parts
}

// Open is the second step of OpenPersonalParts: it opens a sealed member with keys.
func (s PersonalScan) Open(ctx context.Context, keys Keys) (PersonalParts, error) {
	parts := s.Inspect()
	parts.Opened = s.payload
	if parts.Marker {
		parts.Erased = true
		var err error
		if parts.Opened, err = withoutMember(s.payload, PersonalMember); err != nil {
			return PersonalParts{}, err
		}
		return parts, nil
	}
	if !parts.Sealed {
		return parts, nil
	}
	plain, erased, err := openSealed(ctx, keys, s.sealed)
	if err != nil {
		return PersonalParts{}, err
	}
	if erased {
		parts.Erased = true
		if parts.Opened, err = withoutMember(s.payload, PersonalMember); err != nil {
			return PersonalParts{}, err
		}
		return parts, nil
	}
	parts.Opened = splice(s.payload, s.start, s.end, plain)
	return parts, nil
}

// scanMember finds the first top-level member name of a JSON object: its value is
// payload[start:end], and payload[before:after] is what WithoutPersonal cuts out (the member
// with the comma that separates it from its neighbours). Every reader of a payload's members
// (findMember, WithoutPersonal, ScanPersonal) goes through it: a decoder of scanDecoders reads
// payload in place and member names are compared as they stand (unquoted only when escaped), so
// that a scan allocates next to nothing.
func scanMember(payload []byte, name string) (before, start, end, after int, found bool, err error) {
	dec := scanDecoders.Get().(*jsontext.Decoder)
	defer func() {
		dec.Reset(bytes.NewBuffer(nil)) // drop the payload
		scanDecoders.Put(dec)
	}()
	dec.Reset(bytes.NewBuffer(payload))
	tok, err := dec.ReadToken()
	if err != nil {
		return 0, 0, 0, 0, false, fmt.Errorf("payload: %w", err)
	}
	if tok.Kind() != '{' {
		return 0, 0, 0, 0, false, fmt.Errorf("payload is not a JSON object")
	}
	first := int(dec.InputOffset())
	for dec.PeekKind() != '}' {
		before := int(dec.InputOffset())
		quoted, err := dec.ReadValue() // the member's name
		if err != nil {
			return 0, 0, 0, 0, false, fmt.Errorf("payload: %w", err)
		}
		match := memberNamed(quoted, name)
		val, err := dec.ReadValue()
		if err != nil {
			return 0, 0, 0, 0, false, fmt.Errorf("payload member %s: %w", quoted, err)
		}
		if !match {
			continue
		}
		end := int(dec.InputOffset())
		after := end
		if before == first {
			// The first member: its comma follows it, unless it is the only one.
			rest := bytes.TrimLeft(payload[after:], " \t\r\n")
			if len(rest) > 0 && rest[0] == ',' {
				after = len(payload) - len(rest) + 1
			}
		}
		return before, end - len(val), end, after, true, nil
	}
	return 0, 0, 0, 0, false, nil
}

// scanDecoders are scanMember's decoders, reset for every payload.
var scanDecoders = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewBuffer(nil)) }}

// memberNamed reports whether a quoted member name, as the decoder read it, is name.
func memberNamed(quoted []byte, name string) bool {
	if len(quoted) < 2 {
		return false
	}
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1:len(quoted)-1]) == name
	}
	unquoted, err := jsontext.AppendUnquote(nil, quoted)
	return err == nil && string(unquoted) == name
}

// cutMember is payload without payload[before:after], in a new slice.
func cutMember(payload []byte, before, after int) json.RawMessage {
	out := make([]byte, 0, len(payload)-(after-before))
	out = append(out, payload[:before]...)
	return append(out, payload[after:]...)
}
