package user_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/domaintest"
	"github.com/samla/samla/domain/user"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

const userID = "0190f4a2-7c1e-7b3a-9a51-2f1e3d4c5b6a"

func created() user.Created {
	return user.Created{UserUUID: userID, ClientID: "acme", CreatedAt: now,
		Personal: &user.CreatedPerson{ExternalID: "customer-42", RequestHash: "hash-1", HolderSubject: holderSubject(userID)}}
}

func createReq() user.CreateRequest {
	return user.CreateRequest{UserUUID: userID, ClientID: "acme", ExternalID: "customer-42", RequestHash: "hash-1",
		HolderSubject: holderSubject(userID)}
}

func TestCreate(t *testing.T) {
	t.Run("records the user with its externalId in the personal part", func(t *testing.T) {
		domaintest.For(t, user.Kind).
			When(func(u *user.User) error { return u.Create(createReq(), now.In(time.FixedZone("CET", 3600))) }).
			Then(created())
	})
	t.Run("a user that exists is a conflict", func(t *testing.T) {
		domaintest.For(t, user.Kind).Given(created()).
			When(func(u *user.User) error { return u.Create(createReq(), now) }).
			ThenError(domain.ErrConflict)
	})
	for _, tc := range []struct {
		name, externalID string
	}{
		{"empty", ""},
		{"too long", strings.Repeat("x", user.MaxExternalIDLength+1)},
		{"a control character", "customer\n42"},
		{"a tab", "customer\t42"},
		{"not UTF-8", "customer\xff42"},
		{"a replacement character", "customer\uFFFD42"},
		{"a format character", "customer\u200B42"},
	} {
		t.Run("an externalId that is "+tc.name+" is refused", func(t *testing.T) {
			req := createReq()
			req.ExternalID = tc.externalID
			domaintest.For(t, user.Kind).
				When(func(u *user.User) error { return u.Create(req, now) }).
				ThenFieldError(user.FieldExternalID)
		})
	}
	t.Run("the longest externalId, in characters, and any printable text are taken as they are", func(t *testing.T) {
		req := createReq()
		req.ExternalID = " " + strings.Repeat("å", user.MaxExternalIDLength-2) + " "
		want := created()
		want.Personal.ExternalID = req.ExternalID
		domaintest.For(t, user.Kind).
			When(func(u *user.User) error { return u.Create(req, now) }).
			Then(want)
	})
	t.Run("ids are required", func(t *testing.T) {
		noUser, noClient := createReq(), createReq()
		noUser.UserUUID, noClient.ClientID = "", ""
		domaintest.For(t, user.Kind).When(func(u *user.User) error { return u.Create(noUser, now) }).ThenFieldError(user.FieldUserUUID)
		domaintest.For(t, user.Kind).When(func(u *user.User) error { return u.Create(noClient, now) }).ThenFieldError(user.FieldClientID)
	})
}

func TestDelete(t *testing.T) {
	later := now.Add(time.Hour)
	t.Run("records the deletion", func(t *testing.T) {
		domaintest.For(t, user.Kind).Given(created()).
			When(func(u *user.User) error { return u.Delete(later) }).
			Then(user.Deleted{DeletedAt: later})
	})
	t.Run("deleting a deleted user records nothing", func(t *testing.T) {
		domaintest.For(t, user.Kind).Given(created(), user.Deleted{DeletedAt: later}).
			When(func(u *user.User) error { return u.Delete(later.Add(time.Hour)) }).
			Then()
	})
	t.Run("a user that was never created cannot be deleted", func(t *testing.T) {
		domaintest.For(t, user.Kind).
			When(func(u *user.User) error { return u.Delete(later) }).
			ThenError(user.ErrNotCreated)
	})
}

func TestState(t *testing.T) {
	u := user.Kind.New()
	if err := domain.Rehydrate(u, created()); err != nil {
		t.Fatal(err)
	}
	if !u.Exists() || u.ID() != userID || u.ClientID() != "acme" || u.ExternalID() != "customer-42" ||
		u.RequestHash() != "hash-1" || u.HolderSubject() != holderSubject(userID) || !u.CreatedAt().Equal(now) || u.Deleted() ||
		!u.Live("acme") || u.Live("globex") {
		t.Fatalf("created user %+v", u)
	}
	if u.DataSubject() != "user-"+userID {
		t.Fatalf("data subject %q", u.DataSubject())
	}
	if err := domain.Rehydrate(u, user.Deleted{DeletedAt: now}); err != nil {
		t.Fatal(err)
	}
	if !u.Deleted() || u.Live("acme") || !u.DeletedAt().Equal(now) {
		t.Fatalf("deleted user %+v", u)
	}

	// An erased user's created event has no personal part: it folds, without an externalId.
	erased := created()
	erased.Personal = nil
	e := user.Kind.New()
	if err := domain.Rehydrate(e, erased); err != nil {
		t.Fatal(err)
	}
	if e.ExternalID() != "" || e.RequestHash() != "" || e.HolderSubject() != "" || !e.Exists() {
		t.Fatalf("erased user %+v", e)
	}
	if err := domain.Rehydrate(user.Kind.New(), user.ExternalIDReserved{}); err == nil {
		t.Fatal("a user applied a reservation's event")
	}
}

func reserved(userUUID string) user.ExternalIDReserved {
	return user.ExternalIDReserved{ClientID: "acme", ReservedAt: now,
		Personal: &user.ReservedBy{UserUUID: userUUID, RequestHash: "hash-1", Subject: holderSubject(userUUID)}}
}

// holderSubject is the subject of a user's hold in these tests.
func holderSubject(userUUID string) string { return domain.HolderSubject("token-of-" + userUUID) }

func claim(userUUID, hash string) user.Claim {
	return user.Claim{ClientID: "acme", UserUUID: userUUID, RequestHash: hash, Subject: holderSubject(userUUID)}
}

func released(userUUID string) user.ExternalIDReleased {
	return user.ExternalIDReleased{ReleasedAt: now, Personal: &user.ReleasedBy{UserUUID: userUUID}}
}

func TestReserve(t *testing.T) {
	const other = "0190f4a2-0000-7b3a-9a51-2f1e3d4c5b6a"
	t.Run("a free externalId is reserved", func(t *testing.T) {
		domaintest.For(t, user.ReservationKind).
			When(func(r *user.Reservation) error { return r.Reserve(claim(userID, "hash-1"), now) }).
			Then(reserved(userID))
	})
	t.Run("its holder gets it again without a new event", func(t *testing.T) {
		domaintest.For(t, user.ReservationKind).Given(reserved(userID)).
			When(func(r *user.Reservation) error { return r.Reserve(claim(userID, "hash-2"), now) }).
			Then()
	})
	t.Run("another user is refused and told who holds it", func(t *testing.T) {
		domaintest.For(t, user.ReservationKind).Given(reserved(userID)).
			When(func(r *user.Reservation) error { return r.Reserve(claim(other, "hash-2"), now) }).
			ThenError(user.ErrExternalIDTaken)
		r := user.ReservationKind.New()
		if err := domain.Rehydrate(r, reserved(userID)); err != nil {
			t.Fatal(err)
		}
		var taken *user.TakenError
		if err := r.Reserve(claim(other, "hash-2"), now); !errors.As(err, &taken) || taken.Holder.UserUUID != userID ||
			taken.Holder.RequestHash != "hash-1" || !taken.Holder.ReservedAt.Equal(now) || !errors.Is(err, domain.ErrConflict) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("a released externalId is reserved again", func(t *testing.T) {
		domaintest.For(t, user.ReservationKind).
			Given(reserved(userID), released(userID)).
			When(func(r *user.Reservation) error { return r.Reserve(claim(other, "hash-2"), now) }).
			Then(user.ExternalIDReserved{ClientID: "acme", ReservedAt: now,
				Personal: &user.ReservedBy{UserUUID: other, RequestHash: "hash-2", Subject: holderSubject(other)}})
	})
	t.Run("a reservation needs a user, a client and a subject", func(t *testing.T) {
		domaintest.For(t, user.ReservationKind).
			When(func(r *user.Reservation) error { return r.Reserve(claim("", "hash-1"), now) }).
			ThenError(domain.ErrInvalid)
		noSubject := claim(userID, "hash-1")
		noSubject.Subject = ""
		domaintest.For(t, user.ReservationKind).
			When(func(r *user.Reservation) error { return r.Reserve(noSubject, now) }).
			ThenError(domain.ErrInvalid)
	})
}

func TestRelease(t *testing.T) {
	const other = "0190f4a2-0000-7b3a-9a51-2f1e3d4c5b6a"
	t.Run("its holder releases it", func(t *testing.T) {
		domaintest.For(t, user.ReservationKind).Given(reserved(userID)).
			When(func(r *user.Reservation) error { return r.Release(userID, now) }).
			Then(released(userID))
	})
	t.Run("a late release never frees the next holder's externalId", func(t *testing.T) {
		domaintest.For(t, user.ReservationKind).
			Given(reserved(userID), released(userID), reserved(other)).
			When(func(r *user.Reservation) error { return r.Release(userID, now) }).
			Then()
	})
	t.Run("releasing a free externalId records nothing", func(t *testing.T) {
		domaintest.For(t, user.ReservationKind).
			When(func(r *user.Reservation) error { return r.Release(userID, now) }).
			Then()
	})
}

// TestErasedHolder: once a holder's personal data is erased, its reservation's events no longer
// say who it was. The reservation still folds (held by an erased holder, or released), its
// events seal each holder's part under that holder's own subject, and an erased holder is
// released in nobody's name.
func TestErasedHolder(t *testing.T) {
	const other = "0190f4a2-0000-7b3a-9a51-2f1e3d4c5b6a"
	erasedReserved, erasedReleased := reserved(userID), released(userID)
	erasedReserved.Personal, erasedReleased.Personal = nil, nil

	t.Run("held by an erased holder", func(t *testing.T) {
		r := user.ReservationKind.New()
		if err := domain.Rehydrate(r, erasedReserved); err != nil {
			t.Fatal(err)
		}
		holder, held := r.Holder()
		if !held || !holder.Erased() || holder.ClientID != "acme" || holder.RequestHash != "" {
			t.Fatalf("holder %+v held %v", holder, held)
		}
		var taken *user.TakenError
		if err := r.Reserve(claim(other, "hash-2"), now); !errors.As(err, &taken) || !taken.Holder.Erased() ||
			strings.Contains(err.Error(), userID) {
			t.Fatalf("reserve against an erased holder: %v", err)
		}
	})
	t.Run("an erased holder is released in nobody's name", func(t *testing.T) {
		domaintest.For(t, user.ReservationKind).Given(erasedReserved).
			When(func(r *user.Reservation) error { return r.ReleaseErased(now) }).
			Then(user.ExternalIDReleased{ReleasedAt: now})
		domaintest.For(t, user.ReservationKind).Given(erasedReserved).
			When(func(r *user.Reservation) error { return r.Release("", now) }).
			Then()
	})
	t.Run("a holder that is not erased is not released as one", func(t *testing.T) {
		domaintest.For(t, user.ReservationKind).Given(reserved(userID)).
			When(func(r *user.Reservation) error { return r.ReleaseErased(now) }).
			Then()
	})
	t.Run("an erased history folds", func(t *testing.T) {
		domaintest.For(t, user.ReservationKind).Given(erasedReserved, erasedReleased).
			When(func(r *user.Reservation) error { return r.Reserve(claim(other, "hash-2"), now) }).
			Then(user.ExternalIDReserved{ClientID: "acme", ReservedAt: now,
				Personal: &user.ReservedBy{UserUUID: other, RequestHash: "hash-2", Subject: holderSubject(other)}})
	})
	t.Run("each event is sealed under the subject of the hold it is about", func(t *testing.T) {
		r := user.ReservationKind.New()
		if err := r.Reserve(claim(userID, "hash-1"), now); err != nil {
			t.Fatal(err)
		}
		if r.DataSubject() != holderSubject(userID) {
			t.Fatalf("reserve: subject %q", r.DataSubject())
		}
		domain.MarkStored(r)
		if err := r.Release(userID, now); err != nil || r.DataSubject() != holderSubject(userID) {
			t.Fatalf("release: subject %q, %v", r.DataSubject(), err)
		}
		domain.MarkStored(r)
		if err := r.Reserve(claim(other, "hash-2"), now); err != nil || r.DataSubject() != holderSubject(other) {
			t.Fatalf("the next holder: subject %q, %v", r.DataSubject(), err)
		}
		// A hold of version 1 named no subject of its own: its release is sealed under the
		// holder's own subject.
		old := user.ReservationKind.New()
		v1 := reserved(userID)
		v1.Personal.Subject = ""
		if err := domain.Rehydrate(old, v1); err != nil {
			t.Fatal(err)
		}
		if err := old.Release(userID, now); err != nil || old.DataSubject() != domain.UserSubject(userID) {
			t.Fatalf("release of a hold of version 1: subject %q, %v", old.DataSubject(), err)
		}
	})
}

func TestExternalIDKey(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	k := user.ExternalIDKey(secret, "acme", "customer-42")
	if len(k) != 64 || strings.Contains(k, "customer") {
		t.Fatalf("key %q", k)
	}
	for _, other := range []string{
		user.ExternalIDKey(secret, "globex", "customer-42"),                                  // another client
		user.ExternalIDKey(secret, "acme", "customer-43"),                                    // another externalId
		user.ExternalIDKey([]byte("another secret 0123456789abcdef"), "acme", "customer-42"), // another deployment
		user.ExternalIDKey(secret, "acme\x00customer-42", ""),                                // the parts do not run into each other
	} {
		if other == k {
			t.Fatalf("keys collide: %s", k)
		}
	}
	if user.ExternalIDKey(secret, "acme", "customer-42") != k {
		t.Fatal("the key is not stable")
	}
}
