package shrink

import "testing"

func TestMapKeepsEveryEntry(t *testing.T) {
	m := map[string]int{}
	for i := range 1000 {
		m[string(rune('a'+i%26))+string(rune(i))] = i
	}
	for k, v := range m {
		if v%10 != 0 {
			delete(m, k)
		}
	}
	got := Map(m)
	if len(got) != len(m) {
		t.Fatalf("len %d, want %d", len(got), len(m))
	}
	for k, v := range m {
		if got[k] != v {
			t.Fatalf("%q: %d, want %d", k, got[k], v)
		}
	}
}

func TestPeakDueAtAQuarter(t *testing.T) {
	var p Peak
	if p.Due(0) {
		t.Fatal("an empty store that never held anything is not due")
	}
	if p.Due(100) {
		t.Fatal("a store at its peak is not due")
	}
	if p.Due(26) {
		t.Fatal("a store above a quarter of its peak is not due")
	}
	if !p.Due(25) {
		t.Fatal("a store at a quarter of its peak is due")
	}
	p.Reset(25)
	if p.Due(25) {
		t.Fatal("after Reset the peak is the size it was reset to")
	}
	p.Saw(30)
	if !p.Due(0) {
		t.Fatal("an emptied store is due")
	}
}

func TestPeakBelowItsFloorIsNeverDue(t *testing.T) {
	p := Peak{Floor: 1024}
	p.Saw(1000)
	if p.Due(0) {
		t.Fatal("a store that peaked below its floor is due")
	}
	p.Saw(1024)
	if !p.Due(256) || p.Max() != 1024 {
		t.Fatalf("a store that reached its floor is not due at a quarter (peak %d)", p.Max())
	}
}
