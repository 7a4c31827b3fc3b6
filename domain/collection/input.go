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

// maxInputValue bounds a free-form input value.
const maxInputValue = 256

var (
	// emailPattern is the spec's "<address>@<domain>": one @, no spaces, a dotted domain.
	emailPattern = regexp.MustCompile(`^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$`)
	// phonePattern is the spec's "digits only, including country prefix" (E.164 without '+').
	phonePattern = regexp.MustCompile(`^[1-9][0-9]{7,14}$`)
)

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

// SuppliedValues are the values themselves.
type SuppliedValues struct {
	Inputs    []Input          `json:"inputs,omitempty"`
	Responses []ClientResponse `json:"responses,omitempty"`
}

// FieldError is one rejected part of a supplement-info body.
type FieldError struct {
	Field   string
	Message string
}

// InputRejectedError lists why supplement-info was refused; it wraps domain.ErrInvalid.
type InputRejectedError struct{ Fields []FieldError }

func (e *InputRejectedError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "input rejected: " + strings.Join(parts, "; ")
}

func (e *InputRejectedError) Unwrap() error { return domain.ErrInvalid }

// ErrNotAwaitingInput refuses supplement-info when the collection's status does not take it.
var ErrNotAwaitingInput = fmt.Errorf("collection is not awaiting input: %w", domain.ErrConflict)

// AwaitsInput reports whether supplement-info with CollectionInput is taken now.
func (c *Collection) AwaitsInput() bool {
	return (c.status == StatusContactFormPending || c.status == StatusCollectionInputPending) && c.supplied == nil
}

// AwaitsClientResponses reports whether a ResponseObject is taken now.
func (c *Collection) AwaitsClientResponses() bool {
	return len(c.current.Instructions) > 0 && !c.status.IsFinal() && c.supplied == nil
}

// SupplyInput validates CollectionInput against the formats of the spec and the kinds the
// status asked for. A rejected input records nothing.
func (c *Collection) SupplyInput(inputs []Input, now time.Time) ([]domain.Event, error) {
	if !c.AwaitsInput() {
		return nil, fmt.Errorf("collection %s is %s: %w", c.id, c.status, ErrNotAwaitingInput)
	}
	required := c.current.RequiredInputTypes
	if len(required) == 0 && c.status == StatusContactFormPending {
		required = []string{InputEmail, InputMobilePhoneNumber}
	}
	var errs []FieldError
	if len(inputs) == 0 {
		errs = append(errs, FieldError{"inputs", "at least one input is required"})
	}
	seen := map[string]bool{}
	types := make([]string, 0, len(inputs))
	for i, in := range inputs {
		field := fmt.Sprintf("inputs[%d]", i)
		switch {
		case in.Type == "":
			errs = append(errs, FieldError{field + ".type", "is required"})
		case len(required) > 0 && !slices.Contains(required, in.Type):
			errs = append(errs, FieldError{field + ".type", fmt.Sprintf("%s is not asked for; expected %s", in.Type, strings.Join(required, ", "))})
		case seen[in.Type]:
			errs = append(errs, FieldError{field + ".type", in.Type + " is given twice"})
		default:
			if msg := checkInputValue(in.Type, in.Value); msg != "" {
				errs = append(errs, FieldError{field + ".value", msg})
			}
		}
		seen[in.Type] = true
		types = append(types, in.Type)
	}
	for _, r := range required {
		if !seen[r] && len(inputs) > 0 {
			errs = append(errs, FieldError{"inputs", r + " is required"})
		}
	}
	if len(errs) > 0 {
		return nil, &InputRejectedError{Fields: errs}
	}
	return []domain.Event{InputSupplied{Kind: InputKindCollectionInput, InputTypes: types, SuppliedAt: now.UTC(),
		Personal: &SuppliedValues{Inputs: inputs}}}, nil
}

func checkInputValue(typ, value string) string {
	switch typ {
	case InputEmail:
		if !emailPattern.MatchString(value) || len(value) > maxInputValue {
			return "must be <address>@<domain>"
		}
	case InputMobilePhoneNumber:
		if !phonePattern.MatchString(value) {
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
// instructions and Samla must tolerate their echoes.
func (c *Collection) SupplyClientResponses(responses []ClientResponse, now time.Time) ([]domain.Event, error) {
	if !c.AwaitsClientResponses() {
		return nil, fmt.Errorf("collection %s has no pending instructions: %w", c.id, ErrNotAwaitingInput)
	}
	asked := map[string]bool{}
	for _, in := range c.current.Instructions {
		asked[in.RequestID] = true
	}
	var errs []FieldError
	var kept []ClientResponse
	var ids []string
	for i, r := range responses {
		field := fmt.Sprintf("responses[%d]", i)
		if r.RequestID == "" {
			errs = append(errs, FieldError{field + ".requestId", "is required"})
			continue
		}
		if r.Status < 100 || r.Status > 599 {
			errs = append(errs, FieldError{field + ".status", "must be an HTTP status code"})
			continue
		}
		if asked[r.RequestID] && !slices.Contains(ids, r.RequestID) {
			kept = append(kept, r)
			ids = append(ids, r.RequestID)
		}
	}
	if len(errs) == 0 && len(kept) == 0 {
		errs = append(errs, FieldError{"responses", "no response answers a pending instruction"})
	}
	if len(errs) > 0 {
		return nil, &InputRejectedError{Fields: errs}
	}
	return []domain.Event{InputSupplied{Kind: InputKindClientResponses, RequestIDs: ids, SuppliedAt: now.UTC(),
		Personal: &SuppliedValues{Responses: kept}}}, nil
}
