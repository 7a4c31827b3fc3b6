package collection_test

import (
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
)

// TestSupplyRefusedOnceTheDeadlinePassed: a status that waits under a deadline takes input only
// before it. From the deadline on the collection is only waiting for the connector to expire
// it, so input taken then would be answered 202 and still end in the timeout.
func TestSupplyRefusedOnceTheDeadlinePassed(t *testing.T) {
	due := t0.Add(2 * time.Minute)
	email := collection.Input{Type: "EMAIL", Value: "tolvan@example.se"}
	phone := collection.Input{Type: "MOBILE_PHONE_NUMBER", Value: "46701234567"}
	ok := collection.ClientResponse{RequestID: "r1", Status: 200, Body: "{}"}

	contactForm := pending(collection.StatusContactFormPending, collection.StatusDetails{
		Deadline: &collection.Deadline{Kind: collection.DeadlineContactForm, DueAt: due}})
	inputPending := pending(collection.StatusCollectionInputPending, collection.StatusDetails{
		RequiredInputTypes: []string{"EMAIL"}, Deadline: &collection.Deadline{Kind: collection.DeadlineCollectionInput, DueAt: due}})
	instructions := pending(collection.StatusWaitingForUserAction, collection.StatusDetails{
		Instructions: []collection.Instruction{{RequestID: "r1", Method: "POST", URL: "https://company.example/eid"}},
		Deadline:     &collection.Deadline{Kind: collection.DeadlineEIDOrder, DueAt: due}})

	supply := func(at time.Time, in ...collection.Input) func(c *collection.Collection) error {
		return func(c *collection.Collection) error { return c.SupplyInput(in, at) }
	}
	respond := func(at time.Time) func(c *collection.Collection) error {
		return func(c *collection.Collection) error {
			return c.SupplyClientResponses([]collection.ClientResponse{ok}, at)
		}
	}
	justBefore := due.Add(-time.Millisecond)

	t.Run("collection input just before the deadline is taken", func(t *testing.T) {
		scenario(t).Given(inputPending...).When(supply(justBefore, email)).Then(collection.InputSupplied{
			Kind: collection.InputKindCollectionInput, InputTypes: []string{"EMAIL"}, SuppliedAt: justBefore,
			Personal: &collection.SuppliedValues{Inputs: []collection.Input{email}}})
	})
	for name, given := range map[string][]domain.Event{"collection input": inputPending, "contact form": contactForm} {
		for when, at := range map[string]time.Time{"at": due, "after": due.Add(time.Second)} {
			t.Run(name+" "+when+" the deadline is refused", func(t *testing.T) {
				scenario(t).Given(given...).When(supply(at, email, phone)).ThenError(collection.ErrNotAwaitingInput)
			})
		}
	}
	t.Run("client responses just before the deadline are taken", func(t *testing.T) {
		scenario(t).Given(instructions...).When(respond(justBefore)).Then(collection.InputSupplied{
			Kind: collection.InputKindClientResponses, RequestIDs: []string{"r1"}, SuppliedAt: justBefore,
			Personal: &collection.SuppliedValues{Responses: []collection.ClientResponse{ok}}})
	})
	for when, at := range map[string]time.Time{"at": due, "after": due.Add(time.Second)} {
		t.Run("client responses "+when+" the deadline are refused", func(t *testing.T) {
			scenario(t).Given(instructions...).When(respond(at)).ThenError(collection.ErrNotAwaitingInput)
		})
	}
	t.Run("the refusal says the deadline passed", func(t *testing.T) {
		c := rehydrate(t, inputPending...)
		err := c.SupplyInput([]collection.Input{email}, due)
		if err == nil || !strings.Contains(err.Error(), "deadline passed") {
			t.Fatalf("error %v does not say the deadline passed", err)
		}
	})
	t.Run("a deadline does not excuse invalid input", func(t *testing.T) {
		// Before the deadline the usual checks still apply; the deadline only adds a refusal.
		scenario(t).Given(inputPending...).When(supply(justBefore, collection.Input{Type: "EMAIL", Value: "x"})).
			ThenError(domain.ErrInvalid)
	})

	t.Run("identified requests", func(t *testing.T) {
		first := collection.InputRequest{IdempotencyKey: "k1", RequestHash: "h1"}
		supplied := collection.InputSupplied{Kind: collection.InputKindCollectionInput, InputTypes: []string{"EMAIL"},
			SuppliedAt: justBefore,
			Personal:   &collection.SuppliedValues{Inputs: []collection.Input{email}, IdempotencyKey: "k1", RequestHash: "h1"}}
		supplyFor := func(req collection.InputRequest, at time.Time) func(c *collection.Collection) error {
			return func(c *collection.Collection) error {
				return c.SupplyInputFor(req, []collection.Input{email}, at)
			}
		}
		scenario(t).Given(inputPending...).When(supplyFor(first, justBefore)).Then(supplied)
		scenario(t).Given(inputPending...).When(supplyFor(first, due)).ThenError(collection.ErrNotAwaitingInput)
		// The input was taken in time: its retry after the deadline gets the first answer.
		scenario(t).Given(append(inputPending, supplied)...).When(supplyFor(first, due.Add(time.Second))).Then()

		responded := collection.InputSupplied{Kind: collection.InputKindClientResponses, RequestIDs: []string{"r1"},
			SuppliedAt: justBefore,
			Personal:   &collection.SuppliedValues{Responses: []collection.ClientResponse{ok}, IdempotencyKey: "k1", RequestHash: "h1"}}
		respondFor := func(req collection.InputRequest, at time.Time) func(c *collection.Collection) error {
			return func(c *collection.Collection) error {
				return c.SupplyClientResponsesFor(req, []collection.ClientResponse{ok}, at)
			}
		}
		scenario(t).Given(instructions...).When(respondFor(first, justBefore)).Then(responded)
		scenario(t).Given(instructions...).When(respondFor(first, due)).ThenError(collection.ErrNotAwaitingInput)
		scenario(t).Given(append(instructions, responded)...).When(respondFor(first, due.Add(time.Second))).Then()
	})

	t.Run("a status without a deadline takes input at any time", func(t *testing.T) {
		late := t0.Add(24 * time.Hour)
		scenario(t).Given(pending(collection.StatusCollectionInputPending, collection.StatusDetails{RequiredInputTypes: []string{"EMAIL"}})...).
			When(supply(late, email)).Then(collection.InputSupplied{
			Kind: collection.InputKindCollectionInput, InputTypes: []string{"EMAIL"}, SuppliedAt: late,
			Personal: &collection.SuppliedValues{Inputs: []collection.Input{email}}})
	})
}
