package kafka

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/samla/samla/platform/secretfile"
)

// The embedded broker's one SASL user. Its password is generated on the first start into
// PasswordFileName in the broker's data directory and read from there on every later start;
// the broker accepts no other user.
const (
	EmbeddedUser      = "samla"
	EmbeddedMechanism = MechanismScramSHA512
	// PasswordFileName is the password file in the broker's data directory: 64 hex digits
	// (32 random bytes) and a newline, mode 0600.
	PasswordFileName = "sasl-password"
	// kfakeSASLFile is where kfake persists its SASL users; see Embedded.
	kfakeSASLFile = "sasl.json"
	// passwordBytes is how many random bytes the generated password holds.
	passwordBytes = 32
)

// loadOrCreatePassword returns the password in path, creating the file with a fresh random
// password if it does not exist. The file must be a regular file that only its owner can read
// or write, holding what this function writes; anything else is an error rather than a
// silent repair, since it means someone else may have read or chosen the credential.
func loadOrCreatePassword(path string) (string, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return createPassword(path)
	case err != nil:
		return "", fmt.Errorf("sasl password file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("sasl password file %s is not a regular file (%s)", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("sasl password file %s has mode %04o: others than its owner may read or change it; "+
			"delete it to have a new password generated, or chmod 600 it if it is known to be unread", path, perm)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("sasl password file: %w", err)
	}
	pw, err := parsePassword(b)
	if err != nil {
		return "", fmt.Errorf("sasl password file %s is malformed (%v); delete it to have a new password generated", path, err)
	}
	return pw, nil
}

func parsePassword(b []byte) (string, error) {
	s := strings.TrimSuffix(string(b), "\n")
	if len(s) != 2*passwordBytes {
		return "", fmt.Errorf("want %d hex digits, got %d characters", 2*passwordBytes, len(s))
	}
	if _, err := hex.DecodeString(s); err != nil {
		return "", errors.New("not hex")
	}
	return s, nil
}

// createPassword writes a new random password to path (secretfile.Create: atomically, mode
// 0600, failing rather than replacing if path appeared meanwhile).
func createPassword(path string) (string, error) {
	raw := make([]byte, passwordBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generate sasl password: %w", err)
	}
	pw := hex.EncodeToString(raw)
	if err := secretfile.Create(path, []byte(pw+"\n")); err != nil {
		return "", fmt.Errorf("create sasl password file: %w", err)
	}
	return pw, nil
}
