package worker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	dcompany "github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
)

// erasingEnv is an env whose collections are sealed as the running service seals them, and
// whose workers learn of erased subjects from the same key store.
func erasingEnv(t *testing.T, o envOptions) (*env, *keystore.Memory) {
	t.Helper()
	e := newEnv(t, o)
	keys := keystore.NewMemory()
	e.repo = repository.New(e.store, e.reg, collection.Kind, repository.WithKeys(keys))
	return e, keys
}

// startForUser records a collection made for userUUID, as POST /collections with a userUuid
// does.
func (e *env) startForUser(userUUID, companyID, loginMethod, pn string) (string, eventschema.Envelope) {
	e.t.Helper()
	ctx := context.Background()
	co, err := sandbox.Catalog().Get(companyID)
	if err != nil {
		e.t.Fatal(err)
	}
	n, err := personnummer.Parse(pn, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	id := uuid.NewString()
	req := collection.StartRequest{CollectionID: id, ClientID: clientID, Company: co.ForCollection(), LoginMethod: loginMethod,
		APIVersion: "2026-04-01", UserUUID: userUUID, PersonalNumber: n, RequestHash: "h"}
	meta := repository.Meta{Tenant: clientID, CorrelationID: "req-" + id, Actor: "client:" + clientID}
	if _, _, err := e.repo.Update(ctx, id, meta, func(c *collection.Collection) error { return c.Start(req, time.Now()) }, repository.NewID()); err != nil {
		e.t.Fatal(err)
	}
	envs, err := e.store.ReadStream(ctx, collection.StreamName(id), 0, 1)
	if err != nil {
		e.t.Fatal(err)
	}
	return id, envs[0]
}

// assertEndedForErasure: the collection ended FAILED with the erasure's message, asking nothing
// of the client.
func assertEndedForErasure(t *testing.T, e *env, id string) {
	t.Helper()
	c := e.waitFinal(id)
	cur := c.Current()
	if c.Status() != collection.StatusFailed || cur.Message != collection.MessageUserErased {
		t.Fatalf("status %s %q, want FAILED for the erasure (statuses %v)", c.Status(), cur.Message, e.statuses(id))
	}
	if cur.EIDOrder != nil || cur.Deadline != nil || len(cur.RequiredInputTypes) > 0 || len(cur.InstructionRequestIDs) > 0 || cur.Personal != nil {
		t.Fatalf("the ended collection still asks something of the client: %+v", cur)
	}
}

// TestAnErasedUsersCollectionIsNotDriven: a collection whose user was deleted before a worker
// took it (one the erasure did not know of, or one started while the user was being deleted) is
// ended at once: no claim, no login with a personal number that is gone.
func TestAnErasedUsersCollectionIsNotDriven(t *testing.T) {
	for _, via := range []string{"collection.started", "a sweep"} {
		t.Run(via, func(t *testing.T) {
			e, keys := erasingEnv(t, envOptions{})
			const userUUID = "0190f4a2-7777-7b3a-9a51-2f1e3d4c5b6a"
			id, started := e.startForUser(userUUID, insurer, mock, tolvan)
			if err := keys.Destroy(context.Background(), domain.UserSubject(userUUID)); err != nil {
				t.Fatal(err)
			}
			cfg := e.config("w1")
			cfg.Erasures = keystore.Erasures{Keys: keys}
			if via == "a sweep" {
				cfg.Active = e.nonFinal()
				w := e.worker(cfg)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go func() { _ = w.Run(ctx) }()
			} else {
				e.handle(e.worker(cfg), started)
			}
			assertEndedForErasure(t, e, id)
			if got := openedStatuses(t, e, keys, id); !slices.Equal(got, []collection.Status{collection.StatusFailed}) {
				t.Fatalf("statuses %v: the session went on", got)
			}
			if claims := e.claims(id); len(claims) != 0 {
				t.Fatalf("claimed by %v", claims)
			}
		})
	}
}

// TestAUserErasedWhileItsCollectionWaits: a collection waiting for its user's signature ends at
// the session's next look once the user is deleted; whoever signs the still-open EID order then
// gets nothing collected.
func TestAUserErasedWhileItsCollectionWaits(t *testing.T) {
	e, keys := erasingEnv(t, envOptions{sandbox: []sandbox.Option{sandbox.WithEIDOrderTimeout(time.Minute)}})
	cfg := e.config("w1")
	cfg.EIDOrderTimeout = time.Minute
	cfg.Erasures = keystore.Erasures{Keys: keys}
	w := e.worker(cfg)
	const userUUID = "0190f4a2-8888-7b3a-9a51-2f1e3d4c5b6a"
	id, started := e.startForUser(userUUID, insurer, dcompany.LoginEIDOtherDevice, pnOtherDevice)
	e.handle(w, started)
	e.waitFor(id, "WAITING_FOR_USER_ACTION", func(c *collection.Collection) bool { return c.Status() == S.Waiting })

	if err := keys.Destroy(context.Background(), domain.UserSubject(userUUID)); err != nil {
		t.Fatal(err)
	}
	assertEndedForErasure(t, e, id)
	_, _ = e.sb.EID().SignByReference(id, time.Now()) // the ended session cancelled the order: an error
	time.Sleep(100 * time.Millisecond)                // a session that went on would record its data by now
	if got := openedStatuses(t, e, keys, id); !slices.Equal(got, []collection.Status{S.Login, S.Waiting, collection.StatusFailed}) {
		t.Fatalf("statuses %v", got)
	}
	waitUntil(t, "the session to stop", func() bool { return w.Running() == 0 })
}

// openedStatuses lists the statuses a sealed collection moved to, in order.
func openedStatuses(t *testing.T, e *env, keys eventschema.Keys, id string) []collection.Status {
	t.Helper()
	var out []collection.Status
	for _, env := range e.envelopes(id) {
		if env.Type != collection.EventStatusChanged {
			continue
		}
		var err error
		if env.Payload, _, err = eventschema.OpenPersonal(context.Background(), keys, env.Payload); err != nil {
			t.Fatal(err)
		}
		ev, err := e.reg.Decode(env)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.(collection.StatusChanged).To)
	}
	return out
}
