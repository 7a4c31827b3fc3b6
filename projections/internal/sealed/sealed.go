// Package sealed is personal data as a read model stores it: sealed under its data subject's
// key (eventschema.Seal), never in plain text. A Value is made only by sealing, or from stored
// bytes that are in the sealed form, so a store adapter whose rows carry Values cannot be handed
// plain personal data to store, whoever calls it.
package sealed

import (
	"context"
	"errors"
	"fmt"

	"github.com/samla/samla/eventschema"
)

// Value is personal data sealed under its subject's key; the zero Value is none (nothing was
// kept, or the subject was erased before anything could be).
type Value struct {
	stored []byte
}

// ErrNotSealed is stored bytes that are not in the sealed form: plain personal data, which no
// read model may hold.
var ErrNotSealed = errors.New("personal data not sealed")

// Seal seals plain under subject's key, creating the key on first use. An erased subject gets
// the zero Value: nothing is kept for it, and never under a new key.
func Seal(ctx context.Context, keys eventschema.Keys, subject string, plain []byte) (Value, error) {
	b, err := eventschema.Seal(ctx, keys, subject, plain)
	if errors.Is(err, eventschema.ErrSubjectErased) {
		return Value{}, nil
	}
	if err != nil {
		return Value{}, err
	}
	return Value{stored: b}, nil
}

// FromStored is the Value a store read back: empty is none; anything but the sealed form is
// ErrNotSealed.
func FromStored(b []byte) (Value, error) {
	if len(b) == 0 {
		return Value{}, nil
	}
	if !eventschema.IsSealed(b) {
		return Value{}, fmt.Errorf("%w: a stored value of %d bytes", ErrNotSealed, len(b))
	}
	return Value{stored: append([]byte(nil), b...)}, nil
}

// IsZero reports whether v holds nothing.
func (v Value) IsZero() bool { return len(v.stored) == 0 }

// Bytes is what a store keeps of v: the sealed form, empty for none.
func (v Value) Bytes() []byte { return v.stored }

// String is what a String column keeps of v.
func (v Value) String() string { return string(v.stored) }

// Subject is the data subject v is sealed under, "" for none.
func (v Value) Subject() string { return eventschema.SealedSubject(v.stored) }

// Open returns the plain data. The zero Value and an erased subject give nil and erased=true
// for the latter; a key the key store does not have is an error (eventschema.Open), never an
// absence.
func (v Value) Open(ctx context.Context, keys eventschema.Keys) (plain []byte, erased bool, err error) {
	if v.IsZero() {
		return nil, false, nil
	}
	return eventschema.Open(ctx, keys, v.stored)
}
