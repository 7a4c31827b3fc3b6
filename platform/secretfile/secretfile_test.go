package secretfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestCreateWritesAnOwnerOnlyFileOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	if err := Create(path, []byte("first\n")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != Mode {
		t.Fatalf("mode %04o, want %04o", fi.Mode().Perm(), Mode)
	}
	if err := Create(path, []byte("second\n")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second Create: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "first\n" {
		t.Fatalf("content %q after a refused Create, want the first", b)
	}
	if err := Replace(path, []byte("third\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "third\n" {
		t.Fatalf("content %q after Replace", b)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("%d entries in the directory, want the file alone (no temporary file left)", len(entries))
	}
}
