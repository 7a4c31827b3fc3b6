package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/uuids"
)

// UserRepository is the port to the event-sourced users (*repository.Repository[*user.User]
// satisfies it): Update is the one way to change one, Load reads one for a decision elsewhere.
type UserRepository interface {
	Load(ctx context.Context, userUUID string) (*user.User, error)
	Update(ctx context.Context, userUUID string, meta repository.Meta, decide func(*user.User) error,
		opts ...repository.UpdateOption) (*user.User, eventstore.AppendResult, error)
}

// ReservationRepository is the port to the event-sourced externalId reservations
// (*repository.Repository[*user.Reservation] satisfies it).
type ReservationRepository interface {
	Update(ctx context.Context, key string, meta repository.Meta, decide func(*user.Reservation) error,
		opts ...repository.UpdateOption) (*user.Reservation, eventstore.AppendResult, error)
}

// ErrUserNotFound is a user that does not exist or belongs to another client (HTTP 404): a client
// must not learn that another client's user exists.
var ErrUserNotFound = errors.New("user not found")

// SubjectKeys is the part of the key store (eventschema.Keys) that erases data subjects. It must
// be the cache the process opens and seals with, so that this process drops a destroyed key at
// once.
type SubjectKeys interface {
	Get(ctx context.Context, subject string) (eventschema.Key, error)
	Destroy(ctx context.Context, subject string) error
}

// UserCollections lists a client's user's collections that may still run: those the collection
// status read model shows in a status that is not final (a final one there is final for good).
type UserCollections interface {
	UserNonFinalCollectionIDs(ctx context.Context, tenant, userUUID string) ([]string, error)
}

// Erasure is what a user's deletion erases its personal data with, and ends the user's
// collections with.
type Erasure struct {
	Keys SubjectKeys
	// Collections lists the user's collections that may still run, and Ends is their repository:
	// the erasure ends each that the event store shows running (collection.EndForErasedUser), so
	// that none goes on without the personal data it was started with, and none keeps showing
	// its client an EID order or a request for input. A collection the read model does not list
	// yet (or one started while the user was being deleted) is ended by the connector worker,
	// which drives no collection of an erased subject.
	Collections UserCollections
	Ends        CollectionRepository
	// Consents lists the user's consents, and Revokes is their repository: the erasure revokes
	// each that the event store shows live (reason USER_DELETED) before it destroys the user's
	// key, so that no consent of the erased person stays usable or goes on being authorized.
	Consents UserConsents
	Revokes  ConsentRepository
	// Cancellations lists the user's cancellations, and Withdraws is their repository: the
	// erasure withdraws each that the event store shows not final (reason USER_DELETED), so that
	// no power of attorney of the erased person goes on waiting for a signature. Both or neither
	// (a deployment without cancellations); the connector worker withdraws one the list misses,
	// as it sends nothing for an erased subject.
	Cancellations UserCancellations
	Withdraws     CancellationRepository
}

// UserCancellations lists the ids of a client's user's cancellations, final ones included (the
// cancellations read model's Reader).
type UserCancellations interface {
	UserCancellationIDs(ctx context.Context, tenant, userUUID string) ([]string, error)
}

// erasureActor is the actor of what a finished erasure records (FinishErasure).
const erasureActor = "samla:erasure"

// CreateUser is the command behind POST /users.
type CreateUser struct {
	Tenant         string // the authenticated client
	IdempotencyKey string // "" when the client sent none
	ExternalID     string // personal data: never logged
	// RequestHash identifies the request's content, so that a retry with the same key can be told
	// from a different request reusing the key; LegacyRequestHash is the same in the scheme
	// before ("" for none), by which a user an older build created is recognised.
	RequestHash       string
	LegacyRequestHash string
	CorrelationID     string
	RequestID         string // becomes the events' causation id
}

// UserCreated is the outcome of a create: the first response, also when a retry replays it.
type UserCreated struct {
	UserUUID   string
	ExternalID string
	CreatedAt  time.Time
	// Replayed is true when an earlier request with the same Idempotency-Key created it.
	Replayed bool
}

// DeleteUser is the command behind DELETE /users/{userUuid}.
type DeleteUser struct {
	Tenant        string
	UserUUID      string
	CorrelationID string
	RequestID     string
}

// FinishErasure is the command to finish the erasure of a deleted user whose deletion stopped
// before it was done: taken from its user.deleted event by whoever follows those (the erasure
// process manager).
type FinishErasure struct {
	UserUUID      string
	CorrelationID string
	CausationID   string // the user.deleted event
}

// userIdempotencyNamespace is the UUIDv5 namespace of user ids derived from idempotency keys. It
// is fixed forever, and differs from the collections' so that one key used on both routes names
// two different streams.
var userIdempotencyNamespace = uuid.MustParse("9d3c1f0e-5b7a-4c2e-8f61-3a0b9e7d4c15")

// UserIDForKey is the user id of a request with an Idempotency-Key: a retry with the same key
// lands on the same stream. The tenant is part of the name, so two clients' keys never meet.
func UserIDForKey(tenant, key string) string {
	return uuid.NewSHA1(userIdempotencyNamespace, []byte(tenant+"\x00"+key)).String()
}

// maxReserveRounds bounds how often Create looks again at a reservation it found held by a user
// that is not what the reservation says (not created yet, deleted, another externalId): each
// round repairs one such state, and two follow each other at most when a delete races the
// create.
const maxReserveRounds = 4

// UserService creates and deletes users, keeping each client's externalIds unique, and erases a
// deleted user's personal data.
type UserService struct {
	users        UserRepository
	reservations ReservationRepository
	secret       []byte
	erasure      Erasure
	now          func() time.Time
	holdToken    func(userUUID string) string
}

// UserServiceOption adjusts a UserService.
type UserServiceOption func(*UserService)

// WithHoldTokens sets how the token of a user's hold on its externalId's reservation is made
// (domain.HolderSubject). The default is a random UUID, which nothing but the user's own sealed
// personal data links to the user; tests make it predictable.
func WithHoldTokens(token func(userUUID string) string) UserServiceOption {
	return func(s *UserService) { s.holdToken = token }
}

// NewUserService builds the service. secret keys the hashes that name the externalId
// reservations (user.ExternalIDKey): it must be the same on every replica and across restarts,
// as the idempotency fingerprints' key is, or an externalId reserved under one key would be free
// under another. erasure is required: a deletion that erased nothing would leave the user's
// personal data readable for good. now nil means time.Now.
func NewUserService(users UserRepository, reservations ReservationRepository, secret []byte, erasure Erasure, now func() time.Time,
	opts ...UserServiceOption) *UserService {
	if len(secret) == 0 {
		panic("app.NewUserService: the externalId secret is required")
	}
	if (erasure.Cancellations == nil) != (erasure.Withdraws == nil) {
		panic("app.NewUserService: Erasure.Cancellations and Erasure.Withdraws go together")
	}
	if erasure.Keys == nil || erasure.Collections == nil || erasure.Ends == nil || erasure.Consents == nil || erasure.Revokes == nil {
		panic("app.NewUserService: Erasure.Keys, Erasure.Collections, Erasure.Ends, Erasure.Consents and Erasure.Revokes are required")
	}
	if now == nil {
		now = time.Now
	}
	s := &UserService{users: users, reservations: reservations, secret: secret, erasure: erasure, now: now,
		holdToken: func(string) string { return uuid.NewString() }}
	for _, o := range opts {
		o(s)
	}
	return s
}

// IsLiveUser tells whether the client has this user and it is not deleted, from the event store:
// a user is live the moment POST /users answered, before any read model shows it.
func (s *UserService) IsLiveUser(ctx context.Context, clientID, userUUID string) (bool, error) {
	if !uuids.IsCanonical(userUUID) {
		return false, nil // names no stream of ours
	}
	u, err := s.users.Load(ctx, userUUID)
	if err != nil {
		return false, fmt.Errorf("is user %s live: %w", userUUID, err)
	}
	return u.Live(clientID), nil
}

// ReadModelUsers is what the users read model shows of a client's user (projections/users'
// Reader satisfies it): live, deleted, or neither while it has not seen the user.
type ReadModelUsers interface {
	IsLiveUser(ctx context.Context, clientID, userUUID string) (bool, error)
	IsDeletedUser(ctx context.Context, clientID, userUUID string) (bool, error)
}

// SessionLiveness is the liveness check of users' sessions (httpapi.SessionUsers) where the
// event store is at hand (the command role). The users read model answers for every user it
// shows, live or deleted; a user it has not seen yet, created a moment ago, is asked of the event
// store, so that a session issued right after POST /users works at once. Without the event store
// the read model alone is the check. A live user costs one read of the read model; any other,
// two.
type SessionLiveness struct {
	ReadModel ReadModelUsers
	Users     *UserService
}

// IsLiveUser implements httpapi.SessionUsers.
func (l SessionLiveness) IsLiveUser(ctx context.Context, clientID, userUUID string) (bool, error) {
	if live, err := l.ReadModel.IsLiveUser(ctx, clientID, userUUID); err != nil || live {
		return live, err
	}
	deleted, err := l.ReadModel.IsDeletedUser(ctx, clientID, userUUID)
	if err != nil || deleted {
		return false, err
	}
	live, err := l.Users.IsLiveUser(ctx, clientID, userUUID)
	if err != nil {
		return false, fmt.Errorf("session liveness: %w", err)
	}
	return live, nil
}

// Create creates a user, or, for a retry of an earlier request with the same Idempotency-Key and
// content, returns that request's outcome. An externalId that another live user of the client
// holds is user.ErrExternalIDTaken (also when two requests race for it: the reservation's
// optimistic append lets exactly one win); an invalid one is a *domain.FieldError at
// user.FieldExternalID; a key reused with another body is ErrIdempotencyKeyReused.
//
// The externalId is reserved first and the user created after, two appends to two streams. A
// creator that stops in between leaves a reservation whose user has no stream yet; whoever finds
// it next creates that user from what the reservation recorded, so that the externalId is never
// held by nobody.
func (s *UserService) Create(ctx context.Context, cmd CreateUser) (UserCreated, error) {
	if cmd.Tenant == "" {
		return UserCreated{}, fmt.Errorf("create user without a tenant: %w", domain.ErrInvalid)
	}
	if err := user.CheckExternalID(cmd.ExternalID); err != nil {
		return UserCreated{}, fmt.Errorf("create user: %w", err)
	}
	meta := repository.Meta{Tenant: cmd.Tenant, CorrelationID: cmd.CorrelationID, CausationID: cmd.RequestID, Actor: "client:" + cmd.Tenant}
	// Millisecond precision is what responses and envelopes carry, so a replay returns exactly the
	// createdAt of the first response.
	now := s.now().UTC().Truncate(time.Millisecond)

	var id string
	var opts []repository.UpdateOption
	if cmd.IdempotencyKey != "" {
		id = UserIDForKey(cmd.Tenant, cmd.IdempotencyKey)
		// A retry finds its user before it reserves anything: a key reused with another
		// externalId must not take that externalId on its way to the refusal.
		existing, err := s.users.Load(ctx, id)
		if err != nil {
			return UserCreated{}, fmt.Errorf("create user: %w", err)
		}
		if existing.Exists() {
			return replayUser(existing, cmd)
		}
	} else {
		u, err := uuid.NewV7()
		if err != nil {
			return UserCreated{}, fmt.Errorf("create user: new id: %w", err)
		}
		id = u.String()
		opts = append(opts, repository.NewID())
	}

	key := user.ExternalIDKey(s.secret, cmd.Tenant, cmd.ExternalID)
	holderSubject, err := s.reserve(ctx, key, id, cmd, meta, now)
	if err != nil {
		return UserCreated{}, err
	}

	var out UserCreated
	_, _, err = s.users.Update(ctx, id, meta, func(u *user.User) error {
		if u.Exists() {
			// A racing retry with the same key, or whoever completed this user from its
			// reservation (see reserve), stored it first: answer as it was answered.
			first, err := replayUser(u, cmd)
			out = first
			return err
		}
		out = UserCreated{UserUUID: id, ExternalID: cmd.ExternalID, CreatedAt: now}
		return u.Create(user.CreateRequest{UserUUID: id, ClientID: cmd.Tenant, ExternalID: cmd.ExternalID,
			RequestHash: cmd.RequestHash, HolderSubject: holderSubject}, now)
	}, opts...)
	if errors.Is(err, ErrIdempotencyKeyReused) {
		// A racing request with this key and another externalId created the user: this
		// request's reservation names a user that does not have its externalId. Giving it back
		// now spares the next creator the repair.
		_, _, rerr := s.reservations.Update(ctx, key, meta, func(r *user.Reservation) error { return r.Release(id, now) })
		if rerr != nil {
			return UserCreated{}, fmt.Errorf("create user: %w (and releasing its reservation: %w)", err, rerr)
		}
	}
	if err != nil {
		return UserCreated{}, fmt.Errorf("create user: %w", err)
	}
	return out, nil
}

// reserve claims the externalId's reservation for user id and returns the data subject of the
// user's hold on it: a new one (domain.HolderSubject of a random token), or the one its hold has
// when the user holds it already (a racing retry). A reservation held by another user is
// what it says only when that user exists, is live and has this externalId; reserve repairs the
// other states it can find a reservation in, and then looks again:
//   - the holder has no stream: its creator stopped (or has not yet got) between the reservation
//     and the user. The holder is created from what the reservation recorded, with this same
//     externalId (the reservation's key says it is the same), at the time it was reserved; its
//     creator's own append then finds it and answers with it.
//   - the holder was deleted, or holds another externalId (a request that lost a race on its
//     Idempotency-Key): the reservation is released in the holder's name.
//   - the holder was erased before its release: the reservation is released in nobody's name.
func (s *UserService) reserve(ctx context.Context, key, id string, cmd CreateUser, meta repository.Meta, now time.Time) (string, error) {
	claim := user.Claim{ClientID: cmd.Tenant, UserUUID: id, RequestHash: cmd.RequestHash,
		Subject: domain.HolderSubject(s.holdToken(id))}
	for range maxReserveRounds {
		r, _, err := s.reservations.Update(ctx, key, meta, func(r *user.Reservation) error { return r.Reserve(claim, now) })
		var taken *user.TakenError
		if !errors.As(err, &taken) {
			if err != nil {
				return "", fmt.Errorf("create user: reserve its externalId: %w", err)
			}
			holder, _ := r.Holder()
			return holder.Subject, nil
		}
		holder := taken.Holder
		if holder.Erased() {
			// Only a deleted user is erased, and its erasure releases what it held first; a
			// release that did not happen then happens now, in nobody's name.
			_, _, err = s.reservations.Update(ctx, key, meta, func(r *user.Reservation) error { return r.ReleaseErased(now) })
			if err != nil {
				return "", fmt.Errorf("create user: release an erased holder's reservation: %w", err)
			}
			continue
		}
		held, err := s.users.Load(ctx, holder.UserUUID)
		if err != nil {
			return "", fmt.Errorf("create user: load the externalId's holder: %w", err)
		}
		switch {
		case !held.Exists():
			_, _, err = s.users.Update(ctx, holder.UserUUID, meta, func(u *user.User) error {
				if u.Exists() {
					return nil // its creator got there first
				}
				return u.Create(user.CreateRequest{UserUUID: holder.UserUUID, ClientID: holder.ClientID,
					ExternalID: cmd.ExternalID, RequestHash: holder.RequestHash, HolderSubject: holder.Subject}, holder.ReservedAt)
			})
			if err != nil {
				return "", fmt.Errorf("create user: complete the externalId's holder: %w", err)
			}
		case held.Live(cmd.Tenant) && held.ExternalID() == cmd.ExternalID:
			return "", fmt.Errorf("create user: %w", taken)
		default:
			_, _, err = s.reservations.Update(ctx, key, meta, func(r *user.Reservation) error {
				return r.Release(holder.UserUUID, now)
			})
			if err != nil {
				return "", fmt.Errorf("create user: release a stale reservation: %w", err)
			}
		}
	}
	return "", fmt.Errorf("create user: the externalId's reservation kept changing for %d rounds: %w", maxReserveRounds, eventstore.ErrWrongExpectedRevision)
}

// replayUser answers a request whose Idempotency-Key already created a user, or whose user was
// completed by another request (see reserve). The first request is known by its fingerprint,
// kept with the user's personal data: once the user is erased no request is the first, and every
// retry is a key reused, whatever externalId it names, so that none confirms a guessed one.
func replayUser(existing *user.User, cmd CreateUser) (UserCreated, error) {
	if existing.ClientID() != cmd.Tenant || !domain.SameRequest(existing.RequestHash(), cmd.RequestHash, cmd.LegacyRequestHash) {
		return UserCreated{}, ErrIdempotencyKeyReused
	}
	// The request's externalId is the first one: the request hash covers it. The stored one may
	// be erased by now.
	return UserCreated{UserUUID: existing.ID(), ExternalID: cmd.ExternalID, CreatedAt: existing.CreatedAt().UTC(),
		Replayed: cmd.IdempotencyKey != ""}, nil
}

// Delete deletes (anonymises) the client's user: it records user.deleted, releases the user's
// externalId so that it may be used again, ends the user's collections that still run, revokes
// its live consents, and erases the user's personal data everywhere by destroying its data subject's key (erase). Deleting a deleted user succeeds again without
// recording anything and does whatever an earlier delete left undone. An unknown user, or another
// client's, is ErrUserNotFound.
//
// A delete that stops between its steps (a crash, a failing key store) leaves a deleted user
// whose key may survive: a retry finishes it, and so does FinishErasure, which the erasure
// process manager runs for every user.deleted it sees, so that no key survives for good.
func (s *UserService) Delete(ctx context.Context, cmd DeleteUser) error {
	if cmd.Tenant == "" {
		return fmt.Errorf("delete user without a tenant: %w", domain.ErrInvalid)
	}
	if !uuids.IsCanonical(cmd.UserUUID) {
		return fmt.Errorf("delete user: %w", ErrUserNotFound)
	}
	meta := repository.Meta{Tenant: cmd.Tenant, CorrelationID: cmd.CorrelationID, CausationID: cmd.RequestID, Actor: "client:" + cmd.Tenant}
	now := s.now().UTC().Truncate(time.Millisecond)
	u, _, err := s.users.Update(ctx, cmd.UserUUID, meta, func(u *user.User) error {
		if !u.Exists() || u.ClientID() != cmd.Tenant {
			return ErrUserNotFound
		}
		return u.Delete(now)
	})
	if err != nil {
		return fmt.Errorf("delete user %s: %w", cmd.UserUUID, err)
	}
	if err := s.erase(ctx, u, meta, now); err != nil {
		return fmt.Errorf("delete user %s: %w", cmd.UserUUID, err)
	}
	return nil
}

// FinishErasure does what the deletion of a user left undone: the release of its externalId,
// the end of its running collections, the revocation of its live consents and the destruction of
// its key (erase). It does nothing for a user that is erased already (its
// key is destroyed last, so nothing is left then), or not deleted. It is safe to run any number
// of times, also beside the Delete it finishes.
func (s *UserService) FinishErasure(ctx context.Context, cmd FinishErasure) error {
	_, err := s.erasure.Keys.Get(ctx, domain.UserSubject(cmd.UserUUID))
	if errors.Is(err, eventschema.ErrSubjectErased) {
		return nil
	}
	// Any other answer (the key, or an error) is for the load to settle: it opens the user's
	// events with that key, and fails loudly on a lost one.
	u, err := s.users.Load(ctx, cmd.UserUUID)
	if err != nil {
		return fmt.Errorf("finish the erasure of user %s: %w", cmd.UserUUID, err)
	}
	if !u.Deleted() {
		return nil
	}
	meta := repository.Meta{Tenant: u.ClientID(), CorrelationID: cmd.CorrelationID, CausationID: cmd.CausationID, Actor: erasureActor}
	if err := s.erase(ctx, u, meta, s.now().UTC().Truncate(time.Millisecond)); err != nil {
		return fmt.Errorf("finish the erasure of user %s: %w", cmd.UserUUID, err)
	}
	return nil
}

// erase erases a deleted user, in an order that a crash at any point leaves resumable:
//  1. the externalId's reservation is released, so that the externalId may be used again. It
//     needs the externalId, which only the user's key opens: it goes first. An erased user
//     yields none; a creator that then finds the reservation held by the deleted user releases
//     it itself (reserve).
//  2. the user's collections that still run are ended (FAILED, collection.EndForErasedUser):
//     none may go on, or keep asking its client for a signature or input, without the personal
//     data it was started with.
//  3. the user's consents that are still live are revoked (reason USER_DELETED): none may be
//     used for a collection, or go on being authorized, once the person it names is erased.
//  4. the key of the user's hold on its externalId's reservation is destroyed (its own subject,
//     domain.HolderSubject, so that the reservation's stream names no user), then the user's
//     key, erasing its personal data in the event store, the Kafka log and the read models at
//     once; the projections then blank the read models' copies. Being last, a destroyed user
//     key says that the erasure is complete.
//
// Nothing else of a user is sealed under another subject: its collections' personal data is the
// user's (collection.DataSubject).
func (s *UserService) erase(ctx context.Context, u *user.User, meta repository.Meta, now time.Time) error {
	if externalID := u.ExternalID(); externalID != "" {
		key := user.ExternalIDKey(s.secret, u.ClientID(), externalID)
		if _, _, err := s.reservations.Update(ctx, key, meta, func(r *user.Reservation) error {
			return r.Release(u.ID(), now)
		}); err != nil {
			return fmt.Errorf("release its externalId: %w", err)
		}
	}
	ids, err := s.erasure.Collections.UserNonFinalCollectionIDs(ctx, u.ClientID(), u.ID())
	if err != nil {
		return fmt.Errorf("erase: list its running collections: %w", err)
	}
	for _, id := range ids {
		_, _, err := s.erasure.Ends.Update(ctx, id, meta, func(c *collection.Collection) error {
			if !c.Exists() || c.ClientID() != u.ClientID() || c.UserUUID() != u.ID() {
				return nil // a read model's mistake: not this user's to end
			}
			return c.EndForErasedUser(now)
		})
		if err != nil {
			return fmt.Errorf("erase: end collection %s: %w", id, err)
		}
	}
	if err := revokeUserConsents(ctx, s.erasure.Consents, s.erasure.Revokes, u.ClientID(), u.ID(), meta, now); err != nil {
		return fmt.Errorf("erase: %w", err)
	}
	if err := s.withdrawUserCancellations(ctx, u.ClientID(), u.ID(), meta, now); err != nil {
		return fmt.Errorf("erase: %w", err)
	}
	if hold := u.HolderSubject(); hold != "" {
		if err := s.erasure.Keys.Destroy(ctx, hold); err != nil {
			return fmt.Errorf("erase: destroy the key of its hold on its externalId: %w", err)
		}
	}
	if err := s.erasure.Keys.Destroy(ctx, u.DataSubject()); err != nil {
		return fmt.Errorf("erase: destroy its key: %w", err)
	}
	return nil
}

// withdrawUserCancellations withdraws the user's cancellations that are not final.
func (s *UserService) withdrawUserCancellations(ctx context.Context, tenant, userUUID string, meta repository.Meta, now time.Time) error {
	if s.erasure.Cancellations == nil {
		return nil
	}
	ids, err := s.erasure.Cancellations.UserCancellationIDs(ctx, tenant, userUUID)
	if err != nil {
		return fmt.Errorf("list its cancellations: %w", err)
	}
	for _, id := range ids {
		_, _, err := s.erasure.Withdraws.Update(ctx, id, meta, func(c *cancellation.Cancellation) error {
			if !c.Exists() || c.ClientID() != tenant || c.UserUUID() != userUUID || c.Status().IsFinal() {
				return nil // a read model's mistake, or nothing left to withdraw
			}
			return c.Cancel(cancellation.CanceledUserDeleted, now)
		})
		if err != nil {
			return fmt.Errorf("withdraw cancellation %s: %w", id, err)
		}
	}
	return nil
}
