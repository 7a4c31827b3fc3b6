package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/samla/samla/domain/poa"
)

// TestClientsSigningCommand: `samla clients signing` records a client's template under versions
// 1, 2, … and its provider key sealed: the key is nowhere in the data dir in plain text; a
// template with an unknown or missing placeholder is refused with the known ones, and a client
// that does not exist is refused; --example-template prints a template that parses.
func TestClientsSigningCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	ctx := context.Background()
	if _, err := CreateClient(ctx, cfg, testLogger(t), "acme", "Acme AB"); err != nil {
		t.Fatal(err)
	}
	const providerKey = "provider-secret-4f1d2c3b5a6e7f80"
	files := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyFile, good := write("key", providerKey+"\n"), write("good.txt", poa.ExampleTemplate)
	for want := 1; want <= 2; want++ {
		version, err := ConfigureClientSigning(ctx, cfg, testLogger(t), "acme", keyFile, good, "Lund")
		if err != nil || version != want {
			t.Fatalf("configuration %d: version %d, %v", want, version, err)
		}
	}
	unknown := write("unknown.txt", poa.ExampleTemplate+"\n{{holder}}\n")
	if _, err := ConfigureClientSigning(ctx, cfg, testLogger(t), "acme", keyFile, unknown, ""); err == nil ||
		!strings.Contains(err.Error(), "{{holder}}") || !strings.Contains(err.Error(), "{{personalNumber}}") {
		t.Fatalf("an unknown placeholder: %v", err)
	}
	missing := write("missing.txt", strings.ReplaceAll(poa.ExampleTemplate, "{{date}}", "today"))
	if _, err := ConfigureClientSigning(ctx, cfg, testLogger(t), "acme", keyFile, missing, ""); err == nil || !strings.Contains(err.Error(), "{{date}}") {
		t.Fatalf("a missing placeholder: %v", err)
	}
	if _, err := ConfigureClientSigning(ctx, cfg, testLogger(t), "nobody", keyFile, good, ""); err == nil {
		t.Fatal("a client that does not exist was configured")
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(providerKey)) {
			t.Errorf("%s holds the provider key in plain text", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	cmd := signingCommand(&out, &bytes.Buffer{})
	cmd.SetArgs([]string{"--example-template"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if _, err := poa.Parse(out.String()); err != nil {
		t.Fatalf("the example template does not parse: %v", err)
	}
}
