// Users' session tokens: their signing keys, the ports the HTTP layer asks about sessions, and
// the operator's `samla sessions` commands.

package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/sessiontoken"
	"github.com/samla/samla/projections/users"
)

// SessionKeyFile is where generated session signing keys are kept, inside the data dir.
const SessionKeyFile = "session-keys.pem"

// DefaultJWTIssuer is the iss claim of session tokens unless --jwt-issuer names another. A
// deployment that shares its key file with another (it should not) tells their tokens apart by
// giving each its own issuer, e.g. its API's base URL.
const DefaultJWTIssuer = "samla"

// sessionKeyPath is the key file the configuration names: --jwt-key-file, or the data dir's.
func sessionKeyPath(cfg *Config) string {
	if cfg.JWTKeyFile != "" {
		return cfg.JWTKeyFile
	}
	return filepath.Join(cfg.DataDir, SessionKeyFile)
}

// sessionTokens returns the issuer and verifier of session tokens with the configured keys: those
// of --jwt-key-file, which must exist, or else those in the data dir, generated on the first
// start. The keys are read once; a rotation takes effect when the process starts again.
func (s *Service) sessionTokens() (*sessiontoken.Tokens, error) {
	var (
		keys *sessiontoken.KeySet
		err  error
	)
	if s.cfg.JWTKeyFile != "" {
		keys, err = sessiontoken.LoadKeyFile(s.cfg.JWTKeyFile)
	} else {
		var generated bool
		keys, generated, err = sessiontoken.LoadOrCreateKeyFile(sessionKeyPath(s.cfg))
		if generated {
			s.log.Info("generated the session signing key", "key_file", sessionKeyPath(s.cfg), "key_id", keys.SigningKeyID())
		}
		if err == nil && !embeddedEventStore(s.cfg) {
			// Every replica of the API must verify what any of them signed; keys generated per
			// data dir are right only while this is the only replica.
			s.log.Warn("session tokens are signed with keys kept in this data dir; give every API replica the same --jwt-key-file",
				"key_file", sessionKeyPath(s.cfg))
		}
	}
	if err != nil {
		return nil, err
	}
	return sessiontoken.New(keys, sessiontoken.Config{Issuer: s.cfg.JWTIssuer, TTL: s.cfg.SessionTTL})
}

// sessionAuth is what the API authenticates users' sessions with, and issues them with.
type sessionAuth struct {
	tokens *sessiontoken.Tokens
	// users tells whether a token's user is live: the users read model, read on every request
	// (and the event store for a user it has not seen yet, on the command role).
	users httpapi.SessionUsers
	// model is the users read model alone, which DELETE /users/{userUuid} waits on.
	model users.Reader
}

func (s *Service) sessionAuth() (sessionAuth, error) {
	tokens, err := s.sessionTokens()
	if err != nil {
		return sessionAuth{}, err
	}
	// The users read model's reader also finds users by externalId, under the fingerprint key.
	key, err := fingerprintKey(s.cfg)
	if err != nil {
		return sessionAuth{}, err
	}
	model := users.NewReader(s.models.Users, s.keys, key)
	auth := sessionAuth{tokens: tokens, users: model, model: model}
	if s.roles.Command {
		// A user created a moment ago, which the read model has not seen yet, is asked of the
		// event store, so that a session issued right after POST /users works at once.
		svc, err := s.commandUsers()
		if err != nil {
			return sessionAuth{}, err
		}
		auth.users = app.SessionLiveness{ReadModel: model, Users: svc}
	}
	return auth, nil
}

func sessionsCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "sessions", Short: "Manage the keys that sign users' session tokens",
		Long: "The key file (--jwt-key-file, or " + SessionKeyFile + " in the data dir) holds Ed25519 keys; the first signs " +
			"new session tokens and every one verifies them. Running processes read it when they start."}
	keyFileCommand := func(use, short string, args cobra.PositionalArgs, run func(cmd *cobra.Command, path string, args []string) error) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Args: args}
		cfg := bindConfig(c.Flags())
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if _, err := setUp(cfg, stderr); err != nil {
				return err
			}
			return run(cmd, sessionKeyPath(cfg), args)
		}
		return c
	}

	list := keyFileCommand("list-keys", "List the key ids, the signing key first", cobra.NoArgs,
		func(_ *cobra.Command, path string, _ []string) error {
			keys, err := sessiontoken.LoadKeyFile(path)
			if err != nil {
				return err
			}
			for i, id := range keys.KeyIDs() {
				role := "verifies"
				if i == 0 {
					role = "signs"
				}
				fmt.Fprintf(stdout, "%s\t%s\n", id, role)
			}
			return nil
		})

	var stage bool
	rotate := keyFileCommand("rotate-key", "Add a new signing key; the keys before it keep verifying the tokens they signed", cobra.NoArgs,
		func(_ *cobra.Command, path string, _ []string) error {
			id, err := sessiontoken.RotateKeyFile(path, stage)
			if err != nil {
				return err
			}
			what := "signs new session tokens once the processes restart"
			if stage {
				what = "verifies only; make it sign with samla sessions promote-key -- " + id
			}
			fmt.Fprintf(stdout, "added key %s to %s; it %s\n", id, path, what)
			return nil
		})
	rotate.Flags().BoolVar(&stage, "stage", false, "add the new key last, to verify only until promote-key: with several processes, roll the file out to all of them first")

	promote := keyFileCommand("promote-key [--] KID", "Make a key of the file the signing key", cobra.ExactArgs(1),
		func(_ *cobra.Command, path string, args []string) error {
			if err := sessiontoken.PromoteKey(path, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "key %s signs new session tokens once the processes restart\n", args[0])
			return nil
		})

	retire := keyFileCommand("retire-key [--] KID", "Remove a key that no longer signs; tokens it signed stop verifying", cobra.ExactArgs(1),
		func(_ *cobra.Command, path string, args []string) error {
			if err := sessiontoken.RetireKey(path, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "removed key %s from %s\n", args[0], path)
			return nil
		})

	cmd.AddCommand(list, rotate, promote, retire)
	return cmd
}
