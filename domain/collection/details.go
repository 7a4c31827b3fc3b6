package collection

import (
	"fmt"
	"reflect"
	"time"
)

// DeadlineKind names what a collection is waiting for with a time limit. Deadlines live in
// events, so a restarted worker re-arms them and no collection stays non-final past one.
type DeadlineKind string

const (
	DeadlineContactForm     DeadlineKind = "CONTACT_FORM"
	DeadlineCollectionInput DeadlineKind = "COLLECTION_INPUT"
	DeadlineMethodSelection DeadlineKind = "TWO_FACTOR_METHOD_SELECTION"
	DeadlineEIDOrder        DeadlineKind = "EID_ORDER"
)

// ExpiryStatus is the final status a collection takes when the deadline passes.
func (k DeadlineKind) ExpiryStatus() (Status, error) {
	switch k {
	case DeadlineContactForm:
		return StatusContactForm, nil
	case DeadlineCollectionInput:
		return StatusCollectionInputTimeout, nil
	case DeadlineMethodSelection:
		return StatusTwoFactorMethodSelectionTimeout, nil
	case DeadlineEIDOrder:
		return StatusAuthenticationTimeout, nil
	}
	return "", fmt.Errorf("unknown deadline kind %q", k)
}

// Deadline is when the current status stops waiting.
type Deadline struct {
	Kind  DeadlineKind `json:"kind"`
	DueAt time.Time    `json:"dueAt"`
}

// Instruction is one HTTP request that a client-side login method asks the client to run from
// the end user's device (the spec's Request object).
type Instruction struct {
	RequestID string            `json:"requestId"`
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers,omitempty"`
	Body      *string           `json:"body,omitempty"`
}

// EIDOrder is the public part of a pending electronic-ID order: enough for the query side to
// compute the animated QR code at every poll, together with the secret kept in StatusPersonal.
type EIDOrder struct {
	QRStartToken   string    `json:"qrStartToken,omitempty"`
	AutoStartToken string    `json:"autoStartToken,omitempty"`
	StartedAt      time.Time `json:"startedAt"`
}

// StatusPersonal holds what must never reach the audit history or analysts: the QR secret of
// an EID order, and the requests handed to the client, whose headers carry the user's device
// credentials (a bearer token) and whose URLs and bodies may carry personal data.
type StatusPersonal struct {
	QRStartSecret string        `json:"qrStartSecret,omitempty"`
	Instructions  []Instruction `json:"instructions,omitempty"`
}

// StatusDetails is what a status carries besides its name: what the client should ask the user
// for, requests to run, a user-facing message, an EID order and a deadline.
type StatusDetails struct {
	RequiredInputTypes []string
	Instructions       []Instruction
	Message            string
	EIDOrder           *EIDOrder
	QRStartSecret      string
	Deadline           *Deadline
	Extra              map[string]any
}

func (d StatusDetails) event(from, to Status, now time.Time) StatusChanged {
	ev := StatusChanged{From: from, To: to, ExtraInformation: d.Extra, ChangedAt: now.UTC(),
		RequiredInputTypes: d.RequiredInputTypes, Message: d.Message, EIDOrder: d.EIDOrder, Deadline: d.Deadline}
	if len(d.Instructions) > 0 {
		ev.InstructionRequestIDs = make([]string, len(d.Instructions))
		for i, in := range d.Instructions {
			ev.InstructionRequestIDs[i] = in.RequestID
		}
	}
	if d.QRStartSecret != "" || len(d.Instructions) > 0 {
		ev.Personal = &StatusPersonal{QRStartSecret: d.QRStartSecret, Instructions: d.Instructions}
	}
	return ev
}

// sameDetails tells whether a repeated status would record nothing new.
func sameDetails(cur StatusChanged, d StatusDetails) bool {
	next := d.event(cur.From, cur.To, cur.ChangedAt)
	return reflect.DeepEqual(normalize(cur), normalize(next))
}

// normalize makes empty and absent details compare equal: a stored event decoded from JSON has
// nil where a freshly decided one may have an empty slice or map.
func normalize(e StatusChanged) StatusChanged {
	e.From, e.ChangedAt = "", time.Time{}
	if len(e.ExtraInformation) == 0 {
		e.ExtraInformation = nil
	}
	if len(e.RequiredInputTypes) == 0 {
		e.RequiredInputTypes = nil
	}
	if len(e.InstructionRequestIDs) == 0 {
		e.InstructionRequestIDs = nil
	}
	if e.Personal != nil {
		p := *e.Personal // a copy: the event may be the aggregate's own
		if len(p.Instructions) == 0 {
			p.Instructions = nil
		}
		e.Personal = &p
		if p.QRStartSecret == "" && p.Instructions == nil {
			e.Personal = nil
		}
	}
	return e
}
