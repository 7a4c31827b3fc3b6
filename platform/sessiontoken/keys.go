// Package sessiontoken issues and verifies the user-scoped session tokens of the 2026-04-01
// API: JWTs signed with EdDSA (Ed25519) through github.com/golang-jwt/jwt/v5, and the key set
// they are signed with. A key set holds one or more keys; the first signs and all verify, so a
// key can be rotated without ending the sessions signed with the one before it. Keys are kept in
// a PEM file (PKCS #8 private keys, the signing key first) that KeyFile reads, generates and
// rotates; the public keys are published as a JWK Set (RFC 7517) for anyone who wants to check a
// token offline.
//
// The package is a leaf: it knows nothing of HTTP, clients or users. Whether a token's user
// still exists is the caller's question (see platform/httpapi).
package sessiontoken

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
)

// ErrKeyFile is what reading a key file fails with (wrapped) when its content is not a usable key
// set: no key, a block that is not an Ed25519 private key, the same key twice.
var ErrKeyFile = errors.New("not a usable session key file")

// pemTypePrivateKey is the PEM type of a PKCS #8 private key (RFC 7468), what `openssl genpkey
// -algorithm ed25519` writes.
const pemTypePrivateKey = "PRIVATE KEY"

// signingKey is one Ed25519 key and its key id.
type signingKey struct {
	id      string
	private ed25519.PrivateKey
	public  ed25519.PublicKey
}

func newSigningKey(priv ed25519.PrivateKey) signingKey {
	pub := priv.Public().(ed25519.PublicKey)
	return signingKey{id: thumbprint(pub), private: priv, public: pub}
}

// thumbprint is the key's JWK thumbprint (RFC 7638, SHA-256, base64url): the key id. It is
// derived from the public key, so the key file needs to store no ids, two processes that hold
// the same key agree on its id, and an id never names two keys.
func thumbprint(pub ed25519.PublicKey) string {
	// RFC 7638 §3.2: the required members in lexical order, no whitespace.
	canonical := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(canonical))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// KeySet is an ordered set of Ed25519 keys: the first signs new tokens, every one verifies. It is
// immutable once built, so it is safe for concurrent use.
type KeySet struct {
	keys []signingKey
	jwks []byte // the public keys as a JWK Set, rendered once
}

// GenerateKeySet returns a key set of one new key (tests, and a first start).
func GenerateKeySet() (*KeySet, error) {
	k, err := generateKey()
	if err != nil {
		return nil, err
	}
	return newKeySet([]signingKey{k})
}

func generateKey() (signingKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return signingKey{}, fmt.Errorf("generate an Ed25519 key: %w", err)
	}
	return newSigningKey(priv), nil
}

func newKeySet(keys []signingKey) (*KeySet, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: it holds no key", ErrKeyFile)
	}
	for i, k := range keys {
		if slices.ContainsFunc(keys[:i], func(o signingKey) bool { return o.id == k.id }) {
			return nil, fmt.Errorf("%w: key %s appears twice", ErrKeyFile, k.id)
		}
	}
	set := &KeySet{keys: keys}
	jwks, err := json.Marshal(set.JWKS())
	if err != nil {
		return nil, fmt.Errorf("render the JWK Set: %w", err)
	}
	set.jwks = jwks
	return set, nil
}

// ParsePEM reads a key set from PEM: one or more PKCS #8 "PRIVATE KEY" blocks holding Ed25519
// keys, the signing key first. Text between the blocks (comments) is ignored.
func ParsePEM(data []byte) (*KeySet, error) {
	var keys []signingKey
	rest := data
	for n := 1; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != pemTypePrivateKey {
			return nil, fmt.Errorf("%w: block %d is a %q, not a %q", ErrKeyFile, n, block.Type, pemTypePrivateKey)
		}
		parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: block %d: %w", ErrKeyFile, n, err)
		}
		priv, ok := parsed.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%w: block %d holds a %T, not an Ed25519 key", ErrKeyFile, n, parsed)
		}
		keys = append(keys, newSigningKey(priv))
	}
	if begun := bytes.Count(data, []byte("-----BEGIN ")); begun != len(keys) {
		// pem.Decode skips a block it cannot read; a truncated or corrupted key must not be
		// dropped silently, or a rotation would lose a key that verifies today's sessions.
		return nil, fmt.Errorf("%w: %d PEM blocks begin, %d of them parse", ErrKeyFile, begun, len(keys))
	}
	return newKeySet(keys)
}

// MarshalPEM writes the key set as ParsePEM reads it, each key preceded by a comment that
// names its id and whether it signs.
func (s *KeySet) MarshalPEM() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# Samla session signing keys (Ed25519, PKCS #8). The first key signs new session\n" +
		"# tokens; every key verifies them. Keep this file secret (mode 0600).\n")
	for i, k := range s.keys {
		der, err := x509.MarshalPKCS8PrivateKey(k.private)
		if err != nil {
			return nil, fmt.Errorf("encode key %s: %w", k.id, err)
		}
		role := "verifies"
		if i == 0 {
			role = "signs and verifies"
		}
		fmt.Fprintf(&buf, "\n# kid %s (%s)\n", k.id, role)
		if err := pem.Encode(&buf, &pem.Block{Type: pemTypePrivateKey, Bytes: der}); err != nil {
			return nil, fmt.Errorf("encode key %s: %w", k.id, err)
		}
	}
	return buf.Bytes(), nil
}

// KeyIDs lists the key ids, the signing key's first.
func (s *KeySet) KeyIDs() []string {
	ids := make([]string, len(s.keys))
	for i, k := range s.keys {
		ids[i] = k.id
	}
	return ids
}

// SigningKeyID is the id of the key that signs new tokens.
func (s *KeySet) SigningKeyID() string { return s.keys[0].id }

func (s *KeySet) signer() signingKey { return s.keys[0] }

// publicKey returns the public key of id.
func (s *KeySet) publicKey(id string) (ed25519.PublicKey, bool) {
	for _, k := range s.keys {
		if k.id == id {
			return k.public, true
		}
	}
	return nil, false
}

// withNewKey returns a set with a newly generated key added: first (it signs from now on) or,
// when staged, last (it only verifies until promoted).
func (s *KeySet) withNewKey(staged bool) (*KeySet, string, error) {
	k, err := generateKey()
	if err != nil {
		return nil, "", err
	}
	var keys []signingKey
	if staged {
		keys = append(slices.Clone(s.keys), k)
	} else {
		keys = append([]signingKey{k}, s.keys...)
	}
	set, err := newKeySet(keys)
	return set, k.id, err
}

// withPromoted returns a set whose signing key is id, the other keys in their order after it.
func (s *KeySet) withPromoted(id string) (*KeySet, error) {
	i := slices.IndexFunc(s.keys, func(k signingKey) bool { return k.id == id })
	if i < 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoSuchKey, id)
	}
	keys := append([]signingKey{s.keys[i]}, slices.Delete(slices.Clone(s.keys), i, i+1)...)
	return newKeySet(keys)
}

// withRetired returns a set without id, which must not be the signing key.
func (s *KeySet) withRetired(id string) (*KeySet, error) {
	i := slices.IndexFunc(s.keys, func(k signingKey) bool { return k.id == id })
	switch {
	case i < 0:
		return nil, fmt.Errorf("%w: %s", ErrNoSuchKey, id)
	case i == 0:
		return nil, fmt.Errorf("%w: %s", ErrRetireSigningKey, id)
	}
	return newKeySet(slices.Delete(slices.Clone(s.keys), i, i+1))
}

// ErrNoSuchKey is a key id the set does not hold.
var ErrNoSuchKey = errors.New("no such session key")

// ErrRetireSigningKey refuses to retire the key that signs: promote another one first.
var ErrRetireSigningKey = errors.New("the signing key cannot be retired; promote another key first")

// JWK is one public key of a JWK Set: an Ed25519 key as an octet key pair (RFC 8037).
type JWK struct {
	KeyType   string `json:"kty"`
	Curve     string `json:"crv"`
	X         string `json:"x"`
	KeyID     string `json:"kid"`
	Use       string `json:"use"`
	Algorithm string `json:"alg"`
}

// JWKSet is a JWK Set (RFC 7517 §5).
type JWKSet struct {
	Keys []JWK `json:"keys"`
}

// JWKS returns the public keys, the signing key's first.
func (s *KeySet) JWKS() JWKSet {
	set := JWKSet{Keys: make([]JWK, len(s.keys))}
	for i, k := range s.keys {
		set.Keys[i] = JWK{KeyType: "OKP", Curve: "Ed25519", X: base64.RawURLEncoding.EncodeToString(k.public),
			KeyID: k.id, Use: "sig", Algorithm: algorithm}
	}
	return set
}

// JWKSJSON is JWKS as JSON, rendered once when the set was built.
func (s *KeySet) JWKSJSON() []byte { return s.jwks }
