package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/samla/samla/command/eventstore/sqlite"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/platform/keystore/sqlitekeys"
)

// killChildEnv names the data dir of a service that this test binary runs as a child process,
// so that the test can kill it with SIGKILL (a service in the test's own process cannot be).
const killChildEnv = "SAMLA_TEST_KILL_CHILD_DIR"

// TestKillNineUnderPostLoadLosesNoAcknowledgedCollection kills the embedded service with
// SIGKILL while 16 clients POST collections with Idempotency-Keys, twice, on one data dir. Every
// collection answered 201 must then be in the event store with its key in the key store (both
// group-committed: the 201 comes after both commits), and a retry of every request, answered or
// not, must return one collection per key: the acknowledged one when there was one.
func TestKillNineUnderPostLoadLosesNoAcknowledgedCollection(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		runKillChild(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("starts and kills the service twice")
	}
	dir := t.TempDir()
	acked := map[string]string{} // Idempotency-Key -> collection id answered with 201
	var sent []string            // every Idempotency-Key sent
	for round := range 2 {
		base, kill := startKillChild(t, dir)
		keys, got := postUntilKilled(t, base, fmt.Sprintf("r%d", round), time.Second, kill)
		sent = append(sent, keys...)
		for k, id := range got {
			acked[k] = id
		}
	}
	if len(acked) == 0 {
		t.Fatal("no POST was acknowledged before the kills: the test proved nothing")
	}

	// Straight from the files the killed service left: every acknowledged collection's event
	// and the key its personal data is sealed under.
	ctx := context.Background()
	store, err := sqlite.Open(filepath.Join(dir, "eventstore", "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := sqlitekeys.Open(filepath.Join(dir, "keystore", "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	for k, id := range acked {
		evs, err := store.ReadStream(ctx, "collection-"+id, 0, 1)
		if err != nil || len(evs) != 1 {
			t.Fatalf("acknowledged collection %s (key %s): %d events, %v", id, k, len(evs), err)
		}
		if _, err := keys.Get(ctx, domain.CollectionSubject(id)); err != nil {
			t.Fatalf("acknowledged collection %s: its key: %v", id, err)
		}
	}
	if err := keys.Close(); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	// The service starts on what the kills left, and retries are exactly-once.
	svc := start(t, testConfig(t, dir))
	defer stop(t, svc)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	for _, k := range sent {
		code, body, _ := c.do("POST", "/collections", killBody(), map[string]string{"Service-Version": "2026-04-01", "Idempotency-Key": k})
		if code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("retry of %s: %d %s", k, code, body)
		}
		var created struct{ CollectionID string }
		if err := json.Unmarshal(body, &created); err != nil || created.CollectionID == "" {
			t.Fatalf("retry of %s: %s", k, body)
		}
		if id, ok := acked[k]; ok && created.CollectionID != id {
			t.Fatalf("retry of %s answered %s, the acknowledged request %s", k, created.CollectionID, id)
		}
	}
	t.Logf("%d POSTs sent, %d acknowledged before the kills; all found and replayed", len(sent), len(acked))
}

func killBody() map[string]any {
	return map[string]any{
		"company": "se-demo-insurer", "loginMethod": "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",
		"parameters": []map[string]any{{"type": "SwedishPersonalNumberParameter", "personalNumber": "199001010017"}},
	}
}

// runKillChild is the child: it serves until it is killed.
func runKillChild(t *testing.T, dir string) {
	svc := start(t, testConfig(t, dir))
	fmt.Printf("SAMLA_HTTP http://%s\n", svc.HTTPAddr())
	<-svc.Done()
	t.Fatalf("service ended: %v", svc.Err())
}

// startKillChild runs this test binary as a service on dir and returns its URL and a func
// that SIGKILLs it and waits for it to be gone.
func startKillChild(t *testing.T, dir string) (string, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillNineUnderPostLoadLosesNoAcknowledgedCollection$", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill := func() {
		once.Do(func() {
			_ = cmd.Process.Kill() // SIGKILL: no shutdown, no deferred closes
			_ = cmd.Wait()
		})
	}
	t.Cleanup(kill)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "SAMLA_HTTP "); ok {
				lines <- url
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case url := <-lines:
		return url, kill
	case <-time.After(60 * time.Second):
		kill()
		t.Fatal("child service did not start in 60 s")
		return "", nil
	}
}

// postUntilKilled has 16 clients POST for about d, kills the service while they do, and
// returns every Idempotency-Key sent and the collection ids of those answered 201.
func postUntilKilled(t *testing.T, base, prefix string, d time.Duration, kill func()) ([]string, map[string]string) {
	t.Helper()
	body, _ := json.Marshal(killBody())
	var (
		mu    sync.Mutex
		sent  []string
		acked = map[string]string{}
		wg    sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl := &http.Client{Timeout: 10 * time.Second}
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("%s-w%d-%d", prefix, w, i)
				mu.Lock()
				sent = append(sent, key)
				mu.Unlock()
				req, _ := http.NewRequest(http.MethodPost, base+"/collections", bytes.NewReader(body))
				req.Header.Set("Authorization-token", testAPIKey)
				req.Header.Set("Service-Version", "2026-04-01")
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", key)
				resp, err := cl.Do(req)
				if err != nil {
					return // the kill: this request's outcome is unknown
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					continue
				}
				var created struct{ CollectionID string }
				if json.Unmarshal(b, &created) == nil && created.CollectionID != "" {
					mu.Lock()
					acked[key] = created.CollectionID
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(d)
	kill()
	cancel()
	wg.Wait()
	return sent, acked
}
