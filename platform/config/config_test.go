package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/platform/config"
)

func TestEnvReadsWellFormedValues(t *testing.T) {
	env := config.NewEnvFrom(map[string]string{
		"D": "90s", "I": " 42 ", "F": "12.5", "B": "off", "S": "x",
	})
	if got := env.Duration("D", time.Minute); got != 90*time.Second {
		t.Errorf("Duration = %v", got)
	}
	if got := env.Int("I", 1); got != 42 {
		t.Errorf("Int = %v", got)
	}
	if got := env.Float("F", 1); got != 12.5 {
		t.Errorf("Float = %v", got)
	}
	if got := env.Bool("B", true); got {
		t.Errorf("Bool = %v", got)
	}
	if got := env.String("S", "y"); got != "x" {
		t.Errorf("String = %v", got)
	}
	if got := env.Int("UNSET", 7); got != 7 {
		t.Errorf("unset Int = %v, want the default", got)
	}
	empty := config.NewEnvFrom(map[string]string{"D": "", "B": " "})
	if got := empty.Duration("D", time.Minute); got != time.Minute || empty.Bool("B", true) != true || empty.Err() != nil {
		t.Errorf("set but empty = %v, %v; want the defaults and no error", got, empty.Err())
	}
	if err := env.Err(); err != nil {
		t.Fatalf("Err = %v", err)
	}
}

// A malformed value must not silently become the default: Err names every one of them.
func TestEnvReportsEveryMalformedValue(t *testing.T) {
	env := config.NewEnvFrom(map[string]string{
		"SAMLA_INPUT_TIMEOUT": "2 minutes", "SAMLA_MAX_SESSIONS": "lots", "SAMLA_RATE_LIMIT": "fast", "SAMLA_SANDBOX": "maybe",
	})
	env.Duration("SAMLA_INPUT_TIMEOUT", time.Minute)
	env.Int("SAMLA_MAX_SESSIONS", 1)
	env.Float("SAMLA_RATE_LIMIT", 1)
	env.Bool("SAMLA_SANDBOX", true)
	err := env.Err()
	if err == nil {
		t.Fatal("Err = nil for four malformed values")
	}
	for _, want := range []string{`SAMLA_INPUT_TIMEOUT="2 minutes"`, `SAMLA_MAX_SESSIONS="lots"`, `SAMLA_RATE_LIMIT="fast"`, `SAMLA_SANDBOX="maybe"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Err = %q, want it to name %s", err, want)
		}
	}
}
