// Package config reads the SAMLA_* environment variables that serve as the defaults of a
// binary's flags, so that the same names work in a shell, in CI and in containers. A value that
// does not parse is remembered, not replaced by the default: Err reports every such value and
// the binary refuses to start with it, because a typo in a deadline or a limit would otherwise
// run silently with a setting nobody chose.
package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Env reads environment defaults. Its zero value is not usable; call NewEnv.
type Env struct {
	lookup func(string) (string, bool)
	errs   []error
}

// NewEnv reads the process environment.
func NewEnv() *Env { return &Env{lookup: os.LookupEnv} }

// NewEnvFrom reads from vars instead of the process environment (tests).
func NewEnvFrom(vars map[string]string) *Env {
	return &Env{lookup: func(name string) (string, bool) { v, ok := vars[name]; return v, ok }}
}

// Err lists every variable whose value did not parse, nil when all did.
func (e *Env) Err() error { return errors.Join(e.errs...) }

func (e *Env) bad(name, value, want string) {
	// The value is quoted in full: settings are not personal data, and the operator needs to see
	// what was given.
	e.errs = append(e.errs, fmt.Errorf("%s=%q: want %s", name, value, want))
}

// String is the variable's value, or def when it is not set.
func (e *Env) String(name, def string) string {
	if v, ok := e.lookup(name); ok {
		return v
	}
	return def
}

// Duration is the variable as a Go duration (90s, 2m), or def when it is not set.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	return parsed(e, name, def, time.ParseDuration, "a duration such as 500ms, 30s or 2m")
}

// Int is the variable as a decimal integer, or def when it is not set.
func (e *Env) Int(name string, def int) int {
	return parsed(e, name, def, strconv.Atoi, "an integer")
}

// Float is the variable as a decimal number, or def when it is not set.
func (e *Env) Float(name string, def float64) float64 {
	return parsed(e, name, def, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) }, "a number")
}

// parsed is the variable parsed by parse, def when it is not set, and def with the value
// remembered as malformed (want says what was expected) when it does not parse.
func parsed[T any](e *Env, name string, def T, parse func(string) (T, error), want string) T {
	v, ok := e.lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		// Set but empty is unset, as in a compose file's "${SAMLA_X:-}".
		return def
	}
	x, err := parse(strings.TrimSpace(v))
	if err != nil {
		e.bad(name, v, want)
		return def
	}
	return x
}

// Bool is the variable as a boolean (1/0, true/false, yes/no, on/off), or def when it is not set.
func (e *Env) Bool(name string, def bool) bool {
	v, ok := e.lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off":
		return false
	}
	e.bad(name, v, "true or false")
	return def
}
