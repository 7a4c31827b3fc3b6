// Package client is the tenant aggregate: a client system of Samla and its API keys. Keys are
// stored only as SHA-256 hashes; the plain key is shown once, when it is issued.
package client

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"time"

	"github.com/samla/samla/domain"
)

const (
	EventRegistered    = "client.registered"
	EventAPIKeyIssued  = "client.api-key-issued"
	EventAPIKeyRevoked = "client.api-key-revoked"
)

// StreamPrefix is the event-store category of client streams.
const StreamPrefix = "client-"

// StreamName returns the stream of one client.
func StreamName(clientID string) string { return StreamPrefix + clientID }

// Kind tells a repository where clients are stored and how to make an empty one.
var Kind = domain.Kind[*Client]{StreamPrefix: StreamPrefix, New: func() *Client { return &Client{} }}

type Registered struct {
	ClientID     string    `json:"clientId"`
	Name         string    `json:"name"`
	Sandbox      bool      `json:"sandbox"`
	RegisteredAt time.Time `json:"registeredAt"`
}

type APIKeyIssued struct {
	KeyID    string    `json:"keyId"`
	KeyHash  string    `json:"keyHash"`
	IssuedAt time.Time `json:"issuedAt"`
}

type APIKeyRevoked struct {
	KeyID     string    `json:"keyId"`
	RevokedAt time.Time `json:"revokedAt"`
}

func (Registered) EventType() string    { return EventRegistered }
func (APIKeyIssued) EventType() string  { return EventAPIKeyIssued }
func (APIKeyRevoked) EventType() string { return EventAPIKeyRevoked }

// HashAPIKey is the only form in which a key is stored. Keys carry 256 random bits, so a fast
// hash is safe here and keeps authentication off the hot path's CPU budget.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

var clientIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,62}$`)

// root lets Client embed domain.Root under an unexported name: its methods are promoted and
// Client is a domain.Aggregate, but no other package can reach (or overwrite) the field.
type root = domain.Root

// Client is the aggregate. Its commands decide, then record their events, which Apply folds.
type Client struct {
	root
	id      string
	name    string
	sandbox bool
	keys    map[string]apiKey // by key id
}

type apiKey struct {
	hash    string
	revoked bool
}

func (c *Client) ID() string    { return c.id }
func (c *Client) Name() string  { return c.name }
func (c *Client) Sandbox() bool { return c.sandbox }
func (c *Client) Exists() bool  { return c.Version() > 0 }

// ActiveKeyHashes lists the hashes of keys that are not revoked.
func (c *Client) ActiveKeyHashes() []string {
	var out []string
	for _, k := range c.keys {
		if !k.revoked {
			out = append(out, k.hash)
		}
	}
	return out
}

// Apply folds one event; domain.Record and domain.Rehydrate call it.
func (c *Client) Apply(e domain.Event) error {
	switch ev := e.(type) {
	case Registered:
		c.id, c.name, c.sandbox = ev.ClientID, ev.Name, ev.Sandbox
		c.keys = map[string]apiKey{}
	case APIKeyIssued:
		c.keys[ev.KeyID] = apiKey{hash: ev.KeyHash}
	case APIKeyRevoked:
		k := c.keys[ev.KeyID]
		k.revoked = true
		c.keys[ev.KeyID] = k
	default:
		return fmt.Errorf("client cannot apply event %s", e.EventType())
	}
	return nil
}

// Register decides a new client. Invalid input is a *domain.FieldError ("id" or "name").
func (c *Client) Register(id, name string, sandbox bool, now time.Time) error {
	if c.Exists() {
		return fmt.Errorf("client %s already exists: %w", id, domain.ErrConflict)
	}
	if !clientIDPattern.MatchString(id) {
		return &domain.FieldError{Field: "id", Reason: "must be 2-63 lowercase letters, digits or hyphens"}
	}
	if name == "" {
		return &domain.FieldError{Field: "name", Reason: "is required"}
	}
	return domain.Record(c, Registered{ClientID: id, Name: name, Sandbox: sandbox, RegisteredAt: now.UTC()})
}

// IssueAPIKey records a new key by its hash. The caller generates the key and shows it once.
func (c *Client) IssueAPIKey(keyID, plainKey string, now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("client does not exist: %w", domain.ErrConflict)
	}
	if len(plainKey) < 32 {
		return &domain.FieldError{Field: "apiKey", Reason: "must have at least 32 characters"}
	}
	if _, dup := c.keys[keyID]; dup || keyID == "" {
		return fmt.Errorf("API key id %q is empty or taken: %w", keyID, domain.ErrConflict)
	}
	return domain.Record(c, APIKeyIssued{KeyID: keyID, KeyHash: HashAPIKey(plainKey), IssuedAt: now.UTC()})
}

// RevokeAPIKey stops a key from authenticating; revoking a revoked key records nothing.
func (c *Client) RevokeAPIKey(keyID string, now time.Time) error {
	k, ok := c.keys[keyID]
	if !ok {
		return fmt.Errorf("API key %s is unknown: %w", keyID, domain.ErrConflict)
	}
	if k.revoked {
		return nil
	}
	return domain.Record(c, APIKeyRevoked{KeyID: keyID, RevokedAt: now.UTC()})
}
