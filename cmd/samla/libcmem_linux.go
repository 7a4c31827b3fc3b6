//go:build linux && (amd64 || arm64 || loong64 || ppc64le || s390x || riscv64 || 386 || arm)

package main

import (
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
// The names and types are those of libcVerifiedVersion; TestLibcAllocatorIsTheVerifiedOne fails
// on another version, to be read again before it is trusted.
const libcVerifiedVersion = "v1.79.0"

//go:linkname libcAllocator modernc.org/libc.allocator
var libcAllocator memory.Allocator

//go:linkname libcAllocatorMu modernc.org/libc.allocatorMu
var libcAllocatorMu sync.Mutex

// trimSQLiteAllocator returns to the operating system the empty regions libc's allocator keeps
// for reuse (pages holding live allocations stay). Only for an idle process: the next burst maps
// them again.
func trimSQLiteAllocator() error {
	libcAllocatorMu.Lock()
	defer libcAllocatorMu.Unlock()
	return libcAllocator.Trim()
}
