package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/samla/samla/domain/company"
)

// An idle sandbox forgets a burst's expired sessions (and copies its maps anew) by itself: the
// janitor purges without a request coming in.
func TestJanitorForgetsExpiredSessionsWhileIdle(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	sb, err := Start(context.Background(), WithLatency(0, 0), WithClock(clock), WithSessionTTL(time.Minute),
		func(o *options) { o.janitorInterval = 10 * time.Millisecond })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })

	const logins = 50
	for i := range logins {
		body := fmt.Sprintf(`{"personalNumber":"199001010017","loginMethod":%q,"reference":"c-%d"}`,
			company.LoginEIDOtherDeviceMock, i)
		res, err := http.Post(sb.BaseURL("se-demo-insurer")+"/sessions", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("login %d: %d", i, res.StatusCode)
		}
	}
	sessions := func() int { sb.mu.Lock(); defer sb.mu.Unlock(); return len(sb.sessions) }
	if n := sessions(); n != logins {
		t.Fatalf("%d sessions after the logins, want %d", n, logins)
	}

	mu.Lock()
	now = now.Add(time.Minute + time.Second)
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for sessions() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still held 5 s after they expired, with no request coming in", sessions())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
