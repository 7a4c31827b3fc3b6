package eventschema_test

import (
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/eventschema"
)

// TestStartedConsent: collection.started v4 records the consent a collection reads its PSD2
// products under in its public part, so it is still there after the user's erasure; v3 events,
// from before consents, decode without one.
func TestStartedConsent(t *testing.T) {
	r := registry(t)
	raw, err := os.ReadFile("testdata/examples/collection.started.v4.consent.json")
	if err != nil {
		t.Fatal(err)
	}
	want := &collection.UsedConsent{ConsentID: "2b7e9d41-5c3a-4f08-b6e2-8d1a0c9f7e35", BankConsentID: "bank-consent-5e1f",
		Scope: []consent.Scope{consent.ScopeCheckingAccounts, consent.ScopeCreditCards}}
	for name, payload := range map[string][]byte{"plain": raw, "sealed then erased": sealedThenErased(t, raw)} {
		e, err := r.Decode(eventschema.Envelope{EventID: "e", Type: collection.EventStarted, SchemaVersion: 4, Stream: "s", Payload: payload})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := e.(collection.Started).Consent; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: consent %+v, want %+v", name, got, want)
		}
	}

	v3, err := os.ReadFile("testdata/examples/collection.started.v3.json")
	if err != nil {
		t.Fatal(err)
	}
	e, err := r.Decode(eventschema.Envelope{EventID: "e", Type: collection.EventStarted, SchemaVersion: 3, Stream: "s", Payload: v3})
	if err != nil {
		t.Fatal(err)
	}
	if e.(collection.Started).Consent != nil {
		t.Fatalf("a v3 start decodes with a consent: %+v", e.(collection.Started).Consent)
	}
	if _, err := r.Upcast(collection.EventStarted, 3, []byte(`[]`)); err == nil {
		t.Fatal("a v3 payload that is not an object was upcast")
	}

	// A consent the schema does not describe is never written.
	for _, bad := range []*collection.UsedConsent{
		{ConsentID: "k", BankConsentID: "b"},
		{ConsentID: "k", Scope: []consent.Scope{consent.ScopeCreditCards}},
		{ConsentID: "k", BankConsentID: "b", Scope: []consent.Scope{"EVERYTHING"}},
	} {
		_, _, _, err := r.Encode(collection.Started{CollectionID: "c", ClientID: "acme", Company: "se-demo-bank",
			Product: collection.ProductWealth, LoginMethod: "M", UserUUID: "u", StartedAt: time.Now(), Consent: bad})
		if err == nil {
			t.Errorf("consent %+v was encoded", bad)
		}
	}
}
