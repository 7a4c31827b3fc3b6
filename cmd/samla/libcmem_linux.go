//go:build linux && (amd64 || arm64 || loong64 || ppc64le || s390x || riscv64 || 386 || arm)

package main

import (
	"runtime/debug"
	"sync"
	_ "unsafe" // go:linkname

	"modernc.org/memory"
)

// SQLite allocates from modernc.org/libc's malloc, a modernc.org/memory Allocator. Regions it
// frees stay with the allocator for reuse, up to its high-water mark of live memory plus 4 MiB,
// and up to 4 MiB of each size class stay committed: three minutes after a 30 s POST load
// that was ~7 MiB of the process's resident memory, after sqlite3_release_memory had freed the
// page caches into it. memory.Allocator.Trim hands them back, but libc keeps its allocator
// unexported, so the two variables of the linux build (libc_musl.go) are named here.
//
// The names and types are those of libcVerifiedVersion; on another version the trim is skipped
// (libcIsVerified) and TestLibcAllocatorIsTheVerifiedOne fails, so that the new version is read
// before it is trusted.
const libcVerifiedVersion = "v1.79.0"

//go:linkname libcAllocator modernc.org/libc.allocator
var libcAllocator memory.Allocator

//go:linkname libcAllocatorMu modernc.org/libc.allocatorMu
var libcAllocatorMu sync.Mutex

// libcIsVerified tells whether the binary was built with libcVerifiedVersion of libc. A
// different one still links (the linker keeps one of two same-named zero-value variables), so
// the trim checks at run time too: on another version it is skipped, a missed saving instead of
// a race with malloc on a variable that may no longer be the allocator or its lock.
var libcIsVerified = sync.OnceValue(func() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, dep := range info.Deps {
		if dep.Path != "modernc.org/libc" {
			continue
		}
		if dep.Replace != nil {
			dep = dep.Replace
		}
		return dep.Version == libcVerifiedVersion
	}
	return false
})

// trimSQLiteAllocator returns to the operating system the empty regions libc's allocator keeps
// for reuse (pages holding live allocations stay). Only for an idle process: the next burst maps
// them again. It does nothing when the build's libc is not the verified one.
func trimSQLiteAllocator() error {
	if !libcIsVerified() {
		return nil
	}
	libcAllocatorMu.Lock()
	defer libcAllocatorMu.Unlock()
	return libcAllocator.Trim()
}
