package eidsim_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/connectors/sandbox/eidsim"
	"github.com/samla/samla/domain/eid"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func users(pn string) eidsim.User {
	switch pn {
	case "199001010090":
		return eidsim.User{PersonalNumber: pn, GivenName: "Ångra", Surname: "Ångrasson", Action: eidsim.CancelInApp}
	case "199001010108":
		return eidsim.User{PersonalNumber: pn, GivenName: "Väntar", Surname: "Väntarsson", Action: eidsim.Ignore}
	case "199001010082":
		return eidsim.User{PersonalNumber: "199001010017", GivenName: "Test", Surname: "Testsson"}
	}
	return eidsim.User{PersonalNumber: pn, GivenName: "Tolvan", Surname: "Tolvansson"}
}

func newSim() *eidsim.Simulator { return eidsim.New(30*time.Second, time.Hour, users) }

func collect(t *testing.T, s *eidsim.Simulator, ref string, at time.Time) eidsim.CollectResult {
	t.Helper()
	r, err := s.Collect(ref, at)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSignedByTheTesterThroughTheReference(t *testing.T) {
	s := newSim()
	o, err := s.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Reference: "col-1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if r := collect(t, s, o.OrderRef, t0.Add(10*time.Second)); r.Status != eid.StatusPending || r.HintCode != eid.HintOutstandingTransaction {
		t.Fatalf("%+v", r)
	}
	if err := s.AppStarted(o.OrderRef, t0.Add(11*time.Second)); err != nil {
		t.Fatal(err)
	}
	if r := collect(t, s, o.OrderRef, t0.Add(11*time.Second)); r.HintCode != eid.HintStarted {
		t.Fatalf("after the scan: %+v", r)
	}
	if _, err := s.SignByReference("col-2", t0.Add(12*time.Second)); !errors.Is(err, eidsim.ErrNoPendingOrder) {
		t.Fatalf("another reference: %v", err)
	}
	r, err := s.SignByReference("col-1", t0.Add(12*time.Second))
	if err != nil || r.Status != eid.StatusComplete {
		t.Fatalf("%+v %v", r, err)
	}
	r = collect(t, s, o.OrderRef, t0.Add(time.Minute)) // signed before the expiry: stays complete
	if r.Status != eid.StatusComplete || r.CompletionData == nil || r.CompletionData.User.PersonalNumber != "191212121212" ||
		r.CompletionData.User.Name != "Tolvan Tolvansson" || !r.At.Equal(t0.Add(12*time.Second)) {
		t.Fatalf("%+v", r)
	}
	if _, err := s.SignByReference("col-1", t0.Add(13*time.Second)); !errors.Is(err, eidsim.ErrNoPendingOrder) {
		t.Fatalf("signing twice: %v", err)
	}
}

func TestQRDataOfAnOrder(t *testing.T) {
	s := newSim()
	o, err := s.Auth(eidsim.AuthRequest{Reference: "col-1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, []byte(o.QRStartSecret))
	mac.Write([]byte("7"))
	want := "bankid." + o.QRStartToken + ".7." + hex.EncodeToString(mac.Sum(nil))
	if got := eid.QRData(o.QRStartToken, o.QRStartSecret, o.StartedAt, t0.Add(7500*time.Millisecond)); got != want {
		t.Fatalf("%s, want %s", got, want)
	}
	for _, tok := range []string{o.OrderRef, o.AutoStartToken, o.QRStartToken, o.QRStartSecret} {
		if len(tok) != 36 || strings.Count(tok, "-") != 4 {
			t.Errorf("token %q is not a UUID", tok)
		}
	}
}

func TestExpiry(t *testing.T) {
	s := newSim()
	o, _ := s.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Reference: "col-1"}, t0)
	if r := collect(t, s, o.OrderRef, t0.Add(30*time.Second-time.Nanosecond)); r.Status != eid.StatusPending {
		t.Fatalf("%+v", r)
	}
	r := collect(t, s, o.OrderRef, t0.Add(30*time.Second))
	if r.Status != eid.StatusFailed || r.HintCode != eid.HintExpiredTransaction || !r.At.Equal(o.ExpiresAt) {
		t.Fatalf("%+v", r)
	}
	if _, err := s.SignByReference("col-1", t0.Add(31*time.Second)); !errors.Is(err, eidsim.ErrNoPendingOrder) {
		t.Fatalf("an expired order cannot be signed: %v", err)
	}
}

func TestTheUserActsByThemselves(t *testing.T) {
	s := newSim()
	delay := time.Second
	signs, _ := s.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Reference: "a", ActAfter: delay, Mock: true}, t0)
	cancels, _ := s.Auth(eidsim.AuthRequest{PersonalNumber: "199001010090", Reference: "b", ActAfter: delay, Mock: true}, t0)
	never, _ := s.Auth(eidsim.AuthRequest{PersonalNumber: "199001010108", Reference: "c", ActAfter: delay, Mock: true}, t0)
	other, _ := s.Auth(eidsim.AuthRequest{PersonalNumber: "199001010082", Reference: "d", ActAfter: delay, Mock: true}, t0)

	if r := collect(t, s, signs.OrderRef, t0.Add(600*time.Millisecond)); r.Status != eid.StatusPending || r.HintCode != eid.HintUserSign {
		t.Fatalf("halfway: %+v", r)
	}
	if r := collect(t, s, signs.OrderRef, t0.Add(delay)); r.Status != eid.StatusComplete || !r.At.Equal(t0.Add(delay)) {
		t.Fatalf("%+v", r)
	}
	if r := collect(t, s, cancels.OrderRef, t0.Add(delay)); r.Status != eid.StatusFailed || r.HintCode != eid.HintUserCancel {
		t.Fatalf("%+v", r)
	}
	if r := collect(t, s, never.OrderRef, t0.Add(delay)); r.Status != eid.StatusPending {
		t.Fatalf("%+v", r)
	}
	if _, err := s.SignByReference("c", t0.Add(delay)); !errors.Is(err, eidsim.ErrUserWillNotSign) {
		t.Fatalf("%v", err)
	}
	if r := collect(t, s, never.OrderRef, t0.Add(time.Minute)); r.HintCode != eid.HintExpiredTransaction {
		t.Fatalf("%+v", r)
	}
	r := collect(t, s, other.OrderRef, t0.Add(delay))
	if r.Status != eid.StatusComplete || r.CompletionData.User.PersonalNumber != "199001010017" {
		t.Fatalf("the signer is someone else: %+v", r.CompletionData)
	}
}

func TestCancelByTheUserAndByTheRelyingParty(t *testing.T) {
	s := newSim()
	o, _ := s.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Reference: "col-1"}, t0)
	r, err := s.CancelByReference("col-1", t0.Add(time.Second))
	if err != nil || r.Status != eid.StatusFailed || r.HintCode != eid.HintUserCancel {
		t.Fatalf("%+v %v", r, err)
	}
	o2, _ := s.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Reference: "col-2"}, t0)
	if err := s.Cancel(o2.OrderRef, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if r := collect(t, s, o2.OrderRef, t0.Add(2*time.Second)); r.Status != eid.StatusFailed || r.HintCode != eid.HintCancelled {
		t.Fatalf("%+v", r)
	}
	if r := collect(t, s, o.OrderRef, t0.Add(2*time.Second)); r.HintCode != eid.HintUserCancel {
		t.Fatalf("%+v", r)
	}
	if err := s.Cancel("nope", t0); !errors.Is(err, eidsim.ErrNoSuchOrder) {
		t.Fatal(err)
	}
}

func TestConflict(t *testing.T) {
	t.Run("a second order for the same person aborts both", func(t *testing.T) {
		s := newSim()
		first, _ := s.Auth(eidsim.AuthRequest{PersonalNumber: "199001010116", Reference: "col-1"}, t0)
		if _, err := s.Auth(eidsim.AuthRequest{PersonalNumber: "199001010116", Reference: "col-2"}, t0.Add(time.Second)); !errors.Is(err, eidsim.ErrAlreadyInProgress) {
			t.Fatalf("%v", err)
		}
		if r := collect(t, s, first.OrderRef, t0.Add(2*time.Second)); r.Status != eid.StatusFailed || r.HintCode != eid.HintCancelled {
			t.Fatalf("%+v", r)
		}
		// Both gone: a third attempt goes through.
		if _, err := s.Auth(eidsim.AuthRequest{PersonalNumber: "199001010116", Reference: "col-3"}, t0.Add(3*time.Second)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("MOCK orders neither block nor are blocked", func(t *testing.T) {
		s := newSim()
		real, _ := s.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Reference: "elsewhere"}, t0)
		if _, err := s.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Reference: "col-1", Mock: true, ActAfter: time.Second}, t0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Reference: "col-2"}, t0); !errors.Is(err, eidsim.ErrAlreadyInProgress) {
			t.Fatalf("two real orders: %v", err)
		}
		if r := collect(t, s, real.OrderRef, t0); r.HintCode != eid.HintCancelled {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("MOCK orders run side by side", func(t *testing.T) {
		s := newSim()
		for _, ref := range []string{"a", "b", "c"} {
			if _, err := s.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Reference: ref, Mock: true, ActAfter: time.Second}, t0); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("the same reference starting over withdraws its own order", func(t *testing.T) {
		s := newSim()
		first, _ := s.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Reference: "col-1"}, t0)
		second, err := s.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Reference: "col-1"}, t0.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if r := collect(t, s, first.OrderRef, t0.Add(time.Second)); r.HintCode != eid.HintCancelled {
			t.Fatalf("%+v", r)
		}
		if r, err := s.SignByReference("col-1", t0.Add(2*time.Second)); err != nil || r.OrderRef != second.OrderRef {
			t.Fatalf("the newest order is signed: %+v %v", r, err)
		}
	})
	t.Run("orders without a personal number never conflict", func(t *testing.T) {
		s := newSim()
		for _, ref := range []string{"a", "b"} {
			if _, err := s.Auth(eidsim.AuthRequest{Reference: ref}, t0); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestHTTP(t *testing.T) {
	s := newSim()
	now := t0
	srv := httptest.NewServer(s.Handler("/sandbox/eid", func() time.Time { return now }))
	defer srv.Close()
	post := func(path string, body any, out any) int {
		t.Helper()
		b, _ := json.Marshal(body)
		res, err := http.Post(srv.URL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if out != nil {
			if err := json.NewDecoder(res.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
		return res.StatusCode
	}
	var order map[string]string
	if code := post("/sandbox/eid/rp/v6.0/auth", map[string]any{"endUserIp": "192.0.2.1",
		"requirement": map[string]string{"personalNumber": "191212121212"}, "reference": "consent-9"}, &order); code != 200 || order["qrStartSecret"] == "" {
		t.Fatalf("%d %v", code, order)
	}
	var res map[string]any
	if code := post("/sandbox/eid/rp/v6.0/collect", map[string]string{"orderRef": order["orderRef"]}, &res); code != 200 || res["status"] != "pending" || res["hintCode"] != "outstandingTransaction" {
		t.Fatalf("%d %v", code, res)
	}
	var e map[string]string
	if code := post("/sandbox/eid/rp/v6.0/auth", map[string]any{"endUserIp": "192.0.2.1",
		"requirement": map[string]string{"personalNumber": "191212121212"}}, &e); code != 400 || e["errorCode"] != "alreadyInProgress" {
		t.Fatalf("%d %v", code, e)
	}
	if code := post("/sandbox/eid/sign", map[string]string{"consentId": "consent-9"}, &e); code != 404 || e["code"] != "NO_PENDING_ORDER" {
		t.Fatalf("the conflict cancelled the order: %d %v", code, e)
	}
	post("/sandbox/eid/rp/v6.0/auth", map[string]any{"endUserIp": "192.0.2.1", "reference": "col-7"}, &order)
	now = now.Add(time.Second)
	if code := post("/sandbox/eid/sign", map[string]string{"collectionId": "col-7"}, &res); code != 200 || res["status"] != "complete" {
		t.Fatalf("%d %v", code, res)
	}
	if code := post("/sandbox/eid/rp/v6.0/collect", map[string]string{"orderRef": order["orderRef"]}, &res); code != 200 || res["status"] != "complete" || res["completionData"] == nil {
		t.Fatalf("%d %v", code, res)
	}
	post("/sandbox/eid/rp/v6.0/auth", map[string]any{"endUserIp": "192.0.2.1", "reference": "col-8"}, &order)
	if code := post("/sandbox/eid/cancel", map[string]string{"collectionId": "col-8"}, &res); code != 200 || res["hintCode"] != "userCancel" {
		t.Fatalf("%d %v", code, res)
	}
	if code := post("/sandbox/eid/rp/v6.0/cancel", map[string]string{"orderRef": "nope"}, &e); code != 400 {
		t.Fatalf("%d %v", code, e)
	}
	if code := post("/sandbox/eid/sign", map[string]string{}, &e); code != 400 {
		t.Fatalf("%d %v", code, e)
	}
}

// BenchmarkAuthBesideManyOrders starts MOCK orders for one persona beside thousands of its
// earlier ones, as a load run does: starting one looks at the persona's open orders only.
func BenchmarkAuthBesideManyOrders(b *testing.B) {
	sim := eidsim.New(30*time.Second, time.Minute, nil)
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	for i := 0; i < 5000; i++ {
		if _, err := sim.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Mock: true, ActAfter: time.Second}, now); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sim.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Mock: true, ActAfter: time.Second}, now.Add(2*time.Second)); err != nil {
			b.Fatal(err)
		}
	}
}

// A non-mock order still conflicts with the persona's pending one after thousands of mock
// orders, and finished orders leave no conflict.
func TestAuthConflictsAmongManyOrders(t *testing.T) {
	sim := eidsim.New(30*time.Second, time.Minute, nil)
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	for i := 0; i < 1000; i++ {
		if _, err := sim.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212", Mock: true, ActAfter: time.Second}, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sim.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212"}, now); err != nil {
		t.Fatalf("a first real order beside mock ones: %v", err)
	}
	if _, err := sim.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212"}, now.Add(time.Second)); !errors.Is(err, eidsim.ErrAlreadyInProgress) {
		t.Fatalf("a second real order while the first is pending: %v, want ErrAlreadyInProgress", err)
	}
	// Both were cancelled by the conflict; the next one starts.
	if _, err := sim.Auth(eidsim.AuthRequest{PersonalNumber: "191212121212"}, now.Add(2*time.Second)); err != nil {
		t.Fatalf("a real order after the conflict: %v", err)
	}
}
