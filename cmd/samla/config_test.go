package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/platform/config"
)

// A malformed SAMLA_* value stops the start with a message that names it; before, it silently
// fell back to the default.
func TestMalformedSettingStopsTheStart(t *testing.T) {
	t.Setenv("SAMLA_INPUT_TIMEOUT", "two minutes")
	t.Setenv("SAMLA_DATA_DIR", t.TempDir())
	var out, errOut bytes.Buffer
	root := newRoot(&out, &errOut)
	root.SetArgs([]string{"run", "--http-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), `SAMLA_INPUT_TIMEOUT="two minutes"`) {
		t.Fatalf("run with a malformed SAMLA_INPUT_TIMEOUT: err = %v, want it named", err)
	}
	if strings.Contains(out.String(), "Samla is running") {
		t.Fatalf("the service started anyway: %s", out.String())
	}
}

func TestOutOfRangeSettingStopsTheStart(t *testing.T) {
	for _, tc := range []struct{ flag, value, want string }{
		{"--rate-limit", "0", "--rate-limit must be positive"},
		{"--min-sessions", "-1", "--min-sessions must not be negative"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			t.Setenv("SAMLA_DATA_DIR", t.TempDir())
			var out, errOut bytes.Buffer
			root := newRoot(&out, &errOut)
			root.SetArgs([]string{"run", tc.flag, tc.value})
			if err := root.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run %s %s: err = %v, want %q", tc.flag, tc.value, err, tc.want)
			}
		})
	}
}

// The connector's slots adapt by default only with the embedded sandbox; a floor set by the
// operator holds either way.
func TestConnectorMinSessions(t *testing.T) {
	for _, tc := range []struct {
		configured int
		embedded   bool
		want       int
	}{
		{0, true, worker.DefaultMinSessions},
		{0, false, 0},
		{8, true, 8},
		{8, false, 8},
	} {
		if got := connectorMinSessions(tc.configured, tc.embedded); got != tc.want {
			t.Errorf("connectorMinSessions(%d, embedded %v) = %d, want %d", tc.configured, tc.embedded, got, tc.want)
		}
	}
}

func TestMalformedListenerStopsTheStartBeforeAnythingOpens(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SAMLA_DATA_DIR", dir)
	var out, errOut bytes.Buffer
	root := newRoot(&out, &errOut)
	root.SetArgs([]string{"run", "--ops-addr", "localhost"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), `--ops-addr "localhost" must be host:port`) {
		t.Fatalf("run --ops-addr localhost: err = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the data dir was touched: %v", entries)
	}
}

// SAMLA_CONSENT_VALIDITY sets how long an authorized consent lasts: 180 days unless set, and
// never zero or negative (every consent would expire at its authorization).
func TestConsentValidity(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want time.Duration
		err  string
	}{
		{env: map[string]string{}, want: 180 * 24 * time.Hour},
		{env: map[string]string{"SAMLA_CONSENT_VALIDITY": "720h"}, want: 30 * 24 * time.Hour},
		{env: map[string]string{"SAMLA_CONSENT_VALIDITY": "0s"}, err: "--consent-validity must be positive"},
		{env: map[string]string{"SAMLA_CONSENT_VALIDITY": "180 days"}, err: `SAMLA_CONSENT_VALIDITY="180 days"`},
	} {
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		c := bindConfigFrom(fs, config.NewEnvFrom(tc.env))
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		err := c.validate()
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: err = %v, want %q", tc.env, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.err == "" && c.ConsentValidity != tc.want:
			t.Errorf("%v: validity %s, want %s", tc.env, c.ConsentValidity, tc.want)
		}
	}
}

// A companies URL the connector could not call, and a broker list that names no broker, stop the
// start; before, the first started a connector that failed every call, and the second ran the
// embedded broker instead of the cluster.
func TestMalformedCompaniesURLAndBrokers(t *testing.T) {
	checkValidation(t, []validationCase{
		{env: map[string]string{}},
		{env: map[string]string{"SAMLA_COMPANIES_URL": "http://127.0.0.1:8081"}},
		{env: map[string]string{"SAMLA_COMPANIES_URL": "https://sandbox.example/samla/"}},
		{env: map[string]string{"SAMLA_COMPANIES_URL": "HTTP://sandbox.example"}},
		{env: map[string]string{"SAMLA_COMPANIES_URL": ":::"}, err: `--companies-url ":::" is not a URL`},
		{env: map[string]string{"SAMLA_COMPANIES_URL": "sandbox.example:8081"}, err: "must be an http:// or https:// URL with a host"},
		{env: map[string]string{"SAMLA_COMPANIES_URL": "ftp://sandbox.example"}, err: "must be an http:// or https:// URL with a host"},
		{env: map[string]string{"SAMLA_COMPANIES_URL": "http:///samla"}, err: "must be an http:// or https:// URL with a host"},
		{env: map[string]string{"SAMLA_COMPANIES_URL": "http://:8081"}, err: "must be an http:// or https:// URL with a host"},
		{env: map[string]string{"SAMLA_COMPANIES_URL": "/sandbox"}, err: "must be an http:// or https:// URL with a host"},
		{env: map[string]string{"SAMLA_COMPANIES_URL": "http://sandbox.example/?x=1"}, err: "neither a query nor a fragment"},
		{env: map[string]string{"SAMLA_COMPANIES_URL": "http://sandbox.example/#top"}, err: "neither a query nor a fragment"},
		{env: map[string]string{"SAMLA_KAFKA_BROKERS": "kafka-1:9092, kafka-2:9092"}},
		{env: map[string]string{"SAMLA_KAFKA_BROKERS": ","}, err: `--kafka-brokers "," names no broker`},
		{env: map[string]string{"SAMLA_KAFKA_BROKERS": " , "}, err: "names no broker"},
		{env: map[string]string{"SAMLA_KAFKA_BROKERS": "  "}, err: "names no broker"},
		{env: map[string]string{"SAMLA_SIGNING_PROVIDER_URL": "https://signing.example/api"}},
		{env: map[string]string{"SAMLA_SIGNING_PROVIDER_URL": "signing.example"}, err: "--signing-provider-url"},
		{env: map[string]string{"SAMLA_PUBLIC_URL": "https://samla.example"}},
		{env: map[string]string{"SAMLA_PUBLIC_URL": "https://samla.example/?a=b"}, err: "--public-url"},
		{env: map[string]string{"SAMLA_SIGNING_TIMEOUT": "0s"}, err: "--signing-timeout must be positive"},
		{env: map[string]string{"SAMLA_SIGNING_POLL": "soon"}, err: "SAMLA_SIGNING_POLL"},
	})
}

// validationCase is an environment and what its validation must say: an error containing err,
// or none when err is "".
type validationCase struct {
	env map[string]string
	err string
}

// checkValidation binds each case's environment as `samla run` does and validates it.
func checkValidation(t *testing.T, cases []validationCase) {
	t.Helper()
	for _, tc := range cases {
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		c := bindConfigFrom(fs, config.NewEnvFrom(tc.env))
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		err := c.validate()
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: err = %v, want %q", tc.env, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		}
	}
}

// The audit's two cases, through `samla run`: neither starts, and nothing is opened.
func TestMalformedCompaniesURLOrBrokersStopTheStart(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"SAMLA_COMPANIES_URL", ":::", `--companies-url ":::"`},
		{"SAMLA_KAFKA_BROKERS", ",", `--kafka-brokers ","`},
	} {
		dir := t.TempDir()
		t.Setenv("SAMLA_DATA_DIR", dir)
		t.Setenv(tc.name, tc.value)
		var out, errOut bytes.Buffer
		root := newRoot(&out, &errOut)
		root.SetArgs([]string{"run", "--sandbox=false", "--http-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0"})
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("run with %s=%q: err = %v, want %s named", tc.name, tc.value, err, tc.want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 || strings.Contains(out.String(), "Samla is running") {
			t.Fatalf("%s=%q: the service started or touched the data dir: %v %s", tc.name, tc.value, entries, out.String())
		}
	}
}
