package main

import (
	"database/sql"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

// After a burst the free heap goes back to the operating system: a check with more than
// idleHeapLimit free leaves at most that much.
func TestReturnIdleMemoryReleasesTheFreeHeap(t *testing.T) {
	free := func() uint64 { return runtimeMetric(t, "/memory/classes/heap/free:bytes") }
	burst := make([][]byte, 0, 256)
	for range 256 {
		burst = append(burst, make([]byte, 256<<10)) // 64 MiB in pieces, as a load leaves it
	}
	runtime.KeepAlive(burst)
	burst = nil
	runtime.GC()
	if f := free(); f <= idleHeapLimit {
		t.Skipf("the runtime already returned the burst's heap (%d bytes free): nothing to test", f)
	}
	returnIdleMemory()
	if f := free(); f > idleHeapLimit {
		t.Fatalf("%d bytes of free heap kept after the check, want at most %d", f, idleHeapLimit)
	}
}

// An idle service's garbage is collected without waiting for the heap to double: a check that
// finds more than idleGarbageLimit of dead objects since the last collection collects them
// (fewer than idleHeapLimit here, so the free heap's rule is not what collects them).
func TestReturnIdleMemoryCollectsIdleGarbage(t *testing.T) {
	read := func() (objects, live uint64) {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64(), s[1].Value.Uint64()
	}
	runtime.GC()
	// No collection of its own while the garbage piles up, as with GOGC's goal far away.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var sink []byte
	for range 3 * idleGarbageLimit / 1024 {
		sink = make([]byte, 1024) // dead as soon as the next one is made
	}
	runtime.KeepAlive(sink)
	if objects, live := read(); objects <= live+idleGarbageLimit {
		t.Skipf("only %d bytes of objects beside %d live: the garbage did not pile up", objects, live)
	}
	returnIdleMemory()
	if objects, live := read(); objects > live+idleGarbageLimit {
		t.Fatalf("%d bytes of objects kept beside %d live after the check, want at most %d more", objects, live, idleGarbageLimit)
	}
}

// Once the load is over SQLite's page caches are freed: a connection that read a table keeps its
// pages until releaseSQLiteMemory, which frees them, and the connection reads on as before.
func TestReleaseSQLiteMemoryFreesIdleCaches(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "cache.db")+"?_pragma=cache_size(-2048)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
		INSERT INTO t SELECT i, printf('%.500c', 'x') FROM n`); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM t WHERE length(v) = 500`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	count() // the table's pages (about 1 MB) are now in the connection's cache
	if freed := releaseSQLiteMemory(); freed < 512<<10 {
		t.Fatalf("released %d bytes, want the cached table's (at least 512 KiB)", freed)
	}
	if freed := releaseSQLiteMemory(); freed != 0 {
		t.Fatalf("a second release freed %d bytes, want nothing left to free", freed)
	}
	if n := count(); n != 2000 {
		t.Fatalf("after the release the table reads %d rows, want 2000", n)
	}
}

// The memory role frees SQLite's caches once per idle spell: not while the process allocates
// (under load), once when it has become idle, and again only after it was busy in between.
func TestMemoryReturnerReleasesSQLiteOncePerIdleSpell(t *testing.T) {
	var m memoryReturner
	m.check() // the first check only learns where the allocations stand
	if m.sqliteReleased {
		t.Fatal("released on the first check, before it could know whether the process is idle")
	}
	m.check()
	if !m.sqliteReleased {
		t.Fatal("an idle check did not release SQLite's caches")
	}
	busy := make([][]byte, 0, 64)
	for range 64 {
		busy = append(busy, make([]byte, 1<<20)) // more than idleAllocLimit between two checks
	}
	runtime.KeepAlive(busy)
	forced := forcedCollections(t)
	m.check()
	if m.sqliteReleased {
		t.Fatal("a busy check left the idle spell's release standing; the next idle spell would not release")
	}
	if got := forcedCollections(t); got != forced {
		t.Fatalf("a busy check forced %d collections: pages returned under load are faulted in again at once", got-forced)
	}
}

// forcedCollections is how many collections the process forced so far (debug.FreeOSMemory, runtime.GC).
func forcedCollections(t *testing.T) uint64 {
	return runtimeMetric(t, "/gc/cycles/forced:gc-cycles")
}
