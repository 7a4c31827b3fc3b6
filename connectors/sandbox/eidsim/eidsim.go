// Package eidsim simulates a Swedish mobile electronic-ID provider as a relying party (a
// company) sees it: an auth call starts an order (orderRef, autoStartToken, qrStartToken,
// qrStartSecret), collect reports pending (with a hint code), complete (with the signer) or
// failed, and cancel withdraws it. The simulated user is driven by the sandbox: they sign or
// cancel by themselves after a delay (the MOCK login method and the same-device flow), or when a
// tester says so (POST /sandbox/eid/sign and /sandbox/eid/cancel), or never.
//
// Order state is computed from the caller's clock when read, never moved by timers, so a test
// with a fake clock sees exactly the same answers as a slow real run and no goroutine outlives a
// request.
package eidsim

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/samla/samla/domain/eid"
	"github.com/samla/samla/platform/shrink"
)

// Action is what the simulated user does with an order.
type Action int

const (
	// Sign: the user signs.
	Sign Action = iota
	// CancelInApp: the user presses cancel in the EID app.
	CancelInApp
	// Ignore: the user never acts; the order expires.
	Ignore
)

// User is the simulated person holding the phone: who they really are (which may differ from
// the personal number the relying party asked for) and what they do.
type User struct {
	PersonalNumber string
	GivenName      string
	Surname        string
	Action         Action
}

// Users decides the simulated user of an order from the personal number the relying party asked
// for ("" when it did not ask: the user identifies by scanning).
type Users func(requestedPersonalNumber string) User

// AuthRequest starts an order.
type AuthRequest struct {
	// PersonalNumber, when set, is the only person the relying party expects (requirement).
	PersonalNumber string
	// Reference is the relying party's correlation id (the sandbox stores Samla's collection or
	// consent id there), by which a tester signs or cancels the order.
	Reference string
	// ActAfter makes the simulated user act by themselves that long after the order started;
	// 0 waits for SignByReference or CancelByReference.
	ActAfter time.Duration
	// Mock marks an order of the MOCK login method: it runs on a simulated device of its own, so
	// it neither blocks nor is blocked by other orders for the same person (load and end-to-end
	// tests run many at once for one persona). Every other order conflicts with a pending
	// non-mock order for the same person, as the real provider's orders do.
	Mock bool
}

// Order is what auth returns to the relying party.
type Order struct {
	OrderRef       string    `json:"orderRef"`
	AutoStartToken string    `json:"autoStartToken"`
	QRStartToken   string    `json:"qrStartToken"`
	QRStartSecret  string    `json:"qrStartSecret"`
	StartedAt      time.Time `json:"startedAt"`
	ExpiresAt      time.Time `json:"expiresAt"`
}

// CollectResult is an order's state.
type CollectResult struct {
	OrderRef       string          `json:"orderRef"`
	Status         string          `json:"status"`             // eid.StatusPending | StatusComplete | StatusFailed
	HintCode       string          `json:"hintCode,omitempty"` // pending and failed
	CompletionData *CompletionData `json:"completionData,omitempty"`
	// At is when the order reached its current status (its start while pending).
	At time.Time `json:"-"`
}

// CompletionData is the result of a completed order.
type CompletionData struct {
	User struct {
		PersonalNumber string `json:"personalNumber"`
		Name           string `json:"name"`
		GivenName      string `json:"givenName"`
		Surname        string `json:"surname"`
	} `json:"user"`
	Device struct {
		IPAddress string `json:"ipAddress"`
	} `json:"device"`
	BankIDIssueDate string `json:"bankIdIssueDate"`
	Signature       string `json:"signature"`
	OCSPResponse    string `json:"ocspResponse"`
}

var (
	// ErrAlreadyInProgress: a pending order for the same person exists; both are aborted.
	ErrAlreadyInProgress = errors.New("eid: an order for the person is already in progress")
	// ErrNoSuchOrder: unknown or forgotten orderRef.
	ErrNoSuchOrder = errors.New("eid: no such order")
	// ErrNoPendingOrder: nothing pending under the reference.
	ErrNoPendingOrder = errors.New("eid: no pending order for the reference")
	// ErrUserWillNotSign: the persona never signs (it is the point of that persona).
	ErrUserWillNotSign = errors.New("eid: this user never signs")
)

// Simulator is the simulated EID provider. It is safe for concurrent use.
type Simulator struct {
	timeout time.Duration
	keep    time.Duration
	users   Users

	mu     sync.Mutex
	orders map[string]*order
	// pendingByPerson (non-mock orders only: they are the ones that conflict) and
	// pendingByReference index the orders that were pending when last looked at, so that
	// starting an order (and acting by reference) looks at a few open orders rather than every
	// order of the last minutes; an order found no longer pending leaves them for good (an order
	// never becomes pending again).
	pendingByPerson    map[string]map[string]*order
	pendingByReference map[string]map[string]*order
	lastPurge          time.Time
	// peak is the most orders held since the maps were last copied: a purge that leaves a
	// burst's maps mostly empty copies them into new ones, which let go of the buckets.
	peak shrink.Peak
}

type order struct {
	Order
	req  AuthRequest
	user User
	// started is when the user's app took the order (hint started).
	started time.Time
	// done is set once the order is final by an explicit act (sign, cancel, conflict).
	done     bool
	doneAt   time.Time
	status   string
	hintCode string
}

// New builds a simulator whose orders expire after orderTimeout and are forgotten keep after
// they started. users may be nil: then whoever is asked for signs, when told to.
func New(orderTimeout, keep time.Duration, users Users) *Simulator {
	if users == nil {
		users = func(pn string) User { return User{PersonalNumber: pn, GivenName: "Test", Surname: "Testsson"} }
	}
	return &Simulator{timeout: orderTimeout, keep: max(keep, orderTimeout), users: users, orders: map[string]*order{},
		pendingByPerson: map[string]map[string]*order{}, pendingByReference: map[string]map[string]*order{}}
}

// Auth starts an order. A pending order for the same person aborts both, as the real provider
// does: the old one fails with hint cancelled and the new one is refused (ErrAlreadyInProgress),
// unless either is a MOCK order or the old one has the same reference (the relying party
// starting over, which withdraws its own earlier order first).
func (s *Simulator) Auth(req AuthRequest, now time.Time) (Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purgeLocked(now)
	if req.PersonalNumber != "" {
		// The relying party starting over withdraws its own earlier order first.
		for _, o := range s.stillPendingLocked(s.pendingByReference, req.Reference, now) {
			if o.req.PersonalNumber == req.PersonalNumber {
				o.finish(eid.StatusFailed, eid.HintCancelled, now)
			}
		}
		// A MOCK order runs on a device of its own: it neither blocks nor is blocked.
		if !req.Mock {
			conflict := false
			for _, o := range s.stillPendingLocked(s.pendingByPerson, req.PersonalNumber, now) {
				o.finish(eid.StatusFailed, eid.HintCancelled, now)
				conflict = true
			}
			if conflict {
				return Order{}, ErrAlreadyInProgress
			}
		}
	}
	o := &order{
		Order: Order{OrderRef: newUUID(), AutoStartToken: newUUID(), QRStartToken: newUUID(), QRStartSecret: newUUID(),
			StartedAt: now, ExpiresAt: now.Add(s.timeout)},
		req: req, user: s.users(req.PersonalNumber),
	}
	s.orders[o.OrderRef] = o
	if !req.Mock {
		index(s.pendingByPerson, req.PersonalNumber, o)
	}
	index(s.pendingByReference, req.Reference, o)
	return o.Order, nil
}

// Collect reads an order's state at now.
func (s *Simulator) Collect(orderRef string, now time.Time) (CollectResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[orderRef]
	if !ok {
		return CollectResult{}, ErrNoSuchOrder
	}
	return s.resultLocked(o, now), nil
}

// Cancel is the relying party withdrawing its order; a final order stays as it is.
func (s *Simulator) Cancel(orderRef string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[orderRef]
	if !ok {
		return ErrNoSuchOrder
	}
	if s.resultLocked(o, now).Status == eid.StatusPending {
		o.finish(eid.StatusFailed, eid.HintCancelled, now)
	}
	return nil
}

// AppStarted is the user's app taking the order (QR scanned or autostart token used).
func (s *Simulator) AppStarted(orderRef string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[orderRef]
	if !ok {
		return ErrNoSuchOrder
	}
	if o.started.IsZero() && s.resultLocked(o, now).Status == eid.StatusPending {
		o.started = now
	}
	return nil
}

// SignByReference is the tester's "the user scans and signs" for the newest pending order with
// that reference. What happens is the user's own action: a user who cancels cancels, a user who
// never signs refuses (ErrUserWillNotSign).
func (s *Simulator) SignByReference(reference string, now time.Time) (CollectResult, error) {
	return s.actByReference(reference, now, func(o *order) error {
		switch o.user.Action {
		case Ignore:
			return ErrUserWillNotSign
		case CancelInApp:
			o.finish(eid.StatusFailed, eid.HintUserCancel, now)
		default:
			o.finish(eid.StatusComplete, "", now)
		}
		return nil
	})
}

// CancelByReference is the user pressing cancel in the app.
func (s *Simulator) CancelByReference(reference string, now time.Time) (CollectResult, error) {
	return s.actByReference(reference, now, func(o *order) error {
		o.finish(eid.StatusFailed, eid.HintUserCancel, now)
		return nil
	})
}

func (s *Simulator) actByReference(reference string, now time.Time, act func(*order) error) (CollectResult, error) {
	if reference == "" {
		return CollectResult{}, ErrNoPendingOrder
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pending := s.stillPendingLocked(s.pendingByReference, reference, now)
	if len(pending) == 0 {
		return CollectResult{}, ErrNoPendingOrder
	}
	sort.Slice(pending, func(i, j int) bool { return pending[i].StartedAt.After(pending[j].StartedAt) })
	o := pending[0]
	if err := act(o); err != nil {
		return CollectResult{}, err
	}
	return s.resultLocked(o, now), nil
}

func (o *order) finish(status, hint string, at time.Time) {
	o.done, o.status, o.hintCode, o.doneAt = true, status, hint, at
}

// stateLocked computes the order's state at now: an explicit act wins if it came first, then
// the user's own act after ActAfter, then expiry.
func (s *Simulator) stateLocked(o *order, now time.Time) CollectResult {
	r := CollectResult{OrderRef: o.OrderRef}
	actAt := time.Time{}
	if o.req.ActAfter > 0 && o.user.Action != Ignore {
		actAt = o.StartedAt.Add(o.req.ActAfter)
	}
	switch {
	case o.done && (actAt.IsZero() || !o.doneAt.After(actAt)) && !o.doneAt.After(o.ExpiresAt):
		r.Status, r.HintCode, r.At = o.status, o.hintCode, o.doneAt
	case !actAt.IsZero() && actAt.Before(o.ExpiresAt) && !now.Before(actAt):
		r.At = actAt
		if o.user.Action == CancelInApp {
			r.Status, r.HintCode = eid.StatusFailed, eid.HintUserCancel
		} else {
			r.Status = eid.StatusComplete
		}
	case !now.Before(o.ExpiresAt):
		r.Status, r.HintCode, r.At = eid.StatusFailed, eid.HintExpiredTransaction, o.ExpiresAt
	default:
		r.Status, r.At = eid.StatusPending, o.StartedAt
		switch {
		case !actAt.IsZero() && !now.Before(o.StartedAt.Add(o.req.ActAfter/2)):
			r.HintCode = eid.HintUserSign // the simulated user is halfway through
		case !o.started.IsZero():
			r.HintCode = eid.HintStarted
		default:
			r.HintCode = eid.HintOutstandingTransaction
		}
	}
	return r
}

// resultLocked is stateLocked with the completion data of a completed order.
func (s *Simulator) resultLocked(o *order, now time.Time) CollectResult {
	r := s.stateLocked(o, now)
	if r.Status == eid.StatusComplete {
		r.CompletionData = o.completion(r.At)
	}
	return r
}

// index adds o to idx under key ("" is not indexed).
func index(idx map[string]map[string]*order, key string, o *order) {
	if key == "" {
		return
	}
	if idx[key] == nil {
		idx[key] = map[string]*order{}
	}
	idx[key][o.OrderRef] = o
}

// stillPendingLocked returns the orders under key in idx that are pending at now, dropping the
// others from it.
func (s *Simulator) stillPendingLocked(idx map[string]map[string]*order, key string, now time.Time) []*order {
	var out []*order
	for ref, o := range idx[key] {
		if s.stateLocked(o, now).Status == eid.StatusPending {
			out = append(out, o)
		} else {
			delete(idx[key], ref)
		}
	}
	if len(idx[key]) == 0 {
		delete(idx, key)
	}
	return out
}

func (o *order) completion(at time.Time) *CompletionData {
	c := &CompletionData{}
	c.User.PersonalNumber = o.user.PersonalNumber
	c.User.GivenName, c.User.Surname = o.user.GivenName, o.user.Surname
	c.User.Name = o.user.GivenName + " " + o.user.Surname
	c.Device.IPAddress = "192.0.2.10" // documentation range: the simulated phone
	c.BankIDIssueDate = at.UTC().AddDate(-2, 0, 0).Format(time.DateOnly)
	// Stand-ins for the XML signature and OCSP response; nobody verifies them in the sandbox.
	c.Signature = base64.StdEncoding.EncodeToString([]byte("<sandbox-signature order=\"" + o.OrderRef + "\"/>"))
	c.OCSPResponse = base64.StdEncoding.EncodeToString([]byte("sandbox-ocsp " + o.OrderRef))
	return c
}

// Release is the relying party telling the provider that it has what it needs from a final
// order (the company signed its user in with it): the order is forgotten now, as the real
// provider forgets a completed order, rather than keep after its start. Under a burst of
// logins the finished orders were most of the heap until then (a 30 s POST load left ~50 MB
// of them in use for two minutes), and they kept the spans the burst filled resident. A
// pending or unknown order is left as it is.
func (s *Simulator) Release(orderRef string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.orders[orderRef]; ok && s.stateLocked(o, now).Status != eid.StatusPending {
		s.forgetLocked(o)
	}
}

// forgetLocked drops o and its index entries.
func (s *Simulator) forgetLocked(o *order) {
	delete(s.orders, o.OrderRef)
	unindex(s.pendingByPerson, o.req.PersonalNumber, o.OrderRef)
	unindex(s.pendingByReference, o.req.Reference, o.OrderRef)
}

// Purge forgets the orders older than keep. Starting an order purges too; an idle simulator
// is purged by its server's janitor, so that a burst's orders do not stay in memory.
func (s *Simulator) Purge(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastPurge = time.Time{}
	s.purgeLocked(now)
}

// purgeLocked forgets the orders older than keep, looking at most once a second.
func (s *Simulator) purgeLocked(now time.Time) {
	if now.Sub(s.lastPurge) < time.Second && !now.Before(s.lastPurge) {
		return
	}
	s.lastPurge = now
	s.peak.Saw(len(s.orders))
	for _, o := range s.orders {
		if now.Sub(o.StartedAt) > s.keep {
			s.forgetLocked(o)
		}
	}
	if s.peak.Due(len(s.orders)) {
		s.orders = shrink.Map(s.orders)
		s.pendingByPerson = shrink.Map(s.pendingByPerson)
		s.pendingByReference = shrink.Map(s.pendingByReference)
		s.peak.Reset(len(s.orders))
	}
}

// unindex drops the order ref from idx under key, and the key once no order is left under it:
// every reference is a key of its own, so empty sets would pile up for good.
func unindex(idx map[string]map[string]*order, key, ref string) {
	if m := idx[key]; m != nil {
		delete(m, ref)
		if len(m) == 0 {
			delete(idx, key)
		}
	}
}

// newUUID is a random (version 4) UUID, the shape of the provider's tokens.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("eidsim: crypto/rand failed: %v", err)) // never happens on supported platforms
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
