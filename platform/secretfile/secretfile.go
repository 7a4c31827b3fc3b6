// Package secretfile writes the secrets samla keeps in files (the session signing keys, the
// fingerprint key, the embedded broker's password): mode 0600, and atomically, so that a crash
// leaves the old content or the new, never an empty or partial file that the next start would
// refuse.
package secretfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Mode is the mode of every file this package writes: only its owner may read it.
const Mode = 0o600

// Create writes data to path, which must not exist: through a synced temporary file in the
// same directory, linked to path (an error wrapping fs.ErrExist when another process created
// path first), and the directory synced so that the new name survives a crash.
func Create(path string, data []byte) error { return write(path, data, false) }

// Replace writes data to path in place of what it holds (or creates it), atomically: a reader
// sees the old content or the new.
func Replace(path string, data []byte) error { return write(path, data, true) }

func write(path string, data []byte, replace bool) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if rmErr := os.Remove(tmp.Name()); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
			err = fmt.Errorf("remove the temporary file of %s: %w", path, rmErr)
		}
	}()
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Chmod(Mode), tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else {
		err = os.Link(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(dir)
}

// syncDir makes a rename or link in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	serr := d.Sync()
	if err := errors.Join(serr, d.Close()); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
