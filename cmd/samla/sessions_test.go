package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/samla/samla/platform/config"
	"github.com/samla/samla/platform/sessiontoken"
)

func TestSessionSettings(t *testing.T) {
	parse := func(vars map[string]string) (*Config, error) {
		vars["SAMLA_DATA_DIR"] = t.TempDir()
		cfg := bindConfigFrom(pflag.NewFlagSet("test", pflag.ContinueOnError), config.NewEnvFrom(vars))
		return cfg, cfg.validate()
	}
	cfg, err := parse(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SessionTTL != 15*time.Minute || cfg.JWTIssuer != DefaultJWTIssuer || cfg.JWTKeyFile != "" {
		t.Errorf("defaults: ttl %s, issuer %q, key file %q", cfg.SessionTTL, cfg.JWTIssuer, cfg.JWTKeyFile)
	}
	cfg, err = parse(map[string]string{"SAMLA_SESSION_TTL": "5m", "SAMLA_JWT_ISSUER": "https://api.example", "SAMLA_JWT_KEY_FILE": "/run/keys.pem"})
	if err != nil || cfg.SessionTTL != 5*time.Minute || cfg.JWTIssuer != "https://api.example" || cfg.JWTKeyFile != "/run/keys.pem" {
		t.Errorf("set: %+v, %v", cfg, err)
	}
	for _, bad := range []map[string]string{
		{"SAMLA_SESSION_TTL": "fifteen minutes"},
		{"SAMLA_SESSION_TTL": "0s"},
		{"SAMLA_SESSION_TTL": "-1m"},
		{"SAMLA_SESSION_TTL": "25h"},
		{"SAMLA_JWT_ISSUER": " "},
	} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%v: the start would go on", bad)
		}
	}
}

func TestSessionKeyCommands(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		root := newRoot(&out, &errOut)
		// The flags go first and "--" before a key id: a thumbprint may start with '-' (one
		// in 64), which a flag parser reads as a flag otherwise.
		if i := slices.Index(args, "--"); i >= 0 {
			args = slices.Concat(args[:i], []string{"--data-dir", dir}, args[i:])
		} else {
			args = append(args, "--data-dir", dir)
		}
		root.SetArgs(args)
		err := root.Execute()
		return out.String(), err
	}
	// The first start generates the key file; here the first rotation does.
	if _, err := run("sessions", "rotate-key"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, SessionKeyFile)
	first, err := sessiontoken.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run("sessions", "rotate-key", "--stage"); err != nil {
		t.Fatal(err)
	}
	staged, err := sessiontoken.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ids := staged.KeyIDs()
	if len(ids) != 2 || ids[0] != first.SigningKeyID() {
		t.Fatalf("after --stage: %v, want the first key still signing", ids)
	}
	// A thumbprint that starts with '-' reaches the command after "--".
	if _, err := run("sessions", "promote-key", "--", "-no-such-key"); !errors.Is(err, sessiontoken.ErrNoSuchKey) {
		t.Fatalf("promote-key -- -…: %v, want the key looked up (no such key)", err)
	}
	if _, err := run("sessions", "promote-key", "--", ids[1]); err != nil {
		t.Fatal(err)
	}
	out, err := run("sessions", "list-keys")
	if err != nil {
		t.Fatal(err)
	}
	if want := ids[1] + "\tsigns\n" + ids[0] + "\tverifies\n"; out != want {
		t.Errorf("list-keys = %q, want %q", out, want)
	}
	if _, err := run("sessions", "retire-key", "--", ids[1]); !errors.Is(err, sessiontoken.ErrRetireSigningKey) {
		t.Errorf("retiring the signing key: %v", err)
	}
	if _, err := run("sessions", "retire-key", "--", ids[0]); err != nil {
		t.Fatal(err)
	}
	if keys, _ := sessiontoken.LoadKeyFile(path); !slices.Equal(keys.KeyIDs(), ids[1:]) {
		t.Errorf("after retiring: %v", keys.KeyIDs())
	}
	// A key file the operator names must exist: a start does not generate one there.
	if _, err := run("sessions", "list-keys", "--jwt-key-file", filepath.Join(dir, "missing.pem")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("list-keys of a missing file: %v", err)
	}
}

// A key file the operator names must be there and hold keys: the API does not start on a guess
// (a key generated in its place would refuse every token the other replicas sign).
func TestStartNeedsTheNamedSessionKeyFile(t *testing.T) {
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.pem")
	if err := os.WriteFile(corrupt, []byte("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]error{filepath.Join(dir, "missing.pem"): fs.ErrNotExist, corrupt: sessiontoken.ErrKeyFile} {
		cfg := testConfig(t, filepath.Join(dir, "data"))
		cfg.JWTKeyFile = file
		svc, err := Start(t.Context(), cfg, Roles{Query: true}, testLogger(t))
		if err == nil {
			stop(t, svc)
		}
		if !errors.Is(err, want) {
			t.Errorf("start with --jwt-key-file %s: %v, want %v", filepath.Base(file), err, want)
		}
	}
}
