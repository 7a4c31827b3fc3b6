package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestALostKeyStoreRefusesToStart: a data dir whose key store is gone while its event store holds
// sealed personal data does not start (nor rebuild its read models): it would fail every read of
// that data and seal the same people's new data under new keys. A data dir from before sealing,
// with plain events only and no key store yet, starts; so does one whose key store is there.
func TestALostKeyStoreRefusesToStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	plain := t.TempDir()
	if err := os.MkdirAll(filepath.Join(plain, "eventstore"), 0o700); err != nil {
		t.Fatal(err)
	}
	appendUnsealed(t, filepath.Join(plain, "eventstore", "events.db"))
	stop(t, start(t, testConfig(t, plain)))

	dir := t.TempDir()
	svc := start(t, testConfig(t, dir))
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	c.completed(collectionRequest{company: "se-demo-insurer", pn: "191212121212"})
	stop(t, svc)
	stop(t, start(t, testConfig(t, dir))) // its key store is there

	if err := os.RemoveAll(filepath.Join(dir, filepath.Dir(KeyStoreFile))); err != nil {
		t.Fatal(err)
	}
	svc, err := Start(ctx, testConfig(t, dir), AllRoles(), testLogger(t))
	if !errors.Is(err, ErrKeyStoreLost) {
		if svc != nil {
			stop(t, svc)
		}
		t.Fatalf("start without the key store: %v, want ErrKeyStoreLost", err)
	}
	if !strings.Contains(err.Error(), KeyStoreFile) {
		t.Errorf("the error names no key store file: %v", err)
	}
	if _, err := RebuildProjections(ctx, testConfig(t, dir), testLogger(t)); !errors.Is(err, ErrKeyStoreLost) {
		t.Fatalf("rebuild without the key store: %v, want ErrKeyStoreLost", err)
	}
}
