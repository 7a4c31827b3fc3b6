package eventschema

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// Keys is the key store port of crypto-shredding: one 256-bit key per data subject (a user, or a
// collection without a user), which seals that subject's personal data wherever it is stored.
// Destroying a subject's key erases its personal data everywhere at once: the event store, the
// Kafka log and the read models keep only ciphertext. Adapters live in platform/keystore.
type Keys interface {
	// GetOrCreate returns the subject's key, creating it on first use. Two concurrent calls for
	// one subject return the same key. A subject whose key was destroyed is ErrSubjectErased:
	// an erased subject never gets a new key.
	GetOrCreate(ctx context.Context, subject string) (Key, error)
	// Get returns the subject's key: ErrSubjectErased when it was destroyed, ErrKeyNotFound
	// when the store never had it (a lost key store, or another deployment's data).
	Get(ctx context.Context, subject string) (Key, error)
	// Destroy erases the subject's key and leaves a tombstone, so that later calls for the
	// subject are ErrSubjectErased. Destroying an erased or unknown subject is not an error.
	Destroy(ctx context.Context, subject string) error
}

var (
	// ErrSubjectErased is a subject whose key was destroyed: its personal data is gone for good.
	ErrSubjectErased = errors.New("data subject erased")
	// ErrKeyNotFound is a subject the key store has no key and no tombstone for. Sealed data
	// of such a subject cannot be opened: the key store was lost or belongs to another
	// deployment. It is never read as "erased".
	ErrKeyNotFound = errors.New("data subject key not found")
)

// KeySize is the size of a subject's key: AES-256.
const KeySize = 32

// Key is one subject's key. Its material never prints: a Key formats and logs as its id.
type Key struct {
	id       string
	material [KeySize]byte
}

// NewKey makes a key from its id and its KeySize bytes of material.
func NewKey(id string, material []byte) (Key, error) {
	if id == "" {
		return Key{}, errors.New("key without an id")
	}
	if len(material) != KeySize {
		return Key{}, fmt.Errorf("key %s has %d bytes, want %d", id, len(material), KeySize)
	}
	k := Key{id: id}
	copy(k.material[:], material)
	return k, nil
}

// ID names the key; sealed data records it, so that opening with another key (a key store
// of another deployment that happens to know the subject) fails before decryption is tried.
func (k Key) ID() string { return k.id }

// Material returns a copy of the key's bytes, for the adapters that store it.
func (k Key) Material() []byte { return append([]byte(nil), k.material[:]...) }

// IsZero reports whether k is no key at all.
func (k Key) IsZero() bool { return k.id == "" }

// String names the key without its material.
func (k Key) String() string { return "key " + k.id }

// GoString keeps %#v from printing the material.
func (k Key) GoString() string { return k.String() }

// LogValue keeps the material out of logs.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }
