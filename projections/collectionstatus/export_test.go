package collectionstatus

// SetViewClock makes v tell time by now (Unix seconds), for the tests of Sweep.
func SetViewClock(v *View, now func() int64) { v.now = now }
