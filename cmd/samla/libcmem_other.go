//go:build !(linux && (amd64 || arm64 || loong64 || ppc64le || s390x || riscv64 || 386 || arm))

package main

// trimSQLiteAllocator does nothing here: libc's allocator on other platforms is another
// variable (libcmem_linux.go says why it is trimmed on linux).
func trimSQLiteAllocator() error { return nil }
