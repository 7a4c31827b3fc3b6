package worker

import (
	"reflect"
	"slices"
	"time"

	"github.com/samla/samla/domain/collection"
)

// The mapping from where a company login stands to what the collection's status shows:
//
//	LoginPending                  LOGIN
//	LoginEnrollmentCheck          CUSTOMER_ENROLLMENT_CHECK
//	LoginAwaitingUser             WAITING_FOR_USER_ACTION  EID order (QR start token, autostart
//	                                                       token, start), QR secret (personal
//	                                                       part), deadline EID_ORDER at the
//	                                                       order's start + EIDOrderTimeout
//	LoginAwaitingClient           WAITING_FOR_USER_ACTION  INSTRUCTIONS, deadline EID_ORDER at
//	                                                       shown + 2 × EIDOrderTimeout
//	LoginTwoFactorMethodSelection LOGIN                    deadline TWO_FACTOR_METHOD_SELECTION
//	LoginTwoFactorPending         TWO_FACTOR_PENDING
//	LoginContactFormRequired      CONTACT_FORM_PENDING     REQUIRED_INPUT_TYPES (as the
//	                                                       company lists them, e.g. EMAIL
//	                                                       alone), deadline CONTACT_FORM
//	LoginInputRequired            COLLECTION_INPUT_PENDING REQUIRED_INPUT_TYPES, deadline
//	                                                       COLLECTION_INPUT
//	LoginAuthenticated            (person check) COLLECTING
//	LoginFailed                   CompanySession.Outcome (the adapter's failure table)
//
// States that ask the user for something carry the company's message. The QR code itself is
// never recorded: it changes every second, and the query side computes it at each poll from
// the order and the secret.

// deadlineKind is the deadline a login state waits under, "" for none.
func deadlineKind(st LoginState) collection.DeadlineKind {
	switch st {
	case LoginAwaitingUser, LoginAwaitingClient:
		return collection.DeadlineEIDOrder
	case LoginTwoFactorMethodSelection:
		return collection.DeadlineMethodSelection
	case LoginContactFormRequired:
		return collection.DeadlineContactForm
	case LoginInputRequired:
		return collection.DeadlineCollectionInput
	}
	return ""
}

// statusOf is the collection status a (non-final, not authenticated) login state shows.
func statusOf(st LoginState) collection.Status {
	switch st {
	case LoginEnrollmentCheck:
		return collection.StatusCustomerEnrollmentCheck
	case LoginAwaitingUser, LoginAwaitingClient:
		return collection.StatusWaitingForUserAction
	case LoginTwoFactorPending:
		return collection.StatusTwoFactorPending
	case LoginContactFormRequired:
		return collection.StatusContactFormPending
	case LoginInputRequired:
		return collection.StatusCollectionInputPending
	}
	// LoginPending, LoginTwoFactorMethodSelection and states an adapter adds later: the
	// company is signing in.
	return collection.StatusLogin
}

// target decides the status and details that show the company session cs on the collection
// as it is now. Details that mean the same as the current status's are returned exactly as
// recorded, so that polling a company that did not move records nothing, and a deadline once
// set stays where it is (it is never pushed back by a later poll); same reports that case.
func (s *session) target(c *collection.Collection, cs CompanySession, now time.Time) (_ collection.Status, _ collection.StatusDetails, same bool) {
	to := statusOf(cs.State)
	cur := c.Current()
	same = c.Status() == to && cur.To == to
	d := collection.StatusDetails{}
	switch cs.State {
	case LoginPending:
		// Nothing for the user to do; the company's "signing in" text adds nothing.
	case LoginAwaitingUser:
		d.Message = cs.Message
		if o := cs.EIDOrder; o != nil {
			d.EIDOrder = &collection.EIDOrder{QRStartToken: o.QRStartToken, AutoStartToken: o.AutoStartToken, StartedAt: o.StartedAt.UTC()}
			d.QRStartSecret = o.QRStartSecret
		}
	case LoginAwaitingClient:
		d.Message, d.Instructions = cs.Message, cs.Instructions
	case LoginContactFormRequired:
		// The kinds the company lists, EMAIL alone included; the domain's default when it lists
		// none, recorded so that the poll shows what supplement-info will require.
		d.Message, d.RequiredInputTypes = cs.Message, collection.RequiredInputs(to, cs.RequiredInputTypes)
	case LoginInputRequired:
		d.Message, d.RequiredInputTypes = cs.Message, cs.RequiredInputTypes
	default:
		d.Message = cs.Message
	}
	if same && s.notice != "" && cur.Message == s.notice {
		d.Message = cur.Message // Samla's notice stands until the status moves on
	}
	kind := deadlineKind(cs.State)
	if same && sameMeaning(cur, d, kind) {
		return to, cur.Details(), true
	}
	if kind != "" {
		d.Deadline = s.deadlineFor(c, to, kind, d, now)
	}
	return to, d, false
}

// deadlineFor places the deadline of a waiting status. A status that already waits under the
// same kind keeps its deadline; one inherited from before a restart is not extended; an EID
// order's deadline follows the order's start, so a new order gets a new one.
func (s *session) deadlineFor(c *collection.Collection, to collection.Status, kind collection.DeadlineKind, d collection.StatusDetails, now time.Time) *collection.Deadline {
	cfg := s.w.cfg
	var due time.Time
	switch kind {
	case collection.DeadlineEIDOrder:
		if d.EIDOrder != nil && !d.EIDOrder.StartedAt.IsZero() {
			return &collection.Deadline{Kind: kind, DueAt: d.EIDOrder.StartedAt.Add(cfg.EIDOrderTimeout).UTC()}
		}
		due = now.Add(cfg.EIDOrderTimeout)
		if len(d.Instructions) > 0 {
			// The client must first run the instructions on the device, which starts the order.
			due = now.Add(2 * cfg.EIDOrderTimeout)
		}
	case collection.DeadlineMethodSelection:
		due = now.Add(cfg.MethodSelectionTimeout)
	case collection.DeadlineContactForm:
		due = now.Add(cfg.ContactFormTimeout)
	case collection.DeadlineCollectionInput:
		due = now.Add(cfg.InputTimeout)
	}
	if cur := c.Deadline(); cur != nil && cur.Kind == kind && c.Status() == to {
		return &collection.Deadline{Kind: kind, DueAt: cur.DueAt}
	}
	if inherited, ok := s.inherited[kind]; ok && inherited.Before(due) {
		due = inherited
	}
	return &collection.Deadline{Kind: kind, DueAt: due.UTC()}
}

// sameMeaning tells whether details decided from a fresh company poll say what the current
// status already says. It compares what identifies them (the order's tokens, the requests,
// the input kinds, the message) rather than every byte, so that a time that went through JSON
// and back, or a deadline computed again, never records a new event per poll.
func sameMeaning(cur collection.CurrentStatus, d collection.StatusDetails, kind collection.DeadlineKind) bool {
	if cur.Message != d.Message || !slices.Equal(cur.RequiredInputTypes, d.RequiredInputTypes) {
		return false
	}
	curKind := collection.DeadlineKind("")
	if cur.Deadline != nil {
		curKind = cur.Deadline.Kind
	}
	if curKind != kind {
		return false
	}
	if (cur.EIDOrder == nil) != (d.EIDOrder == nil) {
		return false
	}
	if cur.EIDOrder != nil && (cur.EIDOrder.QRStartToken != d.EIDOrder.QRStartToken || cur.EIDOrder.AutoStartToken != d.EIDOrder.AutoStartToken) {
		return false
	}
	if len(cur.Instructions) != len(d.Instructions) {
		return false
	}
	for i := range cur.Instructions {
		if !reflect.DeepEqual(cur.Instructions[i], d.Instructions[i]) {
			return false
		}
	}
	return true
}

// waitsUnder tells whether a login state is what a deadline of kind waits for, i.e. whether a
// company still in that state once the deadline passed means the user did not act in time.
func waitsUnder(st LoginState, kind collection.DeadlineKind) bool {
	return deadlineKind(st) == kind
}
