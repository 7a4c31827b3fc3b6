package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/personnummer"
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
	// maxWriteAttempts bounds load-decide-save rounds of one step (conflicts and store errors).
	maxWriteAttempts = 6
	storeRetryDelay  = 100 * time.Millisecond
	endSessionWait   = 5 * time.Second
)

// session drives one collection's company session.
type session struct {
	w         *Worker
	id        string
	causation string
	log       *slog.Logger
	company   string
}

func (w *Worker) runSession(id, causation string) {
	defer func() {
		w.mu.Lock()
		delete(w.running, id)
		w.mu.Unlock()
		<-w.slots
		w.wg.Done()
	}()
	if m := w.cfg.Metrics; m != nil {
		m.ConnectorSessions.Inc()
		defer m.ConnectorSessions.Dec()
	}
	s := &session{w: w, id: id, causation: causation, log: w.log.With("collection", id)}
	err := s.run(w.ctx)
	var se *storeError
	switch {
	case err == nil, errors.Is(err, errEnded):
	case w.ctx.Err() != nil:
		s.log.Info("session paused by shutdown; a restart resumes it")
	case errors.Is(err, errDropped):
		s.log.Debug("collection is another worker's; left alone")
	case errors.As(err, &se):
		s.log.Warn("event store unavailable; session left for a later sweep", "err", err)
	default:
		// Nothing outside can fix this session: end the collection rather than leave the
		// client polling until the deadline.
		s.log.Error("session failed", "err", err)
		if ferr := s.finish(w.ctx, collection.StatusFailed, nil); ferr != nil && !errors.Is(ferr, errEnded) && !errors.Is(ferr, errDropped) {
			s.log.Error("recording FAILED failed", "err", ferr)
		}
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
	s.company = c.Company()
	s.log = s.log.With("company", s.company)

	c, err = s.mutate(ctx, false, func(c *collection.Collection) ([]domain.Event, error) {
		return c.Claim(s.w.cfg.WorkerID, s.w.now(), s.w.cfg.StaleClaimAfter)
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
	if c.Product() != collection.ProductInsurance {
		return s.finish(ctx, collection.StatusFailed, fmt.Errorf("collecting %s is not implemented", c.Product()))
	}

	// A session resumed at COLLECTING cannot go back to LOGIN (the state machine forbids it),
	// so it signs in again quietly; every other status restarts the login at the company,
	// whose earlier session this worker no longer knows.
	if c.Status() != collection.StatusCollecting {
		if c, err = s.advance(ctx, c, collection.StatusLogin, nil); err != nil {
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
	defer s.endCompanySession(ctx, co.ID, &cs)

	for cs.State != LoginAuthenticated {
		switch cs.State {
		case LoginFailed:
			return s.finish(ctx, cs.Outcome, nil)
		case LoginAwaitingUser:
			if c, err = s.advance(ctx, c, collection.StatusWaitingForUserAction, cs.ExtraInformation); err != nil {
				return err
			}
		}
		if s.pastDeadline(c) {
			return s.finish(ctx, timeoutOutcome(c.Status()), errors.New("session deadline passed while signing in"))
		}
		if err := sleep(ctx, s.w.cfg.PollInterval); err != nil {
			return err
		}
		if c, err = s.renewClaim(ctx, c); err != nil {
			return err
		}
		next, err := s.w.cfg.Companies.PollLogin(ctx, co.ID, cs)
		if err != nil {
			return s.companyFailed(ctx, err)
		}
		cs = next
	}

	if !s.samePerson(c.Person().PersonalNumber, cs.AuthenticatedPersonalNumber) {
		return s.finish(ctx, collection.StatusAuthenticationMismatch, nil)
	}
	if c, err = s.advance(ctx, c, collection.StatusCollecting, nil); err != nil {
		return err
	}
	data, err := s.w.cfg.Companies.Insurances(ctx, co.ID, cs)
	if err != nil {
		return s.companyFailed(ctx, err)
	}
	return s.complete(ctx, data)
}

// complete records the insurances and the final status in one append, so that a collection
// is never COMPLETED without its data nor left COLLECTING with data recorded.
func (s *session) complete(ctx context.Context, data InsuranceData) error {
	final := collection.StatusCompleted
	if len(data.Insurances) == 0 {
		final = collection.StatusCompletedEmpty
	}
	c, err := s.mutate(ctx, true, func(c *collection.Collection) ([]domain.Event, error) {
		now := s.w.now()
		var events []domain.Event
		if len(data.Insurances) > 0 {
			recorded, err := c.RecordInsurances(data.Insurances, data.HolderNames, now)
			if err != nil {
				return nil, err
			}
			events = append(events, recorded...)
		}
		// Decided on the same state as the record: recording does not move the status.
		changed, err := c.ChangeStatus(final, nil, now)
		if err != nil {
			return nil, err
		}
		return append(events, changed...), nil
	})
	if err != nil {
		return err
	}
	s.ended(c.Status(), len(data.Insurances))
	return nil
}

// advance moves to a non-final status when the state machine allows it from where the
// collection is; otherwise the step is already behind it (e.g. a quiet re-login at COLLECTING).
func (s *session) advance(ctx context.Context, c *collection.Collection, to collection.Status, extra map[string]any) (*collection.Collection, error) {
	if c.Status() == to {
		return c, nil
	}
	return s.mutate(ctx, true, func(c *collection.Collection) ([]domain.Event, error) {
		if c.Status() == to || !collection.CanTransition(c.Status(), to) {
			return nil, nil
		}
		return c.ChangeStatus(to, extra, s.w.now())
	})
}

// finish ends the collection. An outcome the state machine does not allow from the current
// status (a company answer that makes no sense there) ends it FAILED instead.
func (s *session) finish(ctx context.Context, to collection.Status, cause error) error {
	if cause != nil {
		s.log.Warn("ending collection", "status", to, "cause", cause)
	}
	c, err := s.mutate(ctx, true, func(c *collection.Collection) ([]domain.Event, error) {
		target := to
		if !collection.CanTransition(c.Status(), target) {
			s.log.Warn("outcome not allowed from current status; ending FAILED", "from", c.Status(), "outcome", to)
			target = collection.StatusFailed
		}
		return c.ChangeStatus(target, nil, s.w.now())
	})
	if err != nil {
		return err
	}
	s.ended(c.Status(), 0)
	return nil
}

func (s *session) ended(status collection.Status, insurances int) {
	if m := s.w.cfg.Metrics; m != nil {
		m.ConnectorOutcomes.WithLabelValues(s.company, string(status)).Inc()
	}
	s.log.Info("collection finished", "status", status, "insurances", insurances)
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
	return s.finish(ctx, collection.StatusThirdPartyError, err)
}

// renewClaim appends a fresh claim when the session has been quiet for half the staleness
// period (a user taking their time to sign), so that no other worker takes a live session.
func (s *session) renewClaim(ctx context.Context, c *collection.Collection) (*collection.Collection, error) {
	if s.w.now().Sub(c.UpdatedAt()) < s.w.cfg.StaleClaimAfter/2 {
		return c, nil
	}
	c, err := s.mutate(ctx, true, func(c *collection.Collection) ([]domain.Event, error) {
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
		s.log.Debug("logging out at the company failed", "err", err)
	}
}

// mutate is one step: load the collection, decide on it, append at the revision it was
// loaded at. A concurrent write makes it reload and decide again; a store error is retried a
// few times. mustOwn refuses to act once another worker has claimed the collection, which
// fences a worker that lost its claim while it was away.
func (s *session) mutate(ctx context.Context, mustOwn bool, decide func(*collection.Collection) ([]domain.Event, error)) (*collection.Collection, error) {
	var lastErr error
	for attempt := 1; attempt <= maxWriteAttempts; attempt++ {
		if lastErr != nil {
			if err := sleep(ctx, storeRetryDelay*time.Duration(attempt-1)); err != nil {
				return nil, err
			}
		}
		c, err := s.load(ctx)
		if err != nil {
			lastErr = err
			continue
		}
		if !c.Exists() {
			return nil, fmt.Errorf("collection %s has no events", s.id)
		}
		if c.Status().IsFinal() {
			return c, errEnded
		}
		if mustOwn && c.ClaimedBy() != s.w.cfg.WorkerID {
			return c, errDropped
		}
		events, err := decide(c)
		if err != nil || len(events) == 0 {
			return c, err
		}
		_, err = s.w.cfg.Repo.Save(ctx, collection.StreamName(s.id), c.Version(), s.meta(c), events)
		if errors.Is(err, eventstore.ErrWrongExpectedRevision) {
			s.log.Debug("concurrent write; deciding again", "attempt", attempt)
			lastErr = nil
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			lastErr = &storeError{fmt.Errorf("append to collection %s: %w", s.id, err)}
			continue
		}
		for _, e := range events {
			if err := c.Apply(e); err != nil {
				return nil, fmt.Errorf("apply own event: %w", err)
			}
		}
		return c, nil
	}
	if lastErr == nil {
		lastErr = &storeError{fmt.Errorf("collection %s: %d concurrent writes in a row: %w", s.id, maxWriteAttempts, eventstore.ErrWrongExpectedRevision)}
	}
	return nil, lastErr
}

func (s *session) load(ctx context.Context) (*collection.Collection, error) {
	c, err := s.w.cfg.Repo.LoadCollection(ctx, s.id)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &storeError{fmt.Errorf("load collection %s: %w", s.id, err)}
	}
	return c, nil
}

func (s *session) meta(c *collection.Collection) repository.Meta {
	return repository.Meta{
		Tenant: c.ClientID(), CorrelationID: c.ID(), CausationID: s.causation,
		Actor: "connector:" + s.w.cfg.WorkerID,
	}
}

func (s *session) pastDeadline(c *collection.Collection) bool {
	return !c.StartedAt().IsZero() && s.w.now().After(c.StartedAt().Add(s.w.cfg.MaxSessionDuration))
}

// samePerson applies the spec's mismatch rule (b): when the company says who signed in, it
// must be the person the collection was started for. Without either number nothing can be
// compared, and the collection goes on.
func (s *session) samePerson(requested, authenticated string) bool {
	if requested == "" || authenticated == "" {
		return true
	}
	if n, err := personnummer.Parse(authenticated, s.w.now()); err == nil {
		authenticated = n.String()
	}
	return requested == authenticated
}

// timeoutOutcome is how a collection ends when its deadline passes: waiting for the user's
// signature is an authentication timeout, anything else a plain failure.
func timeoutOutcome(st collection.Status) collection.Status {
	if st == collection.StatusWaitingForUserAction {
		return collection.StatusAuthenticationTimeout
	}
	return collection.StatusFailed
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
