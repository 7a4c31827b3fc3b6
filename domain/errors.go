package domain

import (
	"errors"
	"strings"
)

// Sentinel errors that the application layer maps to HTTP problems. Domain code wraps them with
// %w and context, so callers test with errors.Is.
var (
	// ErrInvalid marks input that breaks a validation rule (HTTP 400).
	ErrInvalid = errors.New("invalid")
	// ErrConflict marks a command that the aggregate's current state refuses (HTTP 409).
	ErrConflict = errors.New("state conflict")
	// ErrRefused marks well-formed input refused by a domain rule (HTTP 422).
	ErrRefused = errors.New("refused by rule")
)

// FieldError is input that breaks a rule: which field, and the rule broken, said so that a
// client can be shown it. It is ErrInvalid. Callers find it with errors.As (or FieldErrors),
// never by reading an error's text.
type FieldError struct {
	// Field names the input: a command's member ("loginMethod"), or a path into a list the
	// command carries ("inputs[0].value"), so that a handler can point at the request's part.
	Field string
	// Reason is the rule broken, e.g. "is required"; it never contains the input's value, which
	// may be personal data.
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }
func (e *FieldError) Unwrap() error { return ErrInvalid }

// InvalidFieldsError is input refused for several fields at once. It wraps each of its
// FieldErrors, so it is ErrInvalid and errors.As finds its first *FieldError too.
type InvalidFieldsError struct{ Fields []FieldError }

func (e *InvalidFieldsError) Error() string {
	parts := make([]string, len(e.Fields))
	for i := range e.Fields {
		parts[i] = e.Fields[i].Error()
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

func (e *InvalidFieldsError) Unwrap() []error {
	errs := make([]error, len(e.Fields))
	for i := range e.Fields {
		errs[i] = &e.Fields[i]
	}
	return errs
}

// FieldErrors lists the field errors err carries: every field of an *InvalidFieldsError, or the
// one *FieldError, however deeply wrapped; nil when it carries none.
func FieldErrors(err error) []FieldError {
	var many *InvalidFieldsError
	if errors.As(err, &many) {
		return many.Fields
	}
	var one *FieldError
	if errors.As(err, &one) {
		return []FieldError{*one}
	}
	return nil
}
