package clients_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/command/clients"
	"github.com/samla/samla/command/commandtest"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/eventschema"
)

// Command-level scenarios of the operator's key commands: rotation (a new key, the others
// retired after a grace or revoked at once), revocation by key id, and the list of keys.

const oldKey = "samla_acme_0123456789abcdef0123456789abcdef"

var oldIssued = client.APIKeyIssued{KeyID: "k-old", KeyHash: client.HashAPIKey(oldKey), IssuedAt: t0.Add(-time.Hour)}

// appendedBy runs cmd and returns the events it appended to the scenario's store. Rotation draws
// a random key, so its events are compared once the key is known, not given to Then beforehand.
func appendedBy(t *testing.T, sc *commandtest.Scenario, cmd func(context.Context) error) []any {
	t.Helper()
	ctx := context.Background()
	before, err := sc.Store().ReadAll(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var after uint64
	if len(before) > 0 {
		after = before[len(before)-1].Position
	}
	if err := cmd(ctx); err != nil {
		t.Fatalf("command: %v", err)
	}
	envs, err := sc.Store().ReadAll(ctx, after, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(envs) > 0 && envs[0].Stream != client.StreamName("acme") {
		t.Fatalf("appended to %s", envs[0].Stream)
	}
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	events, err := reg.DecodeAll(envs)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]any, len(events))
	for i, e := range events {
		out[i] = e
	}
	return out
}

func TestScenarioRotateKey(t *testing.T) {
	t.Run("a new key, the old one retiring after the grace, in one append", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.Given(client.StreamName("acme"), acmeRegistered, oldIssued)
		appendsBefore := sc.Store().Appends()
		var rotated clients.RotatedKey
		got := appendedBy(t, sc, func(ctx context.Context) (err error) {
			rotated, err = svc.RotateKey(ctx, "acme", 24*time.Hour)
			return err
		})
		if !strings.HasPrefix(rotated.Key, "samla_acme_") || len(rotated.Key) != len("samla_acme_")+64 || rotated.KeyID == "" {
			t.Fatalf("rotated %q (id %q)", rotated.Key, rotated.KeyID)
		}
		want := []any{
			client.APIKeyIssued{KeyID: rotated.KeyID, KeyHash: client.HashAPIKey(rotated.Key), IssuedAt: t0},
			client.APIKeyRetiring{KeyID: "k-old", ValidUntil: t0.Add(24 * time.Hour), At: t0},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("appended %#v\nwant %#v", got, want)
		}
		if n := sc.Store().Appends() - appendsBefore; n != 1 {
			t.Fatalf("%d appends", n)
		}
		if len(rotated.Retiring) != 1 || rotated.Retiring[0].ID != "k-old" || !rotated.Retiring[0].ValidUntil.Equal(t0.Add(24*time.Hour)) || len(rotated.Revoked) != 0 {
			t.Fatalf("rotated %+v", rotated)
		}
	})
	t.Run("a zero grace revokes the old key at once", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.Given(client.StreamName("acme"), acmeRegistered, oldIssued)
		var rotated clients.RotatedKey
		got := appendedBy(t, sc, func(ctx context.Context) (err error) {
			rotated, err = svc.RotateKey(ctx, "acme", 0)
			return err
		})
		want := []any{
			client.APIKeyIssued{KeyID: rotated.KeyID, KeyHash: client.HashAPIKey(rotated.Key), IssuedAt: t0},
			client.APIKeyRevoked{KeyID: "k-old", RevokedAt: t0},
		}
		if !reflect.DeepEqual(got, want) || len(rotated.Revoked) != 1 || rotated.Revoked[0] != "k-old" || len(rotated.Retiring) != 0 {
			t.Fatalf("appended %#v, rotated %+v", got, rotated)
		}
	})
	t.Run("a key retiring earlier keeps its end; a revoked one is left alone", func(t *testing.T) {
		sc, svc := securityScenario(t)
		const revokedKey = "samla_acme_ffffffffffffffffffffffffffffffff"
		sc.Given(client.StreamName("acme"), acmeRegistered, oldIssued,
			client.APIKeyRetiring{KeyID: "k-old", ValidUntil: t0.Add(time.Hour), At: t0},
			client.APIKeyIssued{KeyID: "k-gone", KeyHash: client.HashAPIKey(revokedKey), IssuedAt: t0},
			client.APIKeyRevoked{KeyID: "k-gone", RevokedAt: t0})
		var rotated clients.RotatedKey
		got := appendedBy(t, sc, func(ctx context.Context) (err error) {
			rotated, err = svc.RotateKey(ctx, "acme", 48*time.Hour)
			return err
		})
		want := []any{client.APIKeyIssued{KeyID: rotated.KeyID, KeyHash: client.HashAPIKey(rotated.Key), IssuedAt: t0}}
		if !reflect.DeepEqual(got, want) || len(rotated.Retiring) != 1 || !rotated.Retiring[0].ValidUntil.Equal(t0.Add(time.Hour)) {
			t.Fatalf("appended %#v, rotated %+v", got, rotated)
		}
	})
	t.Run("refused", func(t *testing.T) {
		for name, tc := range map[string]struct {
			id     string
			grace  time.Duration
			target error
		}{
			"a negative grace":             {"acme", -time.Second, domain.ErrInvalid},
			"a grace above the maximum":    {"acme", client.MaxKeyGrace + time.Second, domain.ErrInvalid},
			"a client that does not exist": {"nobody", time.Hour, domain.ErrConflict},
		} {
			t.Run(name, func(t *testing.T) {
				sc, svc := securityScenario(t)
				sc.Given(client.StreamName("acme"), acmeRegistered, oldIssued).
					When(func(ctx context.Context) error { _, err := svc.RotateKey(ctx, tc.id, tc.grace); return err }).
					ThenError(tc.target)
			})
		}
	})
}

func TestScenarioRevokeKey(t *testing.T) {
	revoke := func(svc *clients.Service, id, keyID string) func(context.Context) error {
		return func(ctx context.Context) error { return svc.RevokeKey(ctx, id, keyID) }
	}
	t.Run("revoked by its id", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.Given(client.StreamName("acme"), acmeRegistered, oldIssued).When(revoke(svc, "acme", "k-old")).
			Then(client.APIKeyRevoked{KeyID: "k-old", RevokedAt: t0})
	})
	t.Run("a retiring key is revoked before its end", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.Given(client.StreamName("acme"), acmeRegistered, oldIssued,
			client.APIKeyRetiring{KeyID: "k-old", ValidUntil: t0.Add(time.Hour), At: t0}).
			When(revoke(svc, "acme", "k-old")).Then(client.APIKeyRevoked{KeyID: "k-old", RevokedAt: t0})
	})
	t.Run("revoked twice records once", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.Given(client.StreamName("acme"), acmeRegistered, oldIssued, client.APIKeyRevoked{KeyID: "k-old", RevokedAt: t0}).
			When(revoke(svc, "acme", "k-old")).Then()
	})
	t.Run("a key id of another client, and a client that does not exist", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.Given(client.StreamName("acme"), acmeRegistered, oldIssued).
			Given(client.StreamName("beta"), client.Registered{ClientID: "beta", Name: "Beta", RegisteredAt: t0}).
			When(revoke(svc, "beta", "k-old")).ThenError(domain.ErrConflict)
		sc.When(revoke(svc, "nobody", "k-old")).ThenError(domain.ErrConflict)
	})
}

func TestKeys(t *testing.T) {
	sc, svc := securityScenario(t)
	sc.Given(client.StreamName("acme"), acmeRegistered, oldIssued,
		client.APIKeyIssued{KeyID: "k-new", KeyHash: client.HashAPIKey("samla_acme_new_0000000000000000000000000"), IssuedAt: t0},
		client.APIKeyRetiring{KeyID: "k-old", ValidUntil: t0.Add(time.Hour), At: t0})
	keys, err := svc.Keys(context.Background(), "acme")
	want := []client.APIKey{{ID: "k-old", IssuedAt: oldIssued.IssuedAt, ValidUntil: t0.Add(time.Hour)}, {ID: "k-new", IssuedAt: t0}}
	if err != nil || !reflect.DeepEqual(keys, want) {
		t.Fatalf("Keys(acme) = %+v, %v", keys, err)
	}
	if _, err := svc.Keys(context.Background(), "nobody"); !errors.Is(err, clients.ErrUnknownClient) {
		t.Fatalf("Keys(nobody): %v", err)
	}
}
