// Package keystore holds the adapters of the crypto-shredding key store port
// (eventschema.Keys): Memory here for tests, sqlitekeys for the embedded default (a file of its
// own under the data dir) and esdbkeys for the distributed deployment (one EventStoreDB stream
// per key), all held to one contract suite (keystoretest). Cached puts a bounded in-memory cache
// in front of any of them.
package keystore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/samla/samla/eventschema"
)

// ErrClosed is returned by every call on a closed key store.
var ErrClosed = errors.New("key store closed")

// Generate makes a new random key with a random id.
func Generate() (eventschema.Key, error) {
	material := make([]byte, eventschema.KeySize)
	if _, err := rand.Read(material); err != nil {
		return eventschema.Key{}, fmt.Errorf("generate key: %w", err)
	}
	return eventschema.NewKey(uuid.NewString(), material)
}

// Memory is an in-memory key store, for tests. It is safe for concurrent use.
type Memory struct {
	mu     sync.Mutex
	keys   map[string]eventschema.Key
	erased map[string]bool
	closed bool
}

var _ eventschema.Keys = (*Memory)(nil)

// NewMemory returns an empty in-memory key store.
func NewMemory() *Memory {
	return &Memory{keys: map[string]eventschema.Key{}, erased: map[string]bool{}}
}

// GetOrCreate implements eventschema.Keys.
func (m *Memory) GetOrCreate(_ context.Context, subject string) (eventschema.Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(subject); err != nil {
		return eventschema.Key{}, err
	}
	if k, ok := m.keys[subject]; ok {
		return k, nil
	}
	k, err := Generate()
	if err != nil {
		return eventschema.Key{}, err
	}
	m.keys[subject] = k
	return k, nil
}

// Get implements eventschema.Keys.
func (m *Memory) Get(_ context.Context, subject string) (eventschema.Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(subject); err != nil {
		return eventschema.Key{}, err
	}
	if k, ok := m.keys[subject]; ok {
		return k, nil
	}
	return eventschema.Key{}, fmt.Errorf("%s: %w", subject, eventschema.ErrKeyNotFound)
}

// Destroy implements eventschema.Keys.
func (m *Memory) Destroy(_ context.Context, subject string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	delete(m.keys, subject)
	m.erased[subject] = true
	return nil
}

// Forget drops every key and tombstone, as a lost key store would: sealed data then fails to
// open with eventschema.ErrKeyNotFound.
func (m *Memory) Forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys, m.erased = map[string]eventschema.Key{}, map[string]bool{}
}

// Close makes every later call fail with ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

func (m *Memory) check(subject string) error {
	if m.closed {
		return ErrClosed
	}
	if subject == "" {
		return errors.New("key store: empty data subject")
	}
	if m.erased[subject] {
		return fmt.Errorf("%s: %w", subject, eventschema.ErrSubjectErased)
	}
	return nil
}
