package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/platform/retry"
)

var (
	// errDropped: another live worker owns the collection; leaving it is correct, not a failure.
	errDropped = errors.New("collection belongs to another worker")
	// errEnded: the collection reached a final status (here or elsewhere) meanwhile.
	errEnded = errors.New("collection already final")
)

// storeError marks a failure to read or write the event store. The session cannot go on now,
// but nothing is wrong with the collection: it is left for a later sweep rather than FAILED.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

const (
	// maxStoreAttempts bounds the tries of one step against a failing event store; conflicts
	// with other writers are the repository's to retry, within each try.
	maxStoreAttempts = 5
	endSessionWait   = 5 * time.Second
)

// storeBackoff spaces the tries of a step against a failing event store: up to 1.5 s in all before
// the session leaves the collection for a later sweep. Every worker's sessions fail together
// when the store does, hence the jitter.
var storeBackoff = retry.Backoff{Base: 100 * time.Millisecond, Max: time.Second, Jitter: true}

// session drives one collection's company session.
type session struct {
	w         *Worker
	id        string
	causation string
	log       *slog.Logger
	company   string
	tenant    string // the collection's client, known from the first load on
	// subject is the data subject of a collection made for a user (whose erasure ends it), ""
	// for one of no user; known from the first load on.
	subject string

	// inherited are the deadlines the collection waited under when this session took it over
	// (after a restart or from a dead worker): a new login that asks the user for the same
	// thing again does not give them more time.
	inherited map[collection.DeadlineKind]time.Time
	// carried is input the client supplied to the status this session took over; the new
	// company login gets it as soon as it asks for input, so accepted input is not lost to a
	// restart. Personal data: never logged.
	carried []collection.Input
	// forwarded is when the input last sent to the company was supplied, so that a poll before
	// the status moved on does not send it twice.
	forwarded time.Time
	// notice is Samla's own message on the current status (why input was not taken); it
	// stays in place of the company's text until the status moves on.
	notice string
	// psd2 is set when the company serves PSD2 products under consents (company.Consents).
	psd2 bool

	// The company login the session follows, kept in memory between its steps while it is
	// parked (only here: a restart or another worker takes the collection over with a new
	// login). begun: the first step ran; loggedIn: companyID and cs are a login started here,
	// which the session ends at the company when it ends.
	begun, loggedIn bool
	companyID       string
	cs              CompanySession
	// park is set by a step that ends waiting: the session is parked for parkFor, then its
	// next step looks again (resume).
	park    bool
	parkFor time.Duration

	// agg is the collection as this step last read or stored it, nil when not known: the
	// step's next change decides on it instead of reading the stream again (repository.From;
	// a write by anyone else meanwhile fails the append, which then reads it). A step reads
	// the collection once instead of before every change (7 reads of a collection's stream
	// were 12 % of the CPU a collection cost). A parked session keeps it (~0.8 KB): its next
	// look asks the event store only whether the stream moved (refresh) and reads it again
	// if so. The kept collection holds its personal data (the personal number, the input) in
	// memory while the session waits; after a user's erasure, which appends nothing to the
	// collection, until the session's next look (a poll interval at most), which then ends
	// it (refuseErased) and drops it.
	agg *collection.Collection
}

// runStep runs one step of the session and tells the scheduler whether to park it. A session
// that does not park has ended (its outcome recorded, or left for a later sweep or restart);
// its company login is ended with it.
func (w *Worker) runStep(ctx context.Context, s *session) stepResult {
	if m := w.cfg.Metrics; m != nil {
		m.ConnectorSessions.Inc()
		defer m.ConnectorSessions.Dec()
	}
	err := s.next(ctx)
	if err == nil && s.park {
		// The parked session keeps the aggregate it stored last: its next look reads the
		// stream again only if it moved meanwhile (refresh).
		return stepResult{park: true, wait: s.parkFor, client: s.tenant}
	}
	s.agg = nil
	defer s.endLogin(ctx)
	var se *storeError
	switch {
	case err == nil, errors.Is(err, errEnded):
	case ctx.Err() != nil:
		s.log.Info("session paused by shutdown; a restart resumes it")
	case errors.Is(err, errDropped):
		s.log.Debug("collection is another worker's; left alone")
	case errors.As(err, &se):
		s.log.Warn("event store unavailable; session left for a later sweep", "error", err)
	default:
		// Nothing outside can fix this session: end the collection rather than leave the
		// client polling until the deadline.
		s.log.Error("session failed", "error", err)
		if ferr := s.finish(ctx, collection.StatusFailed, nil); ferr != nil && !errors.Is(ferr, errEnded) && !errors.Is(ferr, errDropped) {
			s.log.Error("recording FAILED failed", "error", ferr)
		}
	}
	return stepResult{}
}

// next runs the session's next step: the first drives the collection from where it is stored
// (claim, the login's start) until it must wait; every later one looks again after the wait.
func (s *session) next(ctx context.Context) error {
	s.park = false
	if !s.begun {
		s.begun = true
		return s.run(ctx)
	}
	return s.resume(ctx)
}

// resume is a parked session's step: one look at the collection and the company (poll), then
// on to the login's next wait, or to the data once authenticated.
func (s *session) resume(ctx context.Context) error {
	c, cs, done, err := s.poll(ctx, s.companyID, s.cs)
	s.cs = cs
	if done || err != nil {
		return err
	}
	return s.settle(ctx, c)
}

// settle follows the login from s.cs as far as it goes without waiting: it parks the session
// (s.park) when the login must wait, or collects the data once authenticated.
func (s *session) settle(ctx context.Context, c *collection.Collection) error {
	c, cs, wait, err := s.signIn(ctx, c, s.companyID, s.cs)
	s.cs = cs
	if err != nil || c == nil {
		return err
	}
	if wait {
		s.park, s.parkFor = true, s.pollWait(c, cs)
		return nil
	}
	return s.collect(ctx, c, s.companyID, cs, true)
}

// pollWait is how long a session parks before its next look: the poll interval (the input poll
// interval while the login waits for the client's input, whose event wakes it sooner), never
// past the deadline.
func (s *session) pollWait(c *collection.Collection, cs CompanySession) time.Duration {
	wait := s.w.cfg.PollInterval
	if cs.State == LoginContactFormRequired || cs.State == LoginInputRequired {
		// Never so long that the claim, renewed by the looks, goes stale meanwhile.
		wait = min(s.w.cfg.InputPollInterval, s.w.cfg.StaleClaimAfter/3)
	}
	if d := c.Deadline(); d != nil {
		// Wake up when the deadline passes rather than up to a poll interval later (but never
		// spin on a deadline that passed while the company moved on).
		wait = min(wait, max(d.DueAt.Sub(s.w.now())+time.Millisecond, 5*time.Millisecond))
	}
	return wait
}

// endLogin logs out at the company once the session has ended, when it started a login.
func (s *session) endLogin(ctx context.Context) {
	if s.loggedIn {
		s.loggedIn = false
		s.endCompanySession(ctx, s.companyID, &s.cs)
	}
}

func (s *session) run(ctx context.Context) error {
	c, err := s.load(ctx)
	if err != nil {
		return err
	}
	if !c.Exists() {
		s.log.Warn("collection not found; nothing to drive")
		return nil
	}
	if c.Status().IsFinal() {
		return nil
	}
	s.company, s.tenant = c.Company(), c.ClientID()
	if c.UserUUID() != "" {
		s.subject = c.DataSubject()
	}
	s.log = s.log.With("company", s.company)

	// A deleted user's collection is ended before anything else, whoever holds its claim: there
	// is nothing left to log in with.
	if err := s.refuseErased(ctx); err != nil {
		return err
	}

	// A deadline that passed, e.g. while the service was down, fires before anything else, and
	// whoever sees it first enforces it: ending a collection whose time is up needs no company
	// session, so even another worker's live claim does not stand in the way.
	if s.due(c) {
		if expired, err := s.expire(ctx, false); expired || err != nil {
			return err
		}
	}
	c, err = s.mutate(ctx, false, func(c *collection.Collection) error {
		now := s.w.now()
		if err := c.Claim(s.w.cfg.WorkerID, now, s.w.cfg.StaleClaimAfter); err != nil {
			return err
		}
		// Before LOGIN, which clears them from the status.
		s.takeOver(c)
		if s.logsInAfterClaim(c) {
			// drive's first change: in the claim's append, one append fewer per collection.
			return c.ChangeStatusWith(collection.StatusLogin, collection.StatusDetails{}, now)
		}
		return nil
	})
	if errors.Is(err, collection.ErrAlreadyClaimed) {
		return errDropped
	}
	if err != nil {
		return err
	}
	s.log.Debug("collection claimed", "status", c.Status())
	return s.drive(ctx, c)
}

// logsInAfterClaim tells whether drive, given the collection just claimed, moves it to LOGIN
// before anything else: the same checks drive makes first, in its order.
func (s *session) logsInAfterClaim(c *collection.Collection) bool {
	if s.pastDeadline(c) || c.Status() == collection.StatusCollecting || c.Status() == collection.StatusLogin ||
		!collection.CanTransition(c.Status(), collection.StatusLogin) {
		return false
	}
	co, err := s.w.cfg.Catalog.Get(c.Company())
	return err == nil && co.Supports(c.LoginMethod()) && c.LoginMethod() != company.LoginPDFUpload
}

// drive takes a claimed collection from its current status to a final one.
func (s *session) drive(ctx context.Context, c *collection.Collection) error {
	if s.pastDeadline(c) {
		return s.finish(ctx, timeoutOutcome(c.Status()), errors.New("session deadline passed"))
	}
	co, err := s.w.cfg.Catalog.Get(c.Company())
	if err != nil {
		return s.finish(ctx, collection.StatusFailed, fmt.Errorf("company not in the catalog: %w", err))
	}
	if !co.Supports(c.LoginMethod()) {
		return s.finish(ctx, collection.StatusLoginMethodNotApplicable, nil)
	}
	s.psd2 = co.Consents
	if c.LoginMethod() == company.LoginPDFUpload {
		return s.drivePDF(ctx, c, co.ID)
	}

	// A session resumed at COLLECTING cannot go back to LOGIN (the state machine forbids it),
	// so it signs in again quietly; every other status restarts the login at the company,
	// whose earlier session this worker no longer knows (and whose EID order, QR code or
	// instructions are dead: LOGIN clears them from the status).
	if c.Status() != collection.StatusCollecting {
		if c, err = s.advance(ctx, c, collection.StatusLogin); err != nil {
			return err
		}
	}
	cs, err := s.w.cfg.Companies.StartLogin(ctx, co.ID, LoginRequest{
		PersonalNumber: c.Person().PersonalNumber, LoginMethod: c.LoginMethod(), Reference: c.ID(),
		// One key per login attempt: every attempt follows a new claim, so the version differs.
		IdempotencyKey: fmt.Sprintf("%s/%d", c.ID(), c.Version()),
	})
	if err != nil {
		return s.companyFailed(ctx, err)
	}
	// The login outlives this step when the session parks; the session's end logs it out.
	s.companyID, s.cs, s.loggedIn = co.ID, cs, true
	return s.settle(ctx, c)
}

// takeOver notes what the collection waited for when this session claimed it: the deadlines
// of the user's steps, which a new login must not extend, and input already supplied. The
// claim's decide calls it (again on each of its rounds).
func (s *session) takeOver(c *collection.Collection) {
	// Each round starts over: input an earlier round saw may be gone in this one's state.
	s.inherited, s.carried = map[collection.DeadlineKind]time.Time{}, nil
	if d := c.Deadline(); d != nil && d.Kind != collection.DeadlineEIDOrder {
		// An EID order is not inherited: the new login starts a new order with its own time.
		s.inherited[d.Kind] = d.DueAt
	}
	if in := c.SuppliedInput(); in != nil && in.Kind == collection.InputKindCollectionInput && in.Personal != nil {
		s.carried = in.Personal.Inputs
	}
}

// signIn follows the company login as far as it goes without waiting, showing each step on
// the collection and forwarding input supplied before a takeover. It returns wait once the
// login must wait for the user, the client or the company (the session parks, then polls), the
// authenticated login otherwise, and a nil collection once the collection has ended (the
// outcome is recorded).
func (s *session) signIn(ctx context.Context, c *collection.Collection, companyID string, cs CompanySession) (_ *collection.Collection, _ CompanySession, wait bool, _ error) {
	for {
		switch cs.State {
		case LoginAuthenticated:
			return c, cs, false, nil
		case LoginFailed:
			return nil, cs, false, s.finish(ctx, cs.Outcome, fmt.Errorf("company login failed (%s)", cs.FailureReason))
		}
		if c.Status() == collection.StatusCollecting && needsClient(cs.State) {
			// A quiet re-login cannot show the client anything (COLLECTING cannot go back).
			return nil, cs, false, s.finish(ctx, collection.StatusFailed, fmt.Errorf("the re-login at COLLECTING needs the user (%s)", cs.State))
		}
		if next, ok, err := s.forwardCarried(ctx, companyID, cs); err != nil {
			return nil, cs, false, s.companyFailed(ctx, err)
		} else if ok {
			cs = next
			continue
		}
		var err error
		if c, err = s.show(ctx, c, cs); err != nil {
			return nil, cs, false, err
		}
		if in := c.SuppliedInput(); in != nil && !s.forwarded.IsZero() && in.SuppliedAt.Equal(s.forwarded) {
			// The company took the input and asks the very same again: the aggregate would
			// hold the old input and refuse new input until the deadline, so reopen it.
			if c, err = s.reopen(ctx, "The company needs the input again."); err != nil {
				return nil, cs, false, err
			}
		}
		return c, cs, true, nil
	}
}

// poll is a parked session's look once its wait is over: it returns the login's next state,
// the company's answer to forwarded input, or its state now. done means the collection ended
// here (a deadline passed); c is then stale.
func (s *session) poll(ctx context.Context, companyID string, cs CompanySession) (*collection.Collection, CompanySession, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, cs, false, err
	}
	// The aggregate is looked at again at every poll: the command side appends the client's
	// input (supplement-info) to it, and another worker may have ended it.
	c, err := s.refresh(ctx)
	if err != nil {
		return c, cs, false, err
	}
	switch {
	case c.Status().IsFinal():
		return c, cs, false, errEnded
	case c.ClaimedBy() != s.w.cfg.WorkerID:
		return c, cs, false, errDropped
	}
	if c, err = s.renewClaim(ctx, c); err != nil {
		return c, cs, false, err
	}
	if err := s.refuseErased(ctx); err != nil {
		return c, cs, false, err
	}
	d := c.Deadline()
	if in := c.SuppliedInput(); in != nil && !in.SuppliedAt.Equal(s.forwarded) && (d == nil || !in.SuppliedAt.After(d.DueAt)) {
		// Input given in time is answered even when the deadline passes while it is on its
		// way to the company.
		next, err := s.forward(ctx, c, companyID, cs, *in)
		if s.agg != nil {
			// forward may have recorded the status again (reopen): after a conflict there c is
			// the first round's copy, changed but not stored, and s.agg what was stored.
			c = s.agg
		}
		if err != nil {
			return c, cs, false, s.companyFailed(ctx, err)
		}
		return c, next, false, nil
	}
	if s.due(c) {
		// The deadline is Samla's; one last look at the company tells whether the user acted
		// before the worker noticed (signed, picked a method). A company still waiting for the
		// same thing, or one that cannot answer, ends the collection in the timeout status.
		if next, err := s.w.cfg.Companies.PollLogin(ctx, companyID, cs); err == nil && !waitsUnder(next.State, d.Kind) {
			return c, next, false, nil
		} else if ctx.Err() != nil {
			return c, cs, false, ctx.Err()
		}
		expired, err := s.expire(ctx, true)
		return c, cs, expired, err
	}
	if s.pastDeadline(c) {
		return c, cs, true, s.finish(ctx, timeoutOutcome(c.Status()), errors.New("session deadline passed while signing in"))
	}
	next, err := s.w.cfg.Companies.PollLogin(ctx, companyID, cs)
	if err != nil {
		return c, cs, true, s.companyFailed(ctx, err)
	}
	return c, next, false, nil
}

// forward sends input the client supplied to the company. The company refusing values
// (ErrInputRejected) does not end the collection: the spec lets the user correct input until
// the deadline, so the status is recorded again with the company's reasons, which lets the
// client post again under the same deadline. A company that no longer waits for it
// (ErrNotAwaiting) is asked where it stands instead.
func (s *session) forward(ctx context.Context, c *collection.Collection, companyID string, cs CompanySession, in collection.InputSupplied) (CompanySession, error) {
	s.forwarded = in.SuppliedAt
	if in.Personal == nil {
		// The values were erased (crypto-shredding) before they could be sent.
		_, err := s.reopen(ctx, "The input could not be read; please submit it again.")
		return cs, err
	}
	var next CompanySession
	var err error
	switch in.Kind {
	case collection.InputKindClientResponses:
		next, err = s.w.cfg.Companies.SubmitClientResponses(ctx, companyID, cs, in.Personal.Responses)
	default:
		next, err = s.w.cfg.Companies.SubmitInputs(ctx, companyID, cs, in.Personal.Inputs)
	}
	var rejected *InputRejectedError
	switch {
	case err == nil:
		s.log.Info("client input forwarded to the company", "kind", in.Kind, "status", c.Status())
		return next, nil
	case errors.As(err, &rejected):
		s.log.Info("the company rejected the client's input; the client may post again", "fields", len(rejected.Fields))
		_, err := s.reopen(ctx, rejectionMessage(rejected))
		return cs, err
	case errors.Is(err, ErrInputRejected):
		_, err := s.reopen(ctx, "The company did not accept the input; please check it and submit it again.")
		return cs, err
	case errors.Is(err, ErrNotAwaiting):
		s.log.Info("the company no longer waits for the client's input", "kind", in.Kind)
		return s.w.cfg.Companies.PollLogin(ctx, companyID, cs)
	}
	return cs, err
}

// forwardCarried gives a new login the input supplied before the takeover, once, when it asks
// for input. ok reports that the company took it; a refusal just shows the request to the
// client again.
func (s *session) forwardCarried(ctx context.Context, companyID string, cs CompanySession) (CompanySession, bool, error) {
	if len(s.carried) == 0 || (cs.State != LoginContactFormRequired && cs.State != LoginInputRequired) {
		return cs, false, nil
	}
	inputs := s.carried
	s.carried = nil
	next, err := s.w.cfg.Companies.SubmitInputs(ctx, companyID, cs, inputs)
	switch {
	case err == nil:
		s.log.Info("input supplied before the takeover forwarded to the new login")
		return next, true, nil
	case errors.Is(err, ErrInputRejected), errors.Is(err, ErrNotAwaiting):
		// The error may quote the company's reasons; the log keeps to what happened.
		s.log.Info("input supplied before the takeover not taken; asking the client again", "rejected", errors.Is(err, ErrInputRejected))
		return cs, false, nil
	}
	return cs, false, err
}

func rejectionMessage(e *InputRejectedError) string {
	msg := "The company did not accept the input"
	for i, f := range e.Fields {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		msg += sep + f.Field + " " + f.Message
	}
	return msg + ". Please correct it and submit it again."
}

// reopen records the current status again with a new message, which clears the input the
// aggregate holds, so that the client can post supplement-info again. The deadline stays.
func (s *session) reopen(ctx context.Context, message string) (*collection.Collection, error) {
	return s.mutate(ctx, true, func(c *collection.Collection) error {
		if c.SuppliedInput() == nil {
			return nil
		}
		d := c.Current().Details()
		if d.Message == message {
			// The same reason twice must still record something, or the input stays held.
			message += " (again)"
		}
		d.Message, s.notice = message, message
		return c.ChangeStatusWith(c.Status(), d, s.w.now())
	})
}

// needsClient tells the login states that only the user or the client can move on.
func needsClient(st LoginState) bool {
	switch st {
	case LoginAwaitingClient, LoginTwoFactorMethodSelection, LoginContactFormRequired, LoginInputRequired:
		return true
	}
	return false
}

// show records the status that shows the company session, when it says something new.
func (s *session) show(ctx context.Context, c *collection.Collection, cs CompanySession) (*collection.Collection, error) {
	to, _, same := s.target(c, cs, s.w.now())
	if same || (c.Status() != to && !collection.CanTransition(c.Status(), to)) {
		// Nothing new to show (a parked session's look at a login that did not move): no
		// append, and no second read of the stream. The collection was read in this step; a
		// write since is seen by the next.
		return c, nil
	}
	return s.mutate(ctx, true, func(c *collection.Collection) error {
		now := s.w.now()
		to, d, _ := s.target(c, cs, now)
		if c.Status() != to && !collection.CanTransition(c.Status(), to) {
			return nil // the step is behind the collection (a quiet re-login at COLLECTING)
		}
		return c.ChangeStatusWith(to, d, now)
	})
}

// due reports whether the current status's deadline has passed.
func (s *session) due(c *collection.Collection) bool {
	d := c.Deadline()
	return d != nil && !c.Status().IsFinal() && !s.w.now().Before(d.DueAt)
}

// expire ends the collection in its deadline's timeout status and reports whether it did: the
// collection may have moved on meanwhile (another worker forwarded the input just in time),
// which leaves nothing to expire. mustOwn is false before the claim: a passed deadline is
// enforced whoever runs the session.
func (s *session) expire(ctx context.Context, mustOwn bool) (bool, error) {
	var kind collection.DeadlineKind
	c, err := s.mutate(ctx, mustOwn, func(c *collection.Collection) error {
		if d := c.Deadline(); d != nil {
			kind = d.Kind
		}
		return c.ExpireDeadline(s.w.now())
	})
	if err != nil {
		return errors.Is(err, errEnded), err
	}
	if !c.Status().IsFinal() {
		return false, nil
	}
	s.log.Info("deadline passed", "deadline", kind)
	s.ended(c.Status(), 0)
	return true, nil
}

// advance moves to a status without details when the state machine allows it from where the
// collection is; otherwise the step is already behind it (e.g. a quiet re-login at COLLECTING).
func (s *session) advance(ctx context.Context, c *collection.Collection, to collection.Status) (*collection.Collection, error) {
	if c.Status() == to {
		return c, nil
	}
	return s.mutate(ctx, true, func(c *collection.Collection) error {
		if c.Status() == to || !collection.CanTransition(c.Status(), to) {
			return nil
		}
		return c.ChangeStatusWith(to, collection.StatusDetails{}, s.w.now())
	})
}

// bridges are the steps an outcome implies when the company reports it from a status the
// state machine does not end that way from: a wrong two-factor code means the user was at the
// two-factor step, a refused login method that the login had started.
var bridges = map[collection.Status]collection.Status{
	collection.StatusIncorrectTwoFactorCode:   collection.StatusTwoFactorPending,
	collection.StatusLoginMethodNotApplicable: collection.StatusLogin,
}

// finish ends the collection. An outcome the state machine does not allow from the current
// status (nor through its bridge) ends it FAILED instead.
func (s *session) finish(ctx context.Context, to collection.Status, cause error) error {
	if cause != nil {
		s.log.Info("ending collection", "status", to, "cause", cause)
	}
	c, err := s.mutate(ctx, true, func(c *collection.Collection) error {
		now := s.w.now()
		if collection.CanTransition(c.Status(), to) {
			return c.ChangeStatusWith(to, collection.StatusDetails{}, now)
		}
		if via, ok := bridges[to]; ok && collection.CanTransition(c.Status(), via) && collection.CanTransition(via, to) {
			// The outcome is decided on the state after the bridge, which the aggregate applied
			// when it recorded it; both go in one append.
			if err := c.ChangeStatusWith(via, collection.StatusDetails{}, now); err != nil {
				return err
			}
			return c.ChangeStatusWith(to, collection.StatusDetails{}, now)
		}
		s.log.Warn("outcome not allowed from current status; ending FAILED", "from", c.Status(), "outcome", to)
		return c.ChangeStatusWith(collection.StatusFailed, collection.StatusDetails{}, now)
	})
	if err != nil {
		return err
	}
	s.ended(c.Status(), 0)
	return nil
}

func (s *session) ended(status collection.Status, records int) {
	if m := s.w.cfg.Metrics; m != nil {
		m.ConnectorOutcomes.WithLabelValues(s.company, string(status)).Inc()
	}
	s.log.Info("collection finished", "status", status, "records", records)
}

// companyFailed turns an adapter error into the collection's outcome. A cancelled ctx is a
// shutdown, which records nothing.
func (s *session) companyFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, ErrLoginMethodNotSupported) {
		return s.finish(ctx, collection.StatusLoginMethodNotApplicable, err)
	}
	var se *storeError
	if errors.As(err, &se) || errors.Is(err, errEnded) || errors.Is(err, errDropped) {
		return err // not the company's doing
	}
	return s.finish(ctx, collection.StatusThirdPartyError, err)
}

// renewClaim appends a fresh claim when the session has been quiet for half the staleness
// period (a user taking their time to sign), so that no other worker takes a live session.
func (s *session) renewClaim(ctx context.Context, c *collection.Collection) (*collection.Collection, error) {
	if s.w.now().Sub(c.UpdatedAt()) < s.w.cfg.StaleClaimAfter/2 {
		return c, nil
	}
	c, err := s.mutate(ctx, true, func(c *collection.Collection) error {
		return c.Claim(s.w.cfg.WorkerID, s.w.now(), s.w.cfg.StaleClaimAfter)
	})
	if errors.Is(err, collection.ErrAlreadyClaimed) {
		return nil, errDropped
	}
	return c, err
}

func (s *session) endCompanySession(ctx context.Context, companyID string, cs *CompanySession) {
	if ctx.Err() != nil || cs.ID == "" {
		return // shutting down: the company forgets the session by itself
	}
	ctx, cancel := context.WithTimeout(ctx, endSessionWait)
	defer cancel()
	if err := s.w.cfg.Companies.EndSession(ctx, companyID, *cs); err != nil {
		s.log.Debug("logging out at the company failed", "error", err)
	}
}

// mutate is one step, through the repository's one update operation: decide on the collection
// as stored now and append what it recorded, deciding again after a concurrent write. On top of
// it come the session's own rules, checked before decide: a collection whose user was deleted is
// ended instead (refuseErased) and is errEnded, as is a final collection, and mustOwn refuses to
// act once another worker has claimed the collection (errDropped), which fences a worker that
// lost its claim while it was away. A failing event store is tried again a few times with
// backoff, then reported as a *storeError.
func (s *session) mutate(ctx context.Context, mustOwn bool, decide func(*collection.Collection) error) (*collection.Collection, error) {
	if err := s.refuseErased(ctx); err != nil {
		return nil, err
	}
	return s.step(ctx, mustOwn, decide)
}

// refuseErased ends the collection when its data subject was erased (its user deleted) and
// returns errEnded then; nil lets the session go on. Once erased, a subject stays erased, and an
// ended collection is never driven again.
func (s *session) refuseErased(ctx context.Context) error {
	if s.subject == "" || s.w.cfg.Erasures == nil {
		return nil
	}
	erased, err := s.w.cfg.Erasures.Erased(ctx, s.subject)
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		// Whether to go on cannot be told: the session stops and a later sweep looks again.
		return &storeError{fmt.Errorf("is the user of collection %s erased: %w", s.id, err)}
	case !erased:
		return nil
	}
	c, err := s.step(ctx, false, func(c *collection.Collection) error { return c.EndForErasedUser(s.w.now()) })
	if err != nil {
		return err // errEnded when it had ended already
	}
	s.log.Info("collection ended: its user was deleted")
	s.ended(c.Status(), 0)
	return errEnded
}

// step is mutate without the look at the user's erasure.
func (s *session) step(ctx context.Context, mustOwn bool, decide func(*collection.Collection) error) (*collection.Collection, error) {
	var lastErr error
	for attempt := 1; attempt <= maxStoreAttempts; attempt++ {
		if attempt > 1 {
			if err := retry.Sleep(ctx, storeBackoff.Delay(attempt-1)); err != nil {
				return nil, err
			}
		}
		var refused error // what this round's decision said; nil when it decided
		var opts []repository.UpdateOption
		if s.agg != nil {
			opts = append(opts, repository.From(s.agg))
		}
		// Whatever happens, the aggregate handed to Update is the repository's now.
		s.agg = nil
		c, _, err := s.w.cfg.Repo.Update(ctx, s.id, s.meta(), func(c *collection.Collection) error {
			refused = s.check(c, mustOwn)
			if refused == nil {
				refused = decide(c)
			}
			return refused
		}, opts...)
		switch {
		case err == nil:
			s.agg = c
			return c, nil
		case refused != nil:
			return c, err // decided: the collection refused, or the session's rules did
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		lastErr = &storeError{fmt.Errorf("update collection %s: %w", s.id, err)}
		s.log.Debug("event store failed; trying the step again", "attempt", attempt, "error", err)
	}
	return nil, lastErr
}

// check is the session's rule for every step: it acts on a collection that exists and has not
// ended, and, with mustOwn, only while it holds the claim.
func (s *session) check(c *collection.Collection, mustOwn bool) error {
	switch {
	case !c.Exists():
		return fmt.Errorf("collection %s has no events", s.id)
	case c.Status().IsFinal():
		return errEnded
	case mustOwn && c.ClaimedBy() != s.w.cfg.WorkerID:
		return errDropped
	}
	return nil
}

func (s *session) load(ctx context.Context) (*collection.Collection, error) {
	s.agg = nil
	return s.read(ctx, s.w.cfg.Repo.Load)
}

// refresh is load for a look of a parked session, which kept the aggregate it stored last: that
// one when its stream has not moved since, else the stream read anew.
func (s *session) refresh(ctx context.Context) (*collection.Collection, error) {
	kept := s.agg
	if kept == nil {
		return s.load(ctx)
	}
	s.agg = nil
	return s.read(ctx, func(ctx context.Context, id string) (*collection.Collection, error) {
		return s.w.cfg.Repo.Refresh(ctx, id, kept)
	})
}

// read reads the collection with get and keeps it as the session's aggregate.
func (s *session) read(ctx context.Context, get func(context.Context, string) (*collection.Collection, error)) (*collection.Collection, error) {
	c, err := get(ctx, s.id)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &storeError{fmt.Errorf("load collection %s: %w", s.id, err)}
	}
	s.agg = c
	return c, nil
}

func (s *session) meta() repository.Meta {
	return repository.Meta{
		Tenant: s.tenant, CorrelationID: s.id, CausationID: s.causation,
		Actor: "connector:" + s.w.cfg.WorkerID,
	}
}

func (s *session) pastDeadline(c *collection.Collection) bool {
	return !c.StartedAt().IsZero() && s.w.now().After(c.StartedAt().Add(s.w.cfg.MaxSessionDuration))
}

// timeoutOutcome is how a collection ends when the session's overall limit passes: waiting for
// the user's signature is an authentication timeout, anything else a plain failure.
func timeoutOutcome(st collection.Status) collection.Status {
	if st == collection.StatusWaitingForUserAction {
		return collection.StatusAuthenticationTimeout
	}
	return collection.StatusFailed
}
