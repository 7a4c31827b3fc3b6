package main

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestDeadlinePassedWhileStoppedFiresOnRestart: a collection waits for the contact form when
// the service stops; the deadline passes while nothing runs; the restarted service ends the
// collection CONTACT_FORM at once, from the deadline recorded in its events, without signing in
// at the company again.
func TestDeadlinePassedWhileStoppedFiresOnRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := personaConfig(t, dir)
	// Long enough that the stop surely comes first, short enough for a test.
	cfg.ContactFormTimeout = 3 * time.Second
	svc := start(t, cfg)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	id := c.mustStart(collectionRequest{company: "se-demo-insurer", pn: "199001010066"})
	c.waitStatus(id, 10*time.Second, is("CONTACT_FORM_PENDING"))
	// The deadline is at most the timeout after the status was seen.
	due := time.Now().Add(cfg.ContactFormTimeout)
	stop(t, svc)

	time.Sleep(time.Until(due) + 500*time.Millisecond)
	restarted := time.Now()
	cfg = personaConfig(t, dir)
	cfg.ContactFormTimeout = 3 * time.Second
	svc = start(t, cfg)
	defer stop(t, svc)
	c.base = "http://" + svc.HTTPAddr()

	// The sweep at the connector's start finds the collection; nothing else is needed.
	final := c.waitStatus(id, 10*time.Second, finalStatus)
	if final.Status != "CONTACT_FORM" {
		t.Fatalf("after the restart: %+v", final)
	}
	if took := time.Since(restarted); took > 8*time.Second {
		t.Errorf("the passed deadline fired %s after the restart", took)
	}
	path := c.historyPath(id, "CONTACT_FORM")
	if want := []string{"LOGIN", "CONTACT_FORM_PENDING", "CONTACT_FORM"}; !reflect.DeepEqual(path, want) {
		t.Fatalf("status path %v, want %v (no new login for an expired collection)", path, want)
	}
	// It was the restarted service that ended it, after the deadline.
	h := c.history(id)
	lastChange := h.Events[len(h.Events)-1]
	var p struct {
		To        string    `json:"to"`
		ChangedAt time.Time `json:"changedAt"`
	}
	if err := json.Unmarshal(lastChange.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p.To != "CONTACT_FORM" || p.ChangedAt.Before(restarted.Add(-time.Second)) {
		t.Fatalf("last event %s at %s; the restart was at %s", p.To, p.ChangedAt, restarted)
	}
}
