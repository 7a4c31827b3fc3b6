package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFingerprintKeyIsGeneratedOnceAndReused(t *testing.T) {
	cfg := &Config{DataDir: t.TempDir()}
	first, err := fingerprintKey(cfg)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(cfg.DataDir, FingerprintKeyFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, info)
	}
	again, err := fingerprintKey(cfg)
	if err != nil || !bytes.Equal(first, again) || len(first) < 32 {
		t.Fatalf("a later start got another key (%v)", err)
	}
	other, err := fingerprintKey(&Config{DataDir: t.TempDir()})
	if err != nil || bytes.Equal(first, other) {
		t.Fatalf("two data dirs share a generated key (%v)", err)
	}
}

func TestFingerprintKeyFromAFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shared-key")
	secret := strings.Repeat("s", 40)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{DataDir: t.TempDir(), FingerprintKeyFile: path}
	key, err := fingerprintKey(cfg)
	if err != nil || string(key) != secret {
		t.Fatalf("key %q, %v", key, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, FingerprintKeyFile)); !os.IsNotExist(err) {
		t.Fatalf("a key was generated although one was given: %v", err)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fingerprintKey(cfg); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
	cfg.FingerprintKeyFile = filepath.Join(dir, "missing")
	if _, err := fingerprintKey(cfg); err == nil {
		t.Fatal("a missing key file was accepted")
	}
}
