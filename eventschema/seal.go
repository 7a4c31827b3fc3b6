package eventschema

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Crypto-shredding: every event keeps its personal data in its top-level "personal" member, and
// the repository seals that member before the event is appended:
//
//	"personal":{"sealed":{"v":1,"subject":"<subject>","keyId":"<id>","nonce":"<b64>","ciphertext":"<b64>"}}
//
// AES-256-GCM under the subject's key (Keys), a random 96-bit nonce, and the version, subject,
// key id and compression bound as additional data, so a sealed member moved to another subject
// or edited in any way does not open. Read models seal their personal columns the same way
// (Seal, Open), so destroying the subject's key erases its personal data everywhere at once.
//
// Readers open before they decode, validate or upcast: the JSON Schemas describe the plain
// payload. Events and rows written before sealing existed hold their personal data in plain
// text; they are read as they are.

// PersonalMember is the payload member that holds an event's personal data.
const PersonalMember = "personal"

// sealVersion is the version of the sealed form.
const sealVersion = 1

// compressAbove is the plaintext size from which sealing compresses first (a document's
// content): base64 inside the plaintext, encrypted and base64-encoded again, would make a
// 10 MiB PDF a 17.8 MiB event, past the Kafka log's message bound; Huffman coding brings
// the base64 back to about its bytes' size. Small members are not compressed.
const compressAbove = 16 << 10

// compressionDeflate marks a plaintext compressed with DEFLATE before sealing.
const compressionDeflate = "deflate"

// sealed is the sealed form.
type sealed struct {
	V           int    `json:"v"`
	Subject     string `json:"subject"`
	KeyID       string `json:"keyId"`
	Compression string `json:"compression,omitempty"`
	Nonce       []byte `json:"nonce"`
	Ciphertext  []byte `json:"ciphertext"`
}

type sealedEnvelope struct {
	Sealed *sealed `json:"sealed"`
}

var (
	// ErrSealBroken is sealed data that does not open under its subject's key: tampered with,
	// moved to another subject, sealed with another key of the subject, or not a sealed form.
	ErrSealBroken = errors.New("sealed personal data does not open")
	// ErrSealed is a payload still sealed where plain data is needed: a reader must open
	// (OpenPersonal) before it decodes.
	ErrSealed = errors.New("personal data still sealed")
)

// sealedPrefix starts every sealed form (json.Marshal of sealedEnvelope).
var sealedPrefix = []byte(`{"sealed":{`)

// erasedMarker is the personal member of an event appended after its data subject was erased
// (SealPersonal): the event had personal data, which is recorded nowhere, and says so, so that
// the audit history marks it erased rather than showing an event that never had any. No event
// names a personal field "erased", as none names one "sealed".
var erasedMarker = []byte(`{"erased":true}`)

// IsErasedMarker reports whether a stored personal member is the erased marker.
func IsErasedMarker(stored []byte) bool {
	return bytes.Equal(bytes.TrimSpace(stored), erasedMarker)
}

// IsSealed reports whether a stored value is in the sealed form. Plain values (personal data
// written before sealing) never are: no event or read model names a personal field "sealed".
func IsSealed(stored []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(stored, " \t\r\n"), sealedPrefix)
}

// Seal seals plain under subject's key, creating the key on first use. An erased subject is
// an error that wraps ErrSubjectErased: nothing may be stored for it.
func Seal(ctx context.Context, keys Keys, subject string, plain []byte) ([]byte, error) {
	if subject == "" {
		return nil, errors.New("seal personal data: no data subject")
	}
	key, err := keys.GetOrCreate(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("seal personal data of %s: %w", subject, err)
	}
	s := sealed{V: sealVersion, Subject: subject, KeyID: key.ID()}
	if len(plain) > compressAbove {
		if small, ok := deflate(plain); ok {
			plain, s.Compression = small, compressionDeflate
		}
	}
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	s.Nonce = make([]byte, gcm.NonceSize())
	if _, err := rand.Read(s.Nonce); err != nil {
		return nil, fmt.Errorf("seal personal data: nonce: %w", err)
	}
	s.Ciphertext = gcm.Seal(nil, s.Nonce, plain, s.additionalData())
	out, err := json.Marshal(sealedEnvelope{Sealed: &s})
	if err != nil {
		return nil, fmt.Errorf("seal personal data: %w", err)
	}
	return out, nil
}

// Open opens a stored value: a sealed one is decrypted, a plain one (written before sealing)
// is returned as it is. An erased subject gives nil and erased=true. A subject whose key the
// store does not know fails with ErrKeyNotFound, a seal that does not open with
// ErrSealBroken: neither ever reads as plain text, garbage or erased.
func Open(ctx context.Context, keys Keys, stored []byte) (plain []byte, erased bool, err error) {
	if !IsSealed(stored) {
		return stored, false, nil
	}
	s := unmarshalSealed(stored)
	if s == nil {
		return nil, false, fmt.Errorf("%w: not a sealed form", ErrSealBroken)
	}
	return openSealed(ctx, keys, s)
}

// openSealed is Open of a decoded sealed form.
func openSealed(ctx context.Context, keys Keys, s *sealed) (plain []byte, erased bool, err error) {
	if s.V != sealVersion {
		return nil, false, fmt.Errorf("%w: sealed form version %d", ErrSealBroken, s.V)
	}
	key, err := keys.Get(ctx, s.Subject)
	if errors.Is(err, ErrSubjectErased) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("open personal data of %s: %w", s.Subject, err)
	}
	if key.ID() != s.KeyID {
		return nil, false, fmt.Errorf("%w: sealed with key %s, the key store has %s for %s", ErrSealBroken, s.KeyID, key.ID(), s.Subject)
	}
	gcm, err := newGCM(key)
	if err != nil {
		return nil, false, err
	}
	if len(s.Nonce) != gcm.NonceSize() {
		return nil, false, fmt.Errorf("%w: nonce of %d bytes", ErrSealBroken, len(s.Nonce))
	}
	plain, err = gcm.Open(nil, s.Nonce, s.Ciphertext, s.additionalData())
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %v", ErrSealBroken, s.Subject, err)
	}
	switch s.Compression {
	case "":
	case compressionDeflate:
		if plain, err = inflate(plain); err != nil {
			return nil, false, fmt.Errorf("%w: %s: %v", ErrSealBroken, s.Subject, err)
		}
	default:
		return nil, false, fmt.Errorf("%w: compression %q", ErrSealBroken, s.Compression)
	}
	return plain, false, nil
}

// SealedSubject is the subject a stored value is sealed under, "" when it is not sealed.
func SealedSubject(stored []byte) string {
	if !IsSealed(stored) {
		return ""
	}
	s := unmarshalSealed(stored)
	if s == nil {
		return ""
	}
	return s.Subject
}

// unmarshalSealed is the sealed form json.Unmarshal decodes from stored, nil when it fails or
// finds none. It decodes with go-json-experiment's engine in encoding/json's semantics first
// (4x faster: every event a rebuild or a projector opens is one), and with encoding/json itself
// when that fails, so that what decodes, and to what, is encoding/json's say
// (FuzzUnmarshalSealed).
func unmarshalSealed(stored []byte) *sealed {
	var env sealedEnvelope
	if jsonv1.Unmarshal(stored, &env) == nil {
		return env.Sealed
	}
	env = sealedEnvelope{}
	if json.Unmarshal(stored, &env) != nil {
		return nil
	}
	return env.Sealed
}

// additionalData binds everything that says how to open the ciphertext to it.
func (s *sealed) additionalData() []byte {
	// fmt.Sprintf("samla.personal.v%d\x00%s\x00%s\x00%s", ...), without fmt: it is built for
	// every open.
	ad := make([]byte, 0, len("samla.personal.v")+4+len(s.Subject)+len(s.KeyID)+len(s.Compression))
	ad = strconv.AppendInt(append(ad, "samla.personal.v"...), int64(s.V), 10)
	ad = append(append(ad, 0), s.Subject...)
	ad = append(append(ad, 0), s.KeyID...)
	return append(append(ad, 0), s.Compression...)
}

func newGCM(key Key) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key.material[:])
	if err != nil {
		return nil, fmt.Errorf("personal data key %s: %w", key.ID(), err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("personal data key %s: %w", key.ID(), err)
	}
	return gcm, nil
}

// deflate compresses with Huffman coding only: fast, and what base64 text gains most from.
func deflate(plain []byte) ([]byte, bool) {
	var buf bytes.Buffer
	buf.Grow(len(plain) * 4 / 5)
	w, err := flate.NewWriter(&buf, flate.HuffmanOnly)
	if err != nil {
		return nil, false
	}
	if _, err := w.Write(plain); err != nil {
		return nil, false
	}
	if err := w.Close(); err != nil {
		return nil, false
	}
	if buf.Len() >= len(plain) {
		return nil, false
	}
	return buf.Bytes(), true
}

// maxInflated bounds what a sealed value may inflate to: far above any event or row.
const maxInflated = 64 << 20

func inflate(compressed []byte) ([]byte, error) {
	r := flate.NewReader(bytes.NewReader(compressed))
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, maxInflated+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxInflated {
		return nil, errors.New("inflates past its bound")
	}
	return out, nil
}

// SealPersonal seals payload's "personal" member under subject's key. A payload without one
// (or with null) is returned as it is. For an erased subject the personal member is replaced
// by the erased marker, {"erased":true}, and erased is true: what the event says publicly is
// still recorded, its personal data never is, and never under a new key; the marker tells
// every reader (OpenPersonal, the audit history) that it was erased.
func SealPersonal(ctx context.Context, keys Keys, subject string, payload json.RawMessage) (out json.RawMessage, erased bool, err error) {
	start, end, found, err := findMember(payload, PersonalMember)
	if err != nil {
		return nil, false, fmt.Errorf("seal personal data: %w", err)
	}
	if !found || string(payload[start:end]) == "null" {
		return payload, false, nil
	}
	if IsSealed(payload[start:end]) || IsErasedMarker(payload[start:end]) {
		return payload, false, nil // sealed already
	}
	s, err := Seal(ctx, keys, subject, payload[start:end])
	if errors.Is(err, ErrSubjectErased) {
		return splice(payload, start, end, erasedMarker), true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return splice(payload, start, end, s), false, nil
}

// OpenPersonal replaces payload's sealed "personal" member with the plain one. A payload whose
// personal member is not sealed (written before sealing) or that has none is returned as it
// is. For an erased subject, and for an event appended after its subject was erased (the
// erased marker), the payload is returned without its personal member and erased=true. A lost
// key or a broken seal is an error (Open).
func OpenPersonal(ctx context.Context, keys Keys, payload json.RawMessage) (out json.RawMessage, erased bool, err error) {
	if !bytes.Contains(payload, []byte(`"sealed"`)) && !bytes.Contains(payload, []byte(`"erased"`)) {
		return payload, false, nil // the cheap test first: most payloads are plain or have no personal data
	}
	parts, err := OpenPersonalParts(ctx, keys, payload)
	if err != nil {
		return nil, false, err
	}
	return parts.Opened, parts.Erased, nil
}

// PersonalSealed reports whether payload's personal member is sealed.
func PersonalSealed(payload json.RawMessage) bool {
	if !bytes.Contains(payload, []byte(`"sealed"`)) {
		return false
	}
	start, end, found, err := findMember(payload, PersonalMember)
	return err == nil && found && IsSealed(payload[start:end])
}

// PersonalErased reports whether payload's personal member is the erased marker: the event
// was appended after its data subject was erased, without its personal data.
func PersonalErased(payload json.RawMessage) bool {
	if !bytes.Contains(payload, []byte(`"erased"`)) {
		return false
	}
	start, end, found, err := findMember(payload, PersonalMember)
	return err == nil && found && IsErasedMarker(payload[start:end])
}

// InspectPersonal tells what payload's personal member holds without opening it: sealed under
// subject, or plain text (plain: written before sealing). Neither: no personal member, null, or
// the erased marker (PersonalErased tells that one). The sealed form names its subject, so a
// reader that only records whose data an event held (the audit history) needs no key.
func InspectPersonal(payload json.RawMessage) (subject string, sealed, plain bool) {
	start, end, found, err := findMember(payload, PersonalMember)
	if err != nil || !found || string(payload[start:end]) == "null" || IsErasedMarker(payload[start:end]) {
		return "", false, false
	}
	if !IsSealed(payload[start:end]) {
		return "", false, true
	}
	return SealedSubject(payload[start:end]), true, false
}

// PlainPersonal reports whether payload has a personal member in plain text (an event written
// before sealing, or one that must not be stored so). The erased marker is not plain text.
func PlainPersonal(payload json.RawMessage) bool {
	start, end, found, err := findMember(payload, PersonalMember)
	return err == nil && found && string(payload[start:end]) != "null" && !IsSealed(payload[start:end]) &&
		!IsErasedMarker(payload[start:end])
}

// WithoutPersonal returns payload without its personal member, whatever that holds, for a reader
// that needs only what the event says publicly (the audit history's summaries). A payload
// without one is returned as it is. The other members keep their bytes and order, and the
// member is cut out rather than the payload decoded: it may hold a sealed document of
// megabytes.
func WithoutPersonal(payload json.RawMessage) (json.RawMessage, error) {
	before, _, _, after, found, err := scanMember(payload, PersonalMember)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return payload, nil
	}
	return cutMember(payload, before, after), nil
}

// findMember finds the value of a top-level member of a JSON object: payload[start:end].
func findMember(payload []byte, name string) (start, end int, found bool, err error) {
	_, start, end, _, found, err = scanMember(payload, name)
	return start, end, found, err
}

func splice(payload []byte, start, end int, value []byte) json.RawMessage {
	out := make([]byte, 0, len(payload)-(end-start)+len(value))
	out = append(out, payload[:start]...)
	out = append(out, value...)
	return append(out, payload[end:]...)
}

// withoutMember returns payload without its top-level member name, the others as they were.
func withoutMember(payload []byte, name string) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	delete(fields, name)
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	return out, nil
}
