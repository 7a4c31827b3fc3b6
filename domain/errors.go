package domain

import "errors"

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
