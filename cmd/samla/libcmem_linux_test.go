//go:build linux && (amd64 || arm64 || loong64 || ppc64le || s390x || riscv64 || 386 || arm) && !libc.membrk

package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// The allocator named in libcmem_linux.go is libc's only at the version read: on another one the
// variables may have other names or types, and linkname would not tell: the trim is skipped
// there, and this test fails so that the new version is read.
func TestLibcAllocatorIsTheVerifiedOne(t *testing.T) {
	if !libcIsVerified() {
		version := "not in the build info"
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, dep := range info.Deps {
				if dep.Path == "modernc.org/libc" {
					version = dep.Version
				}
			}
		}
		t.Fatalf("modernc.org/libc is %s, libcmem_linux.go was checked against %s: read its libc_musl.go (allocator, allocatorMu) and update libcVerifiedVersion",
			version, libcVerifiedVersion)
	}
}

// Memory SQLite frees stays with libc's allocator until trimSQLiteAllocator hands it to the
// operating system: a connection with a big page cache that read a table and closed leaves its
// pages with the allocator (part of them committed), and the trim lowers the resident set.
func TestTrimSQLiteAllocatorReturnsFreedMemory(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "trim.db")+"?_pragma=cache_size(-65536)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40000)
		INSERT INTO t SELECT i, printf('%.500c', 'x') FROM n`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t WHERE length(v) = 500`).Scan(&n); err != nil || n != 40000 {
		t.Fatalf("count: %d, %v", n, err)
	}
	// Closing frees the connection's ~25 MB of cached pages into the allocator.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := vmRSS(t)
	if err := trimSQLiteAllocator(); err != nil {
		t.Fatal(err)
	}
	after := vmRSS(t)
	t.Logf("the trim took the resident set from %d to %d bytes", before, after)
	if before-after < 2<<20 {
		t.Fatalf("the trim took the resident set from %d to %d bytes, want at least 2 MiB less", before, after)
	}
	if err := trimSQLiteAllocator(); err != nil {
		t.Fatalf("a second trim, with nothing left to return: %v", err)
	}
}

// vmRSS is the process's resident set in bytes.
func vmRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
