// The server secret of the idempotency fingerprints (httpcmd.Deps.FingerprintKey).

package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/platform/secretfile"
)

// FingerprintKeyFile is where a generated fingerprint key is kept, inside the data dir.
const FingerprintKeyFile = "fingerprint-key"

// fingerprintKey returns the key of the request fingerprints: the content of
// --fingerprint-key-file, surrounding whitespace trimmed, or else the one generated into the data
// dir on the first start and read back on later ones. The key must outlive restarts: a retry
// fingerprinted under another key is taken for another request reusing its Idempotency-Key.
func fingerprintKey(cfg *Config) ([]byte, error) {
	if cfg.FingerprintKeyFile != "" {
		return readFingerprintKey(cfg.FingerprintKeyFile)
	}
	path := filepath.Join(cfg.DataDir, FingerprintKeyFile)
	key, err := readFingerprintKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	raw := make([]byte, httpcmd.MinFingerprintKeyBytes)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("generate the fingerprint key: %w", err)
	}
	// Hex, so that an operator can copy the file to the other command replicas as text.
	key = []byte(hex.EncodeToString(raw))
	// Atomically: a crash in the middle of writing it in place left an empty or partial file,
	// which every later start refused as too short.
	err = secretfile.Create(path, append(key, '\n'))
	if errors.Is(err, fs.ErrExist) {
		return readFingerprintKey(path) // another process on this data dir wrote it first
	}
	if err != nil {
		return nil, fmt.Errorf("write the fingerprint key: %w", err)
	}
	return key, nil
}

func readFingerprintKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the fingerprint key: %w", err)
	}
	key := bytes.TrimSpace(b)
	if len(key) < httpcmd.MinFingerprintKeyBytes {
		return nil, fmt.Errorf("the fingerprint key in %s has %d bytes, fewer than %d", path, len(key), httpcmd.MinFingerprintKeyBytes)
	}
	return key, nil
}
