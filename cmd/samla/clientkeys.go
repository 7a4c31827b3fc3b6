// A client's API keys (samla clients rotate-key|revoke-key|list-keys): recorded on the client as
// events through the clients service, beside a running service; every API node's key read model
// follows them, and its authentication cache lets a revoked key through for at most
// httpapi.DefaultAuthPositiveTTL after that.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/samla/samla/command/clients"
	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/eventschema"
)

// DefaultKeyGrace is how long the other keys keep working after a rotation unless --grace says
// otherwise: a day to deploy the new key everywhere.
const DefaultKeyGrace = 24 * time.Hour

// RotateClientKey issues a new key to the client and retires its other keys after grace (0:
// revokes them at once). The new key is in the result, to be shown once; the log names key ids
// only.
func RotateClientKey(ctx context.Context, cfg *Config, logger *slog.Logger, clientID string, grace time.Duration) (clients.RotatedKey, error) {
	var rotated clients.RotatedKey
	err := withClientService(ctx, cfg, func(svc *clients.Service, _ eventstore.Store, _ *eventschema.Registry) (err error) {
		rotated, err = svc.RotateKey(ctx, clientID, grace)
		return err
	})
	if err != nil {
		return clients.RotatedKey{}, err
	}
	logger.Info("client API key rotated", "client", clientID, "key_id", rotated.KeyID, "grace", grace.String(),
		"retiring", len(rotated.Retiring), "revoked", len(rotated.Revoked))
	return rotated, nil
}

// RevokeClientKey revokes one of the client's keys by its id.
func RevokeClientKey(ctx context.Context, cfg *Config, logger *slog.Logger, clientID, keyID string) error {
	err := withClientService(ctx, cfg, func(svc *clients.Service, _ eventstore.Store, _ *eventschema.Registry) error {
		return svc.RevokeKey(ctx, clientID, keyID)
	})
	if err != nil {
		return err
	}
	logger.Info("client API key revoked", "client", clientID, "key_id", keyID)
	return nil
}

// ClientKeys lists the client's keys from its events: ids, times and status, never a hash.
func ClientKeys(ctx context.Context, cfg *Config, clientID string) ([]client.APIKey, error) {
	var keys []client.APIKey
	err := withClientService(ctx, cfg, func(svc *clients.Service, _ eventstore.Store, _ *eventschema.Registry) (err error) {
		keys, err = svc.Keys(ctx, clientID)
		return err
	})
	return keys, err
}

// keyStatus is how list-keys shows a key at now.
func keyStatus(k client.APIKey, now time.Time) string {
	switch {
	case k.Revoked:
		return "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
	case k.ValidUntil.IsZero():
		return "active"
	case now.Before(k.ValidUntil):
		return "retiring until " + k.ValidUntil.UTC().Format(time.RFC3339)
	default:
		return "retired " + k.ValidUntil.UTC().Format(time.RFC3339)
	}
}

func printKeys(w io.Writer, keys []client.APIKey, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY ID\tISSUED\tSTATUS")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", k.ID, k.IssuedAt.UTC().Format(time.RFC3339), keyStatus(k, now))
	}
	return tw.Flush()
}

// clientKeyCommands are `samla clients rotate-key`, `revoke-key` and `list-keys`.
func clientKeyCommands(stdout, stderr io.Writer) []*cobra.Command {
	rotate := &cobra.Command{Use: "rotate-key", Short: "Issue a new API key (printed once) and retire the client's other keys after a grace period", Args: cobra.NoArgs,
		Long: "Records client.api-key-issued for a new key and client.api-key-retiring for each other active key: they keep " +
			"working until the grace period ends (--grace 0 revokes them at once). Every API node stops taking a key at its " +
			"end, and a revoked one within seconds, without a restart."}
	rotateCfg := bindConfig(rotate.Flags())
	rotateID := rotate.Flags().String("id", "", "client id")
	grace := rotate.Flags().Duration("grace", DefaultKeyGrace, fmt.Sprintf("how long the other keys, and the sessions they minted, keep working (0 to %s; 0 revokes them at once)", client.MaxKeyGrace))
	rotate.RunE = operatorCommand(rotateCfg, stderr, func(ctx context.Context, logger *slog.Logger) error {
		if *rotateID == "" {
			return errors.New("--id is required")
		}
		rotated, err := RotateClientKey(ctx, rotateCfg, logger, *rotateID, *grace)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "client %s: new API key %s (shown once): %s\n", *rotateID, rotated.KeyID, rotated.Key)
		for _, k := range rotated.Retiring {
			fmt.Fprintf(stdout, "  key %s works until %s\n", k.ID, k.ValidUntil.UTC().Format(time.RFC3339))
		}
		for _, id := range rotated.Revoked {
			fmt.Fprintf(stdout, "  key %s revoked\n", id)
		}
		return nil
	})

	revoke := &cobra.Command{Use: "revoke-key", Short: "Revoke one of a client's API keys (and end the sessions it minted)", Args: cobra.NoArgs,
		Long: "Records client.api-key-revoked; every API node refuses the key (401) within seconds, without a restart. " +
			"samla clients list-keys shows the key ids."}
	revokeCfg := bindConfig(revoke.Flags())
	revokeID := revoke.Flags().String("id", "", "client id")
	revokeKey := revoke.Flags().String("key-id", "", "the key's id (samla clients list-keys)")
	revoke.RunE = operatorCommand(revokeCfg, stderr, func(ctx context.Context, logger *slog.Logger) error {
		if *revokeID == "" || *revokeKey == "" {
			return errors.New("--id and --key-id are required")
		}
		if err := RevokeClientKey(ctx, revokeCfg, logger, *revokeID, *revokeKey); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "client %s: key %s revoked\n", *revokeID, *revokeKey)
		return nil
	})

	list := &cobra.Command{Use: "list-keys", Short: "List a client's API keys: ids and status, never the keys or their hashes", Args: cobra.NoArgs}
	listCfg := bindConfig(list.Flags())
	listID := list.Flags().String("id", "", "client id")
	list.RunE = operatorCommand(listCfg, stderr, func(ctx context.Context, _ *slog.Logger) error {
		if *listID == "" {
			return errors.New("--id is required")
		}
		keys, err := ClientKeys(ctx, listCfg, *listID)
		if err != nil {
			return err
		}
		return printKeys(stdout, keys, time.Now())
	})
	return []*cobra.Command{rotate, revoke, list}
}
