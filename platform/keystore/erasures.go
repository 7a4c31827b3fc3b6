package keystore

import (
	"context"
	"errors"

	"github.com/samla/samla/eventschema"
)

// Erasures tells from a key store whether a data subject was erased: its key destroyed, so that
// nothing may be done any more with what its personal data was (a connector worker ends the
// collection of a deleted user rather than log in with a personal number it can no longer
// read). Over a Cache it answers from memory, and this process's own erasures at once.
type Erasures struct {
	Keys eventschema.Keys
}

// Erased reports whether subject was erased. A subject the key store never had a key for is not
// erased: nothing was sealed under it (a collection whose userUuid names no user, made before
// users existed).
func (e Erasures) Erased(ctx context.Context, subject string) (bool, error) {
	_, err := e.Keys.Get(ctx, subject)
	switch {
	case errors.Is(err, eventschema.ErrSubjectErased):
		return true, nil
	case errors.Is(err, eventschema.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return false, nil
}
