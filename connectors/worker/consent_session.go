package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/platform/retry"
)

// Messages of the failures the worker decides itself (the bank's own are mapped by the adapter).
const (
	messageConsentMismatch   = "The electronic ID was signed by another person than the one the consent names."
	messageConsentBankFailed = "The bank could not be reached to authorize the consent."
	messageConsentBankEnded  = "The bank ended the consent before it was authorized."
)

// consentSession drives one consent.
type consentSession struct {
	w         *ConsentWorker
	id        string
	causation string
	log       *slog.Logger
	company   string
	tenant    string
	subject   string
}

func (w *ConsentWorker) runConsent(id, causation string) {
	if m := w.cfg.Metrics; m != nil {
		m.ConnectorSessions.Inc()
		defer m.ConnectorSessions.Dec()
	}
	s := &consentSession{w: w, id: id, causation: causation, log: w.log.With("consent", id)}
	err := s.run(w.pool.ctx)
	var se *storeError
	switch {
	case err == nil, errors.Is(err, errEnded):
	case w.pool.ctx.Err() != nil:
		s.log.Info("consent session paused by shutdown; a restart resumes it")
	case errors.Is(err, errDropped):
		s.log.Debug("consent is another worker's; left alone")
	case errors.As(err, &se):
		s.log.Warn("event store unavailable; consent left for a later sweep", "error", err)
	default:
		// Nothing outside can fix this session: end the consent rather than leave the client
		// polling until the deadline. An authorized consent stays as it is (it cannot fail).
		s.log.Error("consent session failed", "error", err)
		if ferr := s.fail(w.pool.ctx, true, consent.FailureThirdPartyError, messageConsentBankFailed, ""); ferr != nil &&
			!errors.Is(ferr, errEnded) && !errors.Is(ferr, errDropped) && !errors.Is(ferr, consent.ErrIllegalTransition) {
			s.log.Error("recording the consent's failure failed", "error", ferr)
		}
	}
}

func (s *consentSession) run(ctx context.Context) error {
	c, err := s.load(ctx)
	if err != nil {
		return err
	}
	if !c.Exists() {
		s.log.Warn("consent not found; nothing to drive")
		return nil
	}
	if c.Status().IsFinal() {
		return nil // withdrawing it at the bank is the revocation's (HandleBatch) or the session's that ended it
	}
	s.company, s.tenant, s.subject = c.Company(), c.ClientID(), c.DataSubject()
	s.log = s.log.With("company", s.company)

	// A deleted user's consent ends before anything else, whoever holds its claim: there is no
	// one left to sign, nor a personal number to compare the signer with.
	if err := s.refuseErased(ctx, c); err != nil {
		return err
	}
	switch c.Status() {
	case consent.StatusAuthorized:
		// Nothing to drive until it expires; the expiry needs no claim: whoever sees it due
		// records it, so a consent whose expiresAt passed while no worker ran expires at once.
		return s.expireOrArm(ctx, c)
	case consent.StatusAwaitingAuthorization:
		if s.due(c) {
			// The order's deadline passed (e.g. while the service was down): it is settled
			// before anything else, by whoever sees it first, as a collection's deadline is.
			if done, err := s.settleDue(ctx, c, false); done || err != nil {
				return err
			}
		}
	}
	c, err = s.mutate(ctx, false, func(c *consent.Consent) error {
		return c.Claim(s.w.cfg.WorkerID, s.w.now(), s.w.cfg.StaleClaimAfter)
	})
	if errors.Is(err, consent.ErrAlreadyClaimed) {
		return errDropped
	}
	if err != nil {
		return err
	}
	s.log.Debug("consent claimed", "status", c.Status())
	if c.Status() == consent.StatusAuthorized {
		return s.expireOrArm(ctx, c) // authorized meanwhile by another worker
	}
	return s.drive(ctx, c)
}

// drive takes a claimed consent from INITIATED or AWAITING_AUTHORIZATION to AUTHORIZED or FAILED.
func (s *consentSession) drive(ctx context.Context, c *consent.Consent) error {
	if c.Status() == consent.StatusInitiated {
		var err error
		if c, err = s.open(ctx, c); err != nil || c == nil {
			return err
		}
	}
	// AWAITING_AUTHORIZATION: the bank's consent is known by its id, so a session that took the
	// consent over (after a restart, from a dead worker) goes on polling the same order.
	for {
		wait := s.w.cfg.PollInterval
		if d := c.AuthorizationDeadline(); !d.IsZero() {
			// Wake up when the deadline passes rather than up to a poll interval later.
			wait = min(wait, max(d.Sub(s.w.now())+time.Millisecond, 5*time.Millisecond))
		}
		if err := retry.Sleep(ctx, wait); err != nil {
			return err
		}
		var err error
		if c, err = s.renewClaim(ctx, c); err != nil {
			return err
		}
		// The consent is read again at every poll: the client may have revoked it, the user's
		// deletion revoked it, or another worker ended it.
		if c, err = s.load(ctx); err != nil {
			return err
		}
		switch {
		case c.Status().IsFinal():
			if c.Status() == consent.StatusRevoked {
				s.w.withdraw(ctx, s.company, c.BankConsentID(), s.id)
			}
			return errEnded
		case c.ClaimedBy() != s.w.cfg.WorkerID:
			return errDropped
		case c.Status() == consent.StatusAuthorized:
			return s.expireOrArm(ctx, c)
		}
		if err := s.refuseErased(ctx, c); err != nil {
			return err
		}
		if s.due(c) {
			_, err := s.settleDue(ctx, c, true)
			return err
		}
		bc, err := s.w.cfg.Bank.ConsentStatus(ctx, s.company, c.BankConsentID())
		switch {
		case errors.Is(err, ErrBankConsentUnknown):
			// The bank forgot the consent (a bank restarted with its memory): the person gets
			// a new order, with its own time to sign.
			s.log.Warn("the bank no longer knows the consent; asking for a new one")
			if c, err = s.open(ctx, c); err != nil || c == nil {
				return err
			}
			continue
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			s.log.Warn("reading the consent at the bank failed", "error", err)
			return s.fail(ctx, true, consent.FailureThirdPartyError, messageConsentBankFailed, c.BankConsentID())
		}
		if done, err := s.settle(ctx, c, bc, true); done || err != nil {
			return err
		}
	}
}

// open asks the bank for the consent and records its EID order: INITIATED →
// AWAITING_AUTHORIZATION. It returns a nil consent once the consent has ended.
func (s *consentSession) open(ctx context.Context, c *consent.Consent) (*consent.Consent, error) {
	pn := c.PersonalNumber()
	if pn == nil {
		// refuseErased found the user live, yet the number is gone: its key was destroyed
		// after that look. The erasure's rule applies.
		return nil, s.endForErasedUser(ctx)
	}
	// One bank consent per Samla consent: a retry after a lost answer, or after a crash before
	// the order was recorded, gets the same consent and EID order back. A bank that forgot an
	// awaiting consent is asked for a new one, under a key of its own.
	key := s.id
	if c.Status() != consent.StatusInitiated {
		key = fmt.Sprintf("%s/%d", s.id, c.Version())
	}
	bc, err := s.w.cfg.Bank.CreateConsent(ctx, s.company, BankConsentRequest{
		PersonalNumber: *pn, LoginMethod: c.LoginMethod(), Scope: c.Scope(), Reference: s.id,
		IdempotencyKey: key, Validity: s.w.cfg.Validity,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.log.Warn("opening the consent at the bank failed", "error", err)
		return nil, s.fail(ctx, true, consent.FailureThirdPartyError, messageConsentBankFailed, "")
	}
	if bc.State != BankConsentPending || bc.EIDOrder == nil {
		// Refused at once (another order running, the EID provider down): there is no order
		// to show, so the outcome is recorded without one.
		if bc.State == BankConsentPending {
			bc.State, bc.Outcome = BankConsentFailed, consent.FailureThirdPartyError
		}
		_, err := s.settle(ctx, c, bc, true)
		return nil, err
	}
	now := s.w.now()
	order := consent.AuthorizationOrder{
		BankConsentID: bc.ID, StartedAt: bc.EIDOrder.StartedAt, Deadline: now.Add(s.w.cfg.EIDOrderTimeout),
		AutoStartToken: bc.EIDOrder.AutoStartToken, QRStartToken: bc.EIDOrder.QRStartToken, QRStartSecret: bc.EIDOrder.QRStartSecret,
	}
	if order.StartedAt.IsZero() || !order.Deadline.After(order.StartedAt) {
		order.StartedAt = now
	}
	c, err = s.mutate(ctx, true, func(c *consent.Consent) error { return c.StartAuthorization(order, now) })
	if err != nil {
		// The bank's consent is not in Samla's events, so nothing else would ever withdraw it:
		// the consent was revoked meanwhile, or another worker took it and opens its own.
		if ctx.Err() == nil {
			s.w.withdraw(ctx, s.company, bc.ID, s.id)
		}
		return nil, err
	}
	s.log.Info("consent awaits the person's signature", "deadline", order.Deadline)
	return c, nil
}

// settle records what the bank says of an awaiting consent, and reports whether the consent
// ended (or was authorized) here. A pending bank consent changes nothing.
func (s *consentSession) settle(ctx context.Context, c *consent.Consent, bc BankConsent, mustOwn bool) (bool, error) {
	switch bc.State {
	case BankConsentPending:
		return false, nil
	case BankConsentAuthorized:
		// The bank should authorize only the person the consent was asked for (a signature by
		// anyone else comes back FAILED, AUTHENTICATION_MISMATCH); Samla checks who signed
		// itself too, when the bank says, so that a bank that authorizes whoever signs never
		// gives Samla access to another person's accounts.
		pn := c.PersonalNumber()
		if pn == nil {
			return true, s.endForErasedUser(ctx)
		}
		if bc.Signer != nil && bc.Signer.PersonalNumber != *pn {
			id := bc.ID
			if id == "" {
				id = c.BankConsentID()
			}
			return true, s.fail(ctx, mustOwn, consent.FailureAuthenticationMismatch, messageConsentMismatch, id)
		}
		return true, s.authorize(ctx, mustOwn)
	case BankConsentFailed:
		code := bc.Outcome
		if code == "" {
			code = consent.FailureThirdPartyError
		}
		s.log.Info("the bank did not authorize the consent", "code", code, "reason", bc.FailureReason)
		return true, s.fail(ctx, mustOwn, code, failureMessage(code), "")
	default:
		// Revoked or expired at the bank before Samla saw it authorized.
		s.log.Info("the bank ended the consent before its authorization was seen", "state", bc.State)
		return true, s.fail(ctx, mustOwn, consent.FailureThirdPartyError, messageConsentBankEnded, "")
	}
}

// settleDue settles an awaiting consent whose EID order's deadline passed: one last look at
// the bank tells whether the person signed before the worker noticed; anything else (still
// pending, the bank unreachable) is AUTHENTICATION_TIMEOUT, and the bank's consent is
// withdrawn. done is false when the consent was not due after all (it moved on meanwhile).
func (s *consentSession) settleDue(ctx context.Context, c *consent.Consent, mustOwn bool) (bool, error) {
	if id := c.BankConsentID(); id != "" {
		bc, err := s.w.cfg.Bank.ConsentStatus(ctx, s.company, id)
		switch {
		case err == nil && bc.State != BankConsentPending:
			return s.settle(ctx, c, bc, mustOwn)
		case ctx.Err() != nil:
			return false, ctx.Err()
		}
	}
	var timedOut bool
	c, err := s.mutate(ctx, mustOwn, func(c *consent.Consent) error {
		before := c.Status()
		if err := c.TimeOutAuthorization(s.w.now()); err != nil {
			return err
		}
		timedOut = before != c.Status()
		return nil
	})
	if err != nil {
		return errors.Is(err, errEnded), err
	}
	if !timedOut {
		return false, nil
	}
	s.log.Info("the EID order was not signed in time")
	s.outcome(c)
	s.w.withdraw(ctx, s.company, c.BankConsentID(), s.id)
	return true, nil
}

// authorize records the signature, with the consent's expiry, and arms it.
func (s *consentSession) authorize(ctx context.Context, mustOwn bool) error {
	c, err := s.mutate(ctx, mustOwn, func(c *consent.Consent) error { return c.Authorize(s.w.now(), s.w.cfg.Validity) })
	if err != nil {
		return err
	}
	s.log.Info("consent authorized", "expires_at", c.ExpiresAt())
	s.outcome(c)
	s.w.arm(s.id, c.ExpiresAt())
	return nil
}

// fail ends a consent that is not authorized FAILED with code; a bank consent that may still be
// live (bankConsentID not "") is withdrawn.
func (s *consentSession) fail(ctx context.Context, mustOwn bool, code consent.FailureCode, message, bankConsentID string) error {
	c, err := s.mutate(ctx, mustOwn, func(c *consent.Consent) error { return c.Fail(code, message, s.w.now()) })
	if err != nil {
		return err
	}
	s.log.Info("consent failed", "code", code)
	s.outcome(c)
	s.w.withdraw(ctx, s.company, bankConsentID, s.id)
	return nil
}

// expireOrArm records the expiry of an authorized consent that is due, and arms a timer for
// one that is not.
func (s *consentSession) expireOrArm(ctx context.Context, c *consent.Consent) error {
	if s.w.now().Before(c.ExpiresAt()) {
		s.w.arm(s.id, c.ExpiresAt())
		return nil
	}
	c, err := s.mutate(ctx, false, func(c *consent.Consent) error { return c.Expire(s.w.now()) })
	if err != nil {
		return err
	}
	if c.Status() != consent.StatusExpired {
		return nil
	}
	s.log.Info("consent expired")
	s.outcome(c)
	s.w.withdraw(ctx, s.company, c.BankConsentID(), s.id)
	return nil
}

// refuseErased ends the consent of a deleted user, as the user's deletion does (REVOKED,
// reason USER_DELETED), and returns errEnded then; nil lets the session go on. Nothing
// personal is read: the look is at the key store, and the bank's consent id is public.
func (s *consentSession) refuseErased(ctx context.Context, c *consent.Consent) error {
	if s.w.cfg.Erasures == nil {
		return nil
	}
	erased, err := s.w.cfg.Erasures.Erased(ctx, s.subject)
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return &storeError{fmt.Errorf("is the user of consent %s erased: %w", s.id, err)}
	case !erased:
		return nil
	}
	return s.endForErasedUser(ctx)
}

// endForErasedUser revokes the consent of a deleted user (an authorized one that is due
// expires instead) and withdraws it at the bank; errEnded tells the session to stop.
func (s *consentSession) endForErasedUser(ctx context.Context) error {
	c, err := s.step(ctx, false, func(c *consent.Consent) error {
		now := s.w.now()
		if c.EffectiveStatus(now) == consent.StatusExpired {
			return c.Expire(now)
		}
		return c.Revoke(consent.RevokedUserDeleted, now)
	})
	if err != nil {
		return err
	}
	s.log.Info("consent ended: its user was deleted", "status", c.Status())
	s.outcome(c)
	s.w.withdraw(ctx, s.company, c.BankConsentID(), s.id)
	return errEnded
}

// renewClaim appends a fresh claim when the session has been quiet for half the staleness
// period, so that no other worker takes a live session.
func (s *consentSession) renewClaim(ctx context.Context, c *consent.Consent) (*consent.Consent, error) {
	if s.w.now().Sub(c.UpdatedAt()) < s.w.cfg.StaleClaimAfter/2 {
		return c, nil
	}
	c, err := s.mutate(ctx, true, func(c *consent.Consent) error {
		return c.Claim(s.w.cfg.WorkerID, s.w.now(), s.w.cfg.StaleClaimAfter)
	})
	if errors.Is(err, consent.ErrAlreadyClaimed) {
		return nil, errDropped
	}
	return c, err
}

func (s *consentSession) due(c *consent.Consent) bool {
	d := c.AuthorizationDeadline()
	return c.Status() == consent.StatusAwaitingAuthorization && !d.IsZero() && !s.w.now().Before(d)
}

func (s *consentSession) outcome(c *consent.Consent) {
	if m := s.w.cfg.Metrics; m != nil {
		code := ""
		if e := c.Error(); e != nil {
			code = string(e.Code)
		}
		m.ConsentOutcomes.WithLabelValues(s.company, string(c.Status()), code).Inc()
	}
}

// mutate is one step through the repository's update: the session's rules (a final consent is
// errEnded; with mustOwn, another worker's claim is errDropped) are checked before decide, on
// the consent as stored now. A failing event store is tried again a few times, then reported
// as a *storeError.
func (s *consentSession) mutate(ctx context.Context, mustOwn bool, decide func(*consent.Consent) error) (*consent.Consent, error) {
	return s.step(ctx, mustOwn, decide)
}

func (s *consentSession) step(ctx context.Context, mustOwn bool, decide func(*consent.Consent) error) (*consent.Consent, error) {
	var lastErr error
	for attempt := 1; attempt <= maxStoreAttempts; attempt++ {
		if attempt > 1 {
			if err := retry.Sleep(ctx, storeBackoff.Delay(attempt-1)); err != nil {
				return nil, err
			}
		}
		var refused error
		c, _, err := s.w.cfg.Repo.Update(ctx, s.id, s.meta(), func(c *consent.Consent) error {
			refused = s.check(c, mustOwn)
			if refused == nil {
				refused = decide(c)
			}
			return refused
		})
		switch {
		case err == nil:
			return c, nil
		case refused != nil:
			return c, err
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		lastErr = &storeError{fmt.Errorf("update consent %s: %w", s.id, err)}
		s.log.Debug("event store failed; trying the step again", "attempt", attempt, "error", err)
	}
	return nil, lastErr
}

func (s *consentSession) check(c *consent.Consent, mustOwn bool) error {
	switch {
	case !c.Exists():
		return fmt.Errorf("consent %s has no events", s.id)
	case c.Status().IsFinal():
		return errEnded
	case mustOwn && c.ClaimedBy() != s.w.cfg.WorkerID:
		return errDropped
	}
	return nil
}

func (s *consentSession) load(ctx context.Context) (*consent.Consent, error) {
	c, err := s.w.cfg.Repo.Load(ctx, s.id)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &storeError{fmt.Errorf("load consent %s: %w", s.id, err)}
	}
	return c, nil
}

func (s *consentSession) meta() repository.Meta {
	return repository.Meta{
		Tenant: s.tenant, CorrelationID: s.id, CausationID: s.causation,
		Actor: "connector:" + s.w.cfg.WorkerID,
	}
}

// failureMessage is the client's text for a failure the bank reported.
func failureMessage(code consent.FailureCode) string {
	switch code {
	case consent.FailureAuthenticationCancelled:
		return "The person cancelled the electronic-ID order."
	case consent.FailureAuthenticationTimeout:
		return consent.MessageAuthorizationTimeout
	case consent.FailureAuthenticationMismatch:
		return messageConsentMismatch
	case consent.FailureAuthenticationConflict:
		return "Another electronic-ID order of the person was already running."
	}
	return "The bank could not authorize the consent."
}

// withdraw ends a bank consent Samla no longer uses (best effort): one try now, and on failure
// a few more in the background with backoff. "" is no bank consent.
func (w *ConsentWorker) withdraw(ctx context.Context, companyID, bankConsentID, consentID string) {
	if bankConsentID == "" {
		return
	}
	w.mu.Lock()
	if w.revoking[bankConsentID] || w.pool.stopped {
		w.mu.Unlock()
		return
	}
	w.revoking[bankConsentID] = true
	w.pool.wg.Add(1)
	w.mu.Unlock()
	log := w.log.With("consent", consentID, "company", companyID)
	first := make(chan struct{})
	go func() {
		defer func() {
			w.mu.Lock()
			delete(w.revoking, bankConsentID)
			w.mu.Unlock()
			w.pool.wg.Done()
		}()
		for attempt := 1; ; attempt++ {
			// The first try runs under the caller's context (a consumer that commits after it),
			// the later ones under the worker's.
			tctx, cancel := context.WithCancel(w.pool.ctx)
			if attempt == 1 {
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
			}
			err := w.cfg.Bank.RevokeConsent(tctx, companyID, bankConsentID)
			cancel()
			if attempt == 1 {
				close(first)
			}
			switch {
			case err == nil, errors.Is(err, ErrBankConsentUnknown):
				w.revocation(companyID, "ok")
				log.Info("consent withdrawn at the bank")
				return
			case w.pool.ctx.Err() != nil:
				return
			case attempt >= w.cfg.RevokeAttempts:
				w.revocation(companyID, "failed")
				log.Warn("withdrawing the consent at the bank failed; the bank's own validity ends it", "attempts", attempt, "error", err)
				return
			}
			log.Debug("withdrawing the consent at the bank failed; trying again", "attempt", attempt, "error", err)
			if retry.Sleep(w.pool.ctx, revokeBackoff.Delay(attempt)) != nil {
				return
			}
		}
	}()
	select {
	case <-first:
	case <-ctx.Done():
	}
}

// withdrawRecorded withdraws at the bank the consent a revocation ended, when it had one.
func (w *ConsentWorker) withdrawRecorded(ctx context.Context, consentID string) {
	c, err := w.cfg.Repo.Load(ctx, consentID)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("loading a revoked consent failed; not withdrawn at the bank", "consent", consentID, "error", err)
		}
		return
	}
	if c.Status() != consent.StatusRevoked {
		return
	}
	w.withdraw(ctx, c.Company(), c.BankConsentID(), consentID)
}

func (w *ConsentWorker) revocation(companyID, outcome string) {
	if m := w.cfg.Metrics; m != nil {
		m.BankConsentRevocations.WithLabelValues(companyID, outcome).Inc()
	}
}
