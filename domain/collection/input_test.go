package collection_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
)

func pending(to collection.Status, d collection.StatusDetails) []domain.Event {
	ev := collection.StatusChanged{From: collection.StatusLogin, To: to, RequiredInputTypes: d.RequiredInputTypes,
		Deadline: d.Deadline, ChangedAt: t0}
	if len(d.Instructions) > 0 {
		for _, in := range d.Instructions {
			ev.InstructionRequestIDs = append(ev.InstructionRequestIDs, in.RequestID)
		}
		ev.Personal = &collection.StatusPersonal{Instructions: d.Instructions}
	}
	return []domain.Event{started(), changed(collection.StatusRunning, collection.StatusLogin), ev}
}

func TestSupplyInput(t *testing.T) {
	contactForm := pending(collection.StatusContactFormPending, collection.StatusDetails{})
	inputPending := pending(collection.StatusCollectionInputPending, collection.StatusDetails{RequiredInputTypes: []string{"EMAIL"}})
	supply := func(in ...collection.Input) func(c *collection.Collection) error {
		return func(c *collection.Collection) error { return c.SupplyInput(in, t0) }
	}
	email := collection.Input{Type: "EMAIL", Value: "tolvan@example.se"}
	phone := collection.Input{Type: "MOBILE_PHONE_NUMBER", Value: "46701234567"}

	t.Run("contact form takes e-mail and mobile number", func(t *testing.T) {
		scenario(t).Given(contactForm...).When(supply(email, phone)).Then(collection.InputSupplied{
			Kind: collection.InputKindCollectionInput, InputTypes: []string{"EMAIL", "MOBILE_PHONE_NUMBER"}, SuppliedAt: t0,
			Personal: &collection.SuppliedValues{Inputs: []collection.Input{email, phone}}})
	})
	t.Run("the kinds REQUIRED_INPUT_TYPES lists", func(t *testing.T) {
		scenario(t).Given(inputPending...).When(supply(email)).Then(collection.InputSupplied{
			Kind: collection.InputKindCollectionInput, InputTypes: []string{"EMAIL"}, SuppliedAt: t0,
			Personal: &collection.SuppliedValues{Inputs: []collection.Input{email}}})
	})
	for name, in := range map[string][]collection.Input{
		"e-mail without @":        {{Type: "EMAIL", Value: "tolvan.example.se"}},
		"e-mail without a domain": {{Type: "EMAIL", Value: "tolvan@"}},
		"e-mail with a space":     {{Type: "EMAIL", Value: "tol van@example.se"}},
		"a kind not asked for":    {{Type: "MOBILE_PHONE_NUMBER", Value: "46701234567"}},
		"a kind twice":            {email, email},
		"nothing":                 {},
	} {
		t.Run("rejects "+name, func(t *testing.T) {
			scenario(t).Given(inputPending...).When(supply(in...)).ThenError(domain.ErrInvalid)
		})
	}
	for name, value := range map[string]string{"a plus sign": "+46701234567", "spaces": "46 70 123 45 67",
		"no country prefix": "0701234567", "letters": "4670ABC4567", "too short": "4670"} {
		t.Run("rejects a phone number with "+name, func(t *testing.T) {
			scenario(t).Given(contactForm...).When(supply(email, collection.Input{Type: "MOBILE_PHONE_NUMBER", Value: value})).
				ThenError(domain.ErrInvalid)
		})
	}
	t.Run("the contact form needs both", func(t *testing.T) {
		scenario(t).Given(contactForm...).When(supply(email)).ThenError(domain.ErrInvalid)
	})
	emailForm := pending(collection.StatusContactFormPending, collection.StatusDetails{RequiredInputTypes: []string{"EMAIL"}})
	t.Run("a contact form that lists EMAIL alone takes it alone", func(t *testing.T) {
		scenario(t).Given(emailForm...).When(supply(email)).Then(collection.InputSupplied{
			Kind: collection.InputKindCollectionInput, InputTypes: []string{"EMAIL"}, SuppliedAt: t0,
			Personal: &collection.SuppliedValues{Inputs: []collection.Input{email}}})
	})
	t.Run("a contact form that lists EMAIL alone refuses a mobile number", func(t *testing.T) {
		scenario(t).Given(emailForm...).When(supply(email, phone)).ThenError(domain.ErrInvalid)
	})
	t.Run("a rejection names the fields", func(t *testing.T) {
		c := rehydrate(t, inputPending...)
		err := c.SupplyInput([]collection.Input{{Type: "EMAIL", Value: "x"}}, t0)
		var rejected *domain.InvalidFieldsError
		if !errors.As(err, &rejected) || rejected.Fields[0].Field != "inputs[0].value" {
			t.Fatalf("error %v", err)
		}
		if len(c.Recorded()) != 0 {
			t.Fatalf("a rejected input recorded %v", c.Recorded())
		}
	})
	t.Run("not while collecting", func(t *testing.T) {
		scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusCollecting)).
			When(supply(email)).ThenError(collection.ErrNotAwaitingInput)
	})
	t.Run("only once per pending status", func(t *testing.T) {
		given := append(inputPending, collection.InputSupplied{Kind: collection.InputKindCollectionInput,
			InputTypes: []string{"EMAIL"}, SuppliedAt: t0, Personal: &collection.SuppliedValues{Inputs: []collection.Input{email}}})
		scenario(t).Given(given...).When(supply(email)).ThenError(collection.ErrNotAwaitingInput)
	})
}

func TestSupplyClientResponses(t *testing.T) {
	given := pending(collection.StatusWaitingForUserAction, collection.StatusDetails{Instructions: []collection.Instruction{
		{RequestID: "r1", Method: "POST", URL: "https://company.example/eid"}}})
	ok := collection.ClientResponse{RequestID: "r1", Status: 200, Body: "{}"}
	respond := func(rs ...collection.ClientResponse) func(c *collection.Collection) error {
		return func(c *collection.Collection) error { return c.SupplyClientResponses(rs, t0) }
	}
	t.Run("responses to the instructions are kept; unknown ones dropped", func(t *testing.T) {
		scenario(t).Given(given...).When(respond(ok, collection.ClientResponse{RequestID: "new-url", Status: 404})).
			Then(collection.InputSupplied{Kind: collection.InputKindClientResponses, RequestIDs: []string{"r1"}, SuppliedAt: t0,
				Personal: &collection.SuppliedValues{Responses: []collection.ClientResponse{ok}}})
	})
	t.Run("a response to nothing pending is rejected", func(t *testing.T) {
		scenario(t).Given(given...).When(respond(collection.ClientResponse{RequestID: "other", Status: 200})).ThenError(domain.ErrInvalid)
	})
	t.Run("a status that is no HTTP status is rejected", func(t *testing.T) {
		scenario(t).Given(given...).When(respond(collection.ClientResponse{RequestID: "r1", Status: 42})).ThenError(domain.ErrInvalid)
	})
	t.Run("no instructions, no responses", func(t *testing.T) {
		scenario(t).Given(pending(collection.StatusWaitingForUserAction, collection.StatusDetails{})...).
			When(respond(ok)).ThenError(collection.ErrNotAwaitingInput)
	})
	t.Run("two responses to one request are rejected", func(t *testing.T) {
		failed := collection.ClientResponse{RequestID: "r1", Status: 500}
		scenario(t).Given(given...).When(respond(ok, failed)).ThenFieldError("responses[1].requestId")
		scenario(t).Given(given...).When(respond(failed, ok)).ThenFieldError("responses[1].requestId")
	})
	t.Run("a response missing for an instruction is rejected, naming its requestId", func(t *testing.T) {
		two := pending(collection.StatusWaitingForUserAction, collection.StatusDetails{Instructions: []collection.Instruction{
			{RequestID: "r1", Method: "POST", URL: "https://company.example/eid"},
			{RequestID: "r2", Method: "GET", URL: "https://company.example/login"}}})
		scenario(t).Given(two...).When(respond(ok)).ThenFieldError("responses")
		var rejected *domain.InvalidFieldsError
		c := collection.Kind.New()
		if err := domain.Rehydrate(c, two...); err != nil {
			t.Fatal(err)
		}
		if err := c.SupplyClientResponses([]collection.ClientResponse{ok}, t0); !errors.As(err, &rejected) ||
			len(rejected.Fields) != 1 || !strings.Contains(rejected.Fields[0].Reason, `"r2"`) {
			t.Fatalf("err = %v, want one field error naming r2", err)
		}
	})
}

func TestSupplyInputIdempotency(t *testing.T) {
	given := pending(collection.StatusContactFormPending, collection.StatusDetails{})
	email := collection.Input{Type: "EMAIL", Value: "tolvan@example.se"}
	phone := collection.Input{Type: "MOBILE_PHONE_NUMBER", Value: "46701234567"}
	first := collection.InputRequest{IdempotencyKey: "k1", RequestHash: "h1"}
	supplied := collection.InputSupplied{Kind: collection.InputKindCollectionInput,
		InputTypes: []string{"EMAIL", "MOBILE_PHONE_NUMBER"}, SuppliedAt: t0,
		Personal: &collection.SuppliedValues{Inputs: []collection.Input{email, phone}, IdempotencyKey: "k1", RequestHash: "h1"}}
	supply := func(req collection.InputRequest) func(c *collection.Collection) error {
		return func(c *collection.Collection) error {
			return c.SupplyInputFor(req, []collection.Input{email, phone}, t0)
		}
	}

	t.Run("the accepted input records the request", func(t *testing.T) {
		scenario(t).Given(given...).When(supply(first)).Then(supplied)
	})
	t.Run("a retry with the same key and content decides nothing and succeeds", func(t *testing.T) {
		scenario(t).Given(append(given, supplied)...).When(supply(first)).Then()
	})
	t.Run("the same key with other content is refused", func(t *testing.T) {
		scenario(t).Given(append(given, supplied)...).
			When(supply(collection.InputRequest{IdempotencyKey: "k1", RequestHash: "h2"})).ThenError(collection.ErrInputKeyReused)
	})
	t.Run("another key after accepted input is not awaited", func(t *testing.T) {
		scenario(t).Given(append(given, supplied)...).
			When(supply(collection.InputRequest{IdempotencyKey: "k2", RequestHash: "h1"})).ThenError(collection.ErrNotAwaitingInput)
	})
	t.Run("no key after accepted input is not awaited", func(t *testing.T) {
		scenario(t).Given(append(given, supplied)...).When(supply(collection.InputRequest{})).ThenError(collection.ErrNotAwaitingInput)
	})
	t.Run("a key does not excuse invalid input", func(t *testing.T) {
		scenario(t).Given(given...).When(func(c *collection.Collection) error {
			return c.SupplyInputFor(first, []collection.Input{{Type: "EMAIL", Value: "x"}, phone}, t0)
		}).ThenError(domain.ErrInvalid)
	})
	t.Run("client responses carry the request too", func(t *testing.T) {
		withInstructions := pending(collection.StatusWaitingForUserAction, collection.StatusDetails{Instructions: []collection.Instruction{
			{RequestID: "r1", Method: "POST", URL: "https://company.example/eid"}}})
		ok := collection.ClientResponse{RequestID: "r1", Status: 200}
		respond := func(req collection.InputRequest) func(c *collection.Collection) error {
			return func(c *collection.Collection) error {
				return c.SupplyClientResponsesFor(req, []collection.ClientResponse{ok}, t0)
			}
		}
		responded := collection.InputSupplied{Kind: collection.InputKindClientResponses, RequestIDs: []string{"r1"},
			SuppliedAt: t0,
			Personal:   &collection.SuppliedValues{Responses: []collection.ClientResponse{ok}, IdempotencyKey: "k1", RequestHash: "h1"}}
		scenario(t).Given(withInstructions...).When(respond(first)).Then(responded)
		scenario(t).Given(append(withInstructions, responded)...).When(respond(first)).Then()
		scenario(t).Given(append(withInstructions, responded)...).
			When(respond(collection.InputRequest{IdempotencyKey: "k1", RequestHash: "other"})).ThenError(collection.ErrInputKeyReused)
	})
	t.Run("a retry after the status moved on still gets the first answer", func(t *testing.T) {
		history := append(append(given, supplied), changed(collection.StatusContactFormPending, collection.StatusCollecting))
		c := rehydrate(t, history...)
		if c.SuppliedInput() != nil {
			t.Fatal("the aggregate still holds the input after the status moved on")
		}
		scenario(t).Given(history...).When(supply(first)).Then()
		scenario(t).Given(history...).
			When(supply(collection.InputRequest{IdempotencyKey: "k1", RequestHash: "h2"})).ThenError(collection.ErrInputKeyReused)
		scenario(t).Given(history...).
			When(supply(collection.InputRequest{IdempotencyKey: "k2", RequestHash: "h1"})).ThenError(collection.ErrNotAwaitingInput)
		scenario(t).Given(history...).When(supply(collection.InputRequest{})).ThenError(collection.ErrNotAwaitingInput)
	})
}

// TestSupplyInputAfterErasure: the request that supplied input is identified in the event's
// personal part. Once that is erased, a retry with the same key is not recognised: it is new
// input, which the collection takes or refuses as it would any, whatever the request holds, so
// that no answer tells whether a guessed e-mail address or phone number was the one supplied.
func TestSupplyInputAfterErasure(t *testing.T) {
	email := collection.Input{Type: "EMAIL", Value: "tolvan@example.se"}
	erased := collection.InputSupplied{Kind: collection.InputKindCollectionInput, InputTypes: []string{"EMAIL"}, SuppliedAt: t0}
	history := append(pending(collection.StatusContactFormPending, collection.StatusDetails{}), erased)
	for _, req := range []collection.InputRequest{{IdempotencyKey: "k1", RequestHash: "h1"}, {IdempotencyKey: "k1", RequestHash: "h2"}} {
		scenario(t).Given(history...).When(func(c *collection.Collection) error {
			return c.SupplyInputFor(req, []collection.Input{email}, t0)
		}).ThenError(collection.ErrNotAwaitingInput)
	}
}

// TestInputOfAnOlderBuildIsRecognised: input recorded with the request's fingerprint in the
// scheme before the current one is recognised by its legacy fingerprint.
func TestInputOfAnOlderBuildIsRecognised(t *testing.T) {
	legacy := collection.InputRequest{IdempotencyKey: "k1", RequestHash: "new", LegacyRequestHash: "h1"}
	email := collection.Input{Type: "EMAIL", Value: "tolvan@example.se"}
	stored := collection.InputSupplied{Kind: collection.InputKindCollectionInput, InputTypes: []string{"EMAIL"}, SuppliedAt: t0,
		Personal: &collection.SuppliedValues{Inputs: []collection.Input{email}, IdempotencyKey: "k1", RequestHash: "h1"}}
	scenario(t).Given(append(pending(collection.StatusContactFormPending, collection.StatusDetails{}), stored)...).
		When(func(c *collection.Collection) error { return c.SupplyInputFor(legacy, []collection.Input{email}, t0) }).Then()
}

func TestRequiredInputs(t *testing.T) {
	both := []string{"EMAIL", "MOBILE_PHONE_NUMBER"}
	for _, c := range []struct {
		name   string
		status collection.Status
		listed []string
		want   []string
	}{
		{"a contact form asks for what it lists", collection.StatusContactFormPending, []string{"EMAIL"}, []string{"EMAIL"}},
		{"a contact form that lists nothing asks for both", collection.StatusContactFormPending, nil, both},
		{"an input request asks for what it lists", collection.StatusCollectionInputPending, []string{"EMAIL"}, []string{"EMAIL"}},
		{"another status asks for nothing", collection.StatusCollecting, nil, nil},
	} {
		if got := collection.RequiredInputs(c.status, c.listed); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
