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
	EventRegistered        = "client.registered"
	EventAPIKeyIssued      = "client.api-key-issued"
	EventAPIKeyRevoked     = "client.api-key-revoked"
	EventSigningConfigured = "client.signing-configured"
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

// SigningConfigured records the operator's signing configuration of a client (the spec: "the
// signing provider API key is stored in the client's account configuration and a cancellation
// PDF template … is supplied to the service operator"): the power-of-attorney template under a
// new version, and the provider key. The key is a secret: it sits in Personal, sealed under the
// client's own data subject like personal data, and is never returned, logged or audited. The
// template names no one and is public.
type SigningConfigured struct {
	TemplateVersion int    `json:"templateVersion"`
	Template        string `json:"template"`
	// TemplateHash is the template's content hash (poa.Template.Version), for the audit.
	TemplateHash string `json:"templateHash"`
	// Place is what the documents print for {{place}} ("" for a blank to fill in).
	Place        string         `json:"place,omitempty"`
	ConfiguredAt time.Time      `json:"configuredAt"`
	Personal     *SigningSecret `json:"personal,omitempty"`
}

// SigningSecret is the sealed part of SigningConfigured.
type SigningSecret struct {
	ProviderKey string `json:"providerKey"`
}

func (Registered) EventType() string        { return EventRegistered }
func (APIKeyIssued) EventType() string      { return EventAPIKeyIssued }
func (APIKeyRevoked) EventType() string     { return EventAPIKeyRevoked }
func (SigningConfigured) EventType() string { return EventSigningConfigured }

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
	id       string
	name     string
	sandbox  bool
	keys     map[string]apiKey // by key id
	signing  signing
	certs    []Certificate
	settings Settings
}

// signing is a client's signing configuration: every template version it had (a cancellation
// renders the version it recorded), the newest version, the place and the provider key.
type signing struct {
	templates   map[int]string
	version     int
	place       string
	providerKey string // "" when never set or no longer readable
}

// SigningConfig is what a cancellation needs of its client's signing configuration.
type SigningConfig struct {
	TemplateVersion int
	Template        string
	Place           string
	// ProviderKey is the signing provider's API key: a secret, never logged.
	ProviderKey string
}

// Signing is the client's current signing configuration; false when it has none (no template,
// or its provider key is not readable).
func (c *Client) Signing() (SigningConfig, bool) {
	s := c.signing
	if s.version == 0 || s.providerKey == "" {
		return SigningConfig{}, false
	}
	return SigningConfig{TemplateVersion: s.version, Template: s.templates[s.version], Place: s.place, ProviderKey: s.providerKey}, true
}

// Template is the template of one version, false when the client never had it.
func (c *Client) Template(version int) (string, bool) {
	t, ok := c.signing.templates[version]
	return t, ok
}

// DataSubject is the subject the client's secrets are sealed under.
func (c *Client) DataSubject() string { return domain.ClientSubject(c.id) }

type apiKey struct {
	hash      string
	issuedAt  time.Time
	revoked   bool
	revokedAt time.Time
	// validUntil is when a retiring key stops authenticating, zero for none.
	validUntil time.Time
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
		c.keys[ev.KeyID] = apiKey{hash: ev.KeyHash, issuedAt: ev.IssuedAt}
	case APIKeyRevoked:
		k := c.keys[ev.KeyID]
		k.revoked, k.revokedAt = true, ev.RevokedAt
		c.keys[ev.KeyID] = k
	case SigningConfigured:
		if c.signing.templates == nil {
			c.signing.templates = map[int]string{}
		}
		c.signing.templates[ev.TemplateVersion] = ev.Template
		c.signing.version, c.signing.place, c.signing.providerKey = ev.TemplateVersion, ev.Place, ""
		if ev.Personal != nil {
			c.signing.providerKey = ev.Personal.ProviderKey
		}
	default:
		if ok, err := c.applySecurity(e); ok || err != nil {
			return err
		}
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

// maxProviderKey bounds the provider key: keys of real providers are tens of characters.
const maxProviderKey = 512

// ConfigureSigning records the client's signing configuration under the next template version.
// The template is already parsed and checked (poa.Parse) by the caller, which passes its text and
// content hash; the provider key must be 16 to 512 printable characters. Invalid input is a
// *domain.FieldError ("template", "providerKey", "place").
func (c *Client) ConfigureSigning(template, templateHash, providerKey, place string, now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("client does not exist: %w", domain.ErrConflict)
	}
	switch {
	case template == "" || templateHash == "":
		return &domain.FieldError{Field: "template", Reason: "is required"}
	case len(providerKey) < 16 || len(providerKey) > maxProviderKey || !printable(providerKey):
		return &domain.FieldError{Field: "providerKey", Reason: fmt.Sprintf("must be 16 to %d printable characters", maxProviderKey)}
	case len(place) > 100 || !printable(place):
		return &domain.FieldError{Field: "place", Reason: "must be at most 100 printable characters"}
	}
	return domain.Record(c, SigningConfigured{TemplateVersion: c.signing.version + 1, Template: template,
		TemplateHash: templateHash, Place: place, ConfiguredAt: now.UTC(), Personal: &SigningSecret{ProviderKey: providerKey}})
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
