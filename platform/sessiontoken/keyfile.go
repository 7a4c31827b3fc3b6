package sessiontoken

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/samla/samla/platform/filelock"
	"github.com/samla/samla/platform/secretfile"
)

// LoadKeyFile reads the key set in path (ParsePEM's format).
func LoadKeyFile(path string) (*KeySet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the session key file: %w", err)
	}
	set, err := ParsePEM(data)
	if err != nil {
		return nil, fmt.Errorf("session key file %s: %w", path, err)
	}
	return set, nil
}

// LoadOrCreateKeyFile reads the key set in path or, when there is no such file, generates one
// key and writes it there (mode 0600); generated says which. The file appears whole or not at
// all, so two processes starting on one data dir at once both end up with the key one of them
// wrote.
func LoadOrCreateKeyFile(path string) (set *KeySet, generated bool, err error) {
	set, err = LoadKeyFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return set, false, err
	}
	set, err = GenerateKeySet()
	if err != nil {
		return nil, false, err
	}
	err = writeKeyFile(path, set, false)
	if errors.Is(err, fs.ErrExist) {
		set, err = LoadKeyFile(path) // another process wrote it first
		return set, false, err
	}
	if err != nil {
		return nil, false, err
	}
	return set, true, nil
}

// RotateKeyFile adds a newly generated key to the key file in path (creating the file when there
// is none) and returns its id. The new key signs from the next start of the processes that read
// the file; the keys before it keep verifying the tokens they signed until they are retired.
//
// With staged, the new key is added last: it verifies but does not sign yet. That is for a
// deployment of several processes: stage the key and roll the file out to all of them, then
// PromoteKey, so that no process meets a token signed with a key it does not know yet.
func RotateKeyFile(path string, staged bool) (string, error) {
	var kid string
	err := modifyKeyFile(path, true, func(set *KeySet) (*KeySet, error) {
		if set == nil {
			first, err := GenerateKeySet()
			if err == nil {
				kid = first.SigningKeyID()
			}
			return first, err
		}
		next, id, err := set.withNewKey(staged)
		kid = id
		return next, err
	})
	return kid, err
}

// PromoteKey makes kid, a key in the file, the signing key. The former signing key stays, to
// verify what it signed.
func PromoteKey(path, kid string) error {
	return modifyKeyFile(path, false, func(set *KeySet) (*KeySet, error) { return set.withPromoted(kid) })
}

// RetireKey removes kid from the file. Tokens it signed stop verifying once the processes
// re-read the file, so retire a key only when the session TTL has passed since it stopped
// signing. The signing key cannot be retired.
func RetireKey(path, kid string) error {
	return modifyKeyFile(path, false, func(set *KeySet) (*KeySet, error) { return set.withRetired(kid) })
}

// modifyKeyFile replaces the key set in path with change's result, under an exclusive lock on
// path+".lock" so that two operators' rotations cannot lose one another's key. change gets nil
// when the file does not exist and mayCreate is set.
func modifyKeyFile(path string, mayCreate bool, change func(*KeySet) (*KeySet, error)) error {
	lock, err := filelock.Exclusive(path + ".lock")
	if err != nil {
		return fmt.Errorf("lock the session key file: %w", err)
	}
	defer func() { _ = lock.Release() }()
	set, err := LoadKeyFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && mayCreate:
		set = nil
	case err != nil:
		return err
	}
	next, err := change(set)
	if err != nil {
		return err
	}
	return writeKeyFile(path, next, true)
}

// writeKeyFile writes set to path through a temporary file in the same directory, so that a
// reader sees the old content or the new, never a part. Without replace, an existing file is
// left as it is and the error wraps fs.ErrExist.
func writeKeyFile(path string, set *KeySet, replace bool) error {
	data, err := set.MarshalPEM()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create the session key directory: %w", err)
	}
	write := secretfile.Create
	if replace {
		write = secretfile.Replace
	}
	if err := write(path, data); err != nil {
		return fmt.Errorf("write the session key file: %w", err)
	}
	return nil
}
