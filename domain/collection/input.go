package collection

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/samla/samla/domain"
)

// Input kinds the spec names for CollectionInput.
const (
	InputEmail             = "EMAIL"
	InputMobilePhoneNumber = "MOBILE_PHONE_NUMBER"
)

// RequiredInputs are the input kinds a status asks for: those it lists (REQUIRED_INPUT_TYPES),
// which may be EMAIL alone on a contact form. Only a CONTACT_FORM_PENDING that lists none asks
// for the contact details the spec names, EMAIL and MOBILE_PHONE_NUMBER; the connector records
// these when a company does not say, so that the poll shows what supplement-info will require.
func RequiredInputs(status Status, listed []string) []string {
	if len(listed) == 0 && status == StatusContactFormPending {
		return []string{InputEmail, InputMobilePhoneNumber}
	}
	return listed
}

// maxInputValue bounds a free-form input value.
const maxInputValue = 256

var (
	// emailPattern is the spec's "<address>@<domain>": one @, no spaces or control characters
	// (which a provider's mail system would refuse, or a terminal would run), a dotted domain.
	emailPattern = regexp.MustCompile(`^[^@\s\x00-\x1f\x7f]+@[^@\s.\x00-\x1f\x7f]+(\.[^@\s.\x00-\x1f\x7f]+)+$`)
	// phonePattern is the spec's "digits only, including country prefix" (E.164 without '+').
	phonePattern = regexp.MustCompile(`^[1-9][0-9]{7,14}$`)
)

// ValidEmail tells whether s is an e-mail address as the spec writes it ("<address>@<domain>"),
// of at most 256 characters; cancellations deliver to such addresses too.
func ValidEmail(s string) bool { return len(s) <= maxInputValue && emailPattern.MatchString(s) }

// ValidPhoneNumber tells whether s is a mobile number as the spec writes it: digits only, with
// the country prefix (46701234567).
func ValidPhoneNumber(s string) bool { return phonePattern.MatchString(s) }

// Input is one value the user supplied.
type Input struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// ClientResponse is the outcome of one Instruction that the client ran on the user's device.
type ClientResponse struct {
	RequestID string            `json:"requestId"`
	Status    int               `json:"status"`
	Headers   map[string]string `json:"headers,omitempty"`
	Body      string            `json:"body,omitempty"`
}

// InputKind tells which of the two supplement-info bodies was accepted.
type InputKind string

const (
	InputKindCollectionInput InputKind = "COLLECTION_INPUT"
	InputKindClientResponses InputKind = "CLIENT_RESPONSES"
)

// InputSupplied records accepted supplement-info. The values are personal data.
type InputSupplied struct {
	Kind       InputKind       `json:"kind"`
	InputTypes []string        `json:"inputTypes,omitempty"`
	RequestIDs []string        `json:"requestIds,omitempty"`
	SuppliedAt time.Time       `json:"suppliedAt"`
	Personal   *SuppliedValues `json:"personal,omitempty"`
}

// SuppliedValues are the values themselves, and the request that supplied them.
type SuppliedValues struct {
	Inputs    []Input          `json:"inputs,omitempty"`
	Responses []ClientResponse `json:"responses,omitempty"`
	// IdempotencyKey and RequestHash identify the request that supplied the input, when it came
	// with an Idempotency-Key, so that a retry of it is answered as the first request was. Both
	// are optional: events written before they existed, and requests without a key, lack them.
	// They are personal data (schema v2): the key is the client's own and may name the person,
	// and the hash confirms a guessed e-mail address or phone number to whoever can retry with
	// it. Once erased, no retry of the input is recognised.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	RequestHash    string `json:"requestHash,omitempty"`
}

// ErrNotAwaitingInput refuses supplement-info when the collection's status does not take it.
var ErrNotAwaitingInput = fmt.Errorf("collection is not awaiting input: %w", domain.ErrConflict)

// AwaitsInput reports whether the current status takes supplement-info with CollectionInput.
// It does not look at the clock: SupplyInput also refuses input once the status's deadline has
// passed.
func (c *Collection) AwaitsInput() bool {
	return (c.status == StatusContactFormPending || c.status == StatusCollectionInputPending) && c.supplied == nil
}

// AwaitsClientResponses reports whether the current status takes a ResponseObject. Like
// AwaitsInput, it leaves the deadline to SupplyClientResponses.
func (c *Collection) AwaitsClientResponses() bool {
	return len(c.current.instructions()) > 0 && !c.status.IsFinal() && c.supplied == nil
}

// deadlinePassed refuses supplement-info at or after the current status's deadline. The status
// is then only waiting for the connector to expire it (ExpireDeadline fires at the same
// instant), so input accepted now would be answered with 202 and still end in the timeout.
func (c *Collection) deadlinePassed(now time.Time) error {
	d := c.current.Deadline
	if d == nil || now.Before(d.DueAt) {
		return nil
	}
	return fmt.Errorf("collection %s is %s but its %s deadline passed at %s: %w",
		c.id, c.status, d.Kind, d.DueAt.UTC().Format(time.RFC3339Nano), ErrNotAwaitingInput)
}

// SupplyInput validates CollectionInput against the formats of the spec and the kinds the
// status asked for. A rejected input records nothing; its error is a *domain.InvalidFieldsError
// whose fields are paths into the body (inputs[0].value).
func (c *Collection) SupplyInput(inputs []Input, now time.Time) error {
	return c.SupplyInputFor(InputRequest{}, inputs, now)
}

// decideInput is SupplyInput's decision, not yet recorded.
func (c *Collection) decideInput(inputs []Input, now time.Time) (InputSupplied, error) {
	if !c.AwaitsInput() {
		return InputSupplied{}, fmt.Errorf("collection %s is %s: %w", c.id, c.status, ErrNotAwaitingInput)
	}
	if err := c.deadlinePassed(now); err != nil {
		return InputSupplied{}, err
	}
	required := RequiredInputs(c.status, c.current.RequiredInputTypes)
	var errs []domain.FieldError
	if len(inputs) == 0 {
		errs = append(errs, domain.FieldError{Field: "inputs", Reason: "at least one input is required"})
	}
	seen := map[string]bool{}
	types := make([]string, 0, len(inputs))
	for i, in := range inputs {
		field := fmt.Sprintf("inputs[%d]", i)
		switch {
		case in.Type == "":
			errs = append(errs, domain.FieldError{Field: field + ".type", Reason: "is required"})
		case len(required) > 0 && !slices.Contains(required, in.Type):
			errs = append(errs, domain.FieldError{Field: field + ".type",
				Reason: fmt.Sprintf("%s is not asked for; expected %s", in.Type, strings.Join(required, ", "))})
		case seen[in.Type]:
			errs = append(errs, domain.FieldError{Field: field + ".type", Reason: in.Type + " is given twice"})
		default:
			if reason := checkInputValue(in.Type, in.Value); reason != "" {
				errs = append(errs, domain.FieldError{Field: field + ".value", Reason: reason})
			}
		}
		seen[in.Type] = true
		types = append(types, in.Type)
	}
	for _, r := range required {
		if !seen[r] && len(inputs) > 0 {
			errs = append(errs, domain.FieldError{Field: "inputs", Reason: r + " is required"})
		}
	}
	if len(errs) > 0 {
		return InputSupplied{}, &domain.InvalidFieldsError{Fields: errs}
	}
	return InputSupplied{Kind: InputKindCollectionInput, InputTypes: types, SuppliedAt: now.UTC(),
		Personal: &SuppliedValues{Inputs: inputs}}, nil
}

func checkInputValue(typ, value string) string {
	switch typ {
	case InputEmail:
		if !ValidEmail(value) {
			return "must be <address>@<domain>"
		}
	case InputMobilePhoneNumber:
		if !ValidPhoneNumber(value) {
			return "must be digits only, with the country prefix (e.g. 46701234567)"
		}
	default:
		if strings.TrimSpace(value) == "" || len(value) > maxInputValue {
			return fmt.Sprintf("must be 1 to %d characters", maxInputValue)
		}
	}
	return ""
}

// SupplyClientResponses accepts the client's results of the current instructions. Responses to
// requests the collection did not ask for are dropped, as clients must tolerate new
// instructions and Samla must tolerate their echoes. A rejection is a
// *domain.InvalidFieldsError, as SupplyInput's.
func (c *Collection) SupplyClientResponses(responses []ClientResponse, now time.Time) error {
	return c.SupplyClientResponsesFor(InputRequest{}, responses, now)
}

// decideClientResponses is SupplyClientResponses's decision, not yet recorded.
func (c *Collection) decideClientResponses(responses []ClientResponse, now time.Time) (InputSupplied, error) {
	if !c.AwaitsClientResponses() {
		return InputSupplied{}, fmt.Errorf("collection %s has no pending instructions: %w", c.id, ErrNotAwaitingInput)
	}
	if err := c.deadlinePassed(now); err != nil {
		return InputSupplied{}, err
	}
	asked := map[string]bool{}
	for _, in := range c.current.instructions() {
		asked[in.RequestID] = true
	}
	var errs []domain.FieldError
	var kept []ClientResponse
	var ids []string
	for i, r := range responses {
		field := fmt.Sprintf("responses[%d]", i)
		if r.RequestID == "" {
			errs = append(errs, domain.FieldError{Field: field + ".requestId", Reason: "is required"})
			continue
		}
		if r.Status < 100 || r.Status > 599 {
			errs = append(errs, domain.FieldError{Field: field + ".status", Reason: "must be an HTTP status code"})
			continue
		}
		if slices.ContainsFunc(responses[:i], func(earlier ClientResponse) bool { return earlier.RequestID == r.RequestID }) {
			// Two answers to one request: which one the company should see would be a guess.
			errs = append(errs, domain.FieldError{Field: field + ".requestId", Reason: "answers a request an earlier response answers"})
			continue
		}
		if asked[r.RequestID] {
			kept = append(kept, r)
			ids = append(ids, r.RequestID)
		}
	}
	// Every instruction is a step of the login: one left unanswered would only fail the login
	// later, after a 202 told the client all was well. (A response refused above is not counted
	// as missing too.)
	refused := len(errs) > 0
	for _, in := range c.current.instructions() {
		if !refused && !slices.Contains(ids, in.RequestID) {
			errs = append(errs, domain.FieldError{Field: "responses",
				Reason: fmt.Sprintf("lacks a response to requestId %q, which the instructions require", in.RequestID)})
		}
	}
	if len(errs) > 0 {
		return InputSupplied{}, &domain.InvalidFieldsError{Fields: errs}
	}
	return InputSupplied{Kind: InputKindClientResponses, RequestIDs: ids, SuppliedAt: now.UTC(),
		Personal: &SuppliedValues{Responses: kept}}, nil
}

// ErrInputKeyReused refuses supplement-info whose Idempotency-Key already supplied different
// input to the collection.
var ErrInputKeyReused = fmt.Errorf("idempotency key was used for other input: %w", domain.ErrRefused)

// InputRequest identifies one supplement-info request: its Idempotency-Key ("" when it has none)
// and a hash of its content. LegacyRequestHash is the hash of the same content in the scheme
// before the current one ("" for none): input recorded by an older build matches it.
type InputRequest struct {
	IdempotencyKey    string
	RequestHash       string
	LegacyRequestHash string
}

// retryOf tells how req relates to the input the collection took earlier: a retry of a request
// that supplied input, in this status or an earlier one (true), the same key with other content
// (ErrInputKeyReused), or unrelated.
func (c *Collection) retryOf(req InputRequest) (bool, error) {
	hash, ok := c.suppliedBy[req.IdempotencyKey] // never holds "": input without a key is not recorded there
	if !ok {
		return false, nil
	}
	if !domain.SameRequest(hash, req.RequestHash, req.LegacyRequestHash) {
		return false, fmt.Errorf("collection %s: %w", c.id, ErrInputKeyReused)
	}
	return true, nil
}

// SupplyInputFor is SupplyInput for an identified request. A retry of a request whose input the
// collection already took records nothing and succeeds, so the client gets the first answer
// again, even after the deadline (the input was taken in time) or after the status moved on (the
// first answer was lost while the connector already went ahead); the same key with other content
// is refused with ErrInputKeyReused.
func (c *Collection) SupplyInputFor(req InputRequest, inputs []Input, now time.Time) error {
	return c.supply(req, func() (InputSupplied, error) { return c.decideInput(inputs, now) })
}

// SupplyClientResponsesFor is SupplyClientResponses for an identified request, with the retry
// rule of SupplyInputFor.
func (c *Collection) SupplyClientResponsesFor(req InputRequest, responses []ClientResponse, now time.Time) error {
	return c.supply(req, func() (InputSupplied, error) { return c.decideClientResponses(responses, now) })
}

// supply records the input decide accepts, stamped with the request that supplied it, unless
// the request is a retry of one whose input the collection already took.
func (c *Collection) supply(req InputRequest, decide func() (InputSupplied, error)) error {
	if retry, err := c.retryOf(req); retry || err != nil {
		return err
	}
	ev, err := decide()
	if err != nil {
		return err
	}
	ev.Personal.IdempotencyKey, ev.Personal.RequestHash = req.IdempotencyKey, req.RequestHash
	return domain.Record(c, ev)
}
