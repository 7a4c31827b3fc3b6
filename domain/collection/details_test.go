package collection_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
)

// TestInstructionsAreRecordedAsPersonalData: the requests a client-side login hands out carry
// the user's device bearer token in their headers, so the event keeps them in its personal part
// and shows only their request ids publicly; the aggregate still works with them as before.
func TestInstructionsAreRecordedAsPersonalData(t *testing.T) {
	body := `{"personalNumber":"199001010017"}`
	instructions := []collection.Instruction{
		{RequestID: "r1", Method: "POST", URL: "https://company.example/eid/start",
			Headers: map[string]string{"Authorization": "Bearer device-token"}, Body: &body},
		{RequestID: "r2", Method: "GET", URL: "https://company.example/eid/collect"},
	}
	details := collection.StatusDetails{Message: "Open the app", Instructions: instructions}
	login := []domain.Event{started(), changed(collection.StatusRunning, collection.StatusLogin)}
	recorded := collection.StatusChanged{From: collection.StatusLogin, To: collection.StatusWaitingForUserAction,
		Message: "Open the app", InstructionRequestIDs: []string{"r1", "r2"}, ChangedAt: t0,
		Personal: &collection.StatusPersonal{Instructions: instructions}}
	changeTo := func(to collection.Status, d collection.StatusDetails) func(c *collection.Collection) error {
		return func(c *collection.Collection) error { return c.ChangeStatusWith(to, d, t0) }
	}

	t.Run("recorded in the personal part, with the request ids public", func(t *testing.T) {
		scenario(t).Given(login...).When(changeTo(collection.StatusWaitingForUserAction, details)).Then(recorded)
		raw, err := json.Marshal(recorded)
		if err != nil {
			t.Fatal(err)
		}
		var public map[string]json.RawMessage
		if err := json.Unmarshal(raw, &public); err != nil {
			t.Fatal(err)
		}
		delete(public, "personal")
		rest, _ := json.Marshal(public)
		for _, secret := range []string{"device-token", "Authorization", "company.example", "199001010017"} {
			if strings.Contains(string(rest), secret) {
				t.Errorf("public part %s contains %q", rest, secret)
			}
		}
	})
	t.Run("the aggregate reads them back", func(t *testing.T) {
		c := rehydrate(t, append(login, recorded)...)
		if !reflect.DeepEqual(c.Current().Instructions, instructions) || !c.AwaitsClientResponses() {
			t.Fatalf("current instructions %+v, awaits responses %v", c.Current().Instructions, c.AwaitsClientResponses())
		}
		if got := c.Current().Details(); !reflect.DeepEqual(got, details) {
			t.Fatalf("details %+v, want %+v", got, details)
		}
	})
	t.Run("stating them again records nothing, also after a JSON round trip", func(t *testing.T) {
		raw, err := json.Marshal(recorded)
		if err != nil {
			t.Fatal(err)
		}
		var stored collection.StatusChanged
		if err := json.Unmarshal(raw, &stored); err != nil {
			t.Fatal(err)
		}
		scenario(t).Given(append(login, stored)...).When(changeTo(collection.StatusWaitingForUserAction, details)).Then()
		empty := collection.StatusDetails{Message: "Open the app", Instructions: []collection.Instruction{}}
		scenario(t).Given(append(login, collection.StatusChanged{From: collection.StatusLogin,
			To: collection.StatusWaitingForUserAction, Message: "Open the app", ChangedAt: t0})...).
			When(changeTo(collection.StatusWaitingForUserAction, empty)).Then()
	})
	t.Run("new instructions record a new status change", func(t *testing.T) {
		next := collection.StatusDetails{Message: "Open the app", Instructions: instructions[1:]}
		scenario(t).Given(append(login, recorded)...).When(changeTo(collection.StatusWaitingForUserAction, next)).
			Then(collection.StatusChanged{From: collection.StatusWaitingForUserAction, To: collection.StatusWaitingForUserAction,
				Message: "Open the app", InstructionRequestIDs: []string{"r2"}, ChangedAt: t0,
				Personal: &collection.StatusPersonal{Instructions: instructions[1:]}})
	})
	t.Run("the QR secret and the instructions share the personal part", func(t *testing.T) {
		d := collection.StatusDetails{Instructions: instructions[:1], QRStartSecret: "qr-secret"}
		scenario(t).Given(login...).When(changeTo(collection.StatusWaitingForUserAction, d)).
			Then(collection.StatusChanged{From: collection.StatusLogin, To: collection.StatusWaitingForUserAction,
				InstructionRequestIDs: []string{"r1"}, ChangedAt: t0,
				Personal: &collection.StatusPersonal{QRStartSecret: "qr-secret", Instructions: instructions[:1]}})
	})
	t.Run("a later status drops them", func(t *testing.T) {
		c := rehydrate(t, append(login, recorded,
			changed(collection.StatusWaitingForUserAction, collection.StatusCollecting))...)
		if c.Current().Instructions != nil || c.AwaitsClientResponses() {
			t.Fatalf("instructions %+v after the status moved on", c.Current().Instructions)
		}
	})
}
