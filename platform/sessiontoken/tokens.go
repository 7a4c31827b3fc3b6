package sessiontoken

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/samla/samla/platform/uuids"
)

// algorithm is the only JWS algorithm issued and accepted (RFC 8037's EdDSA with Ed25519).
const algorithm = "EdDSA"

// Verification failures. Verify's error wraps exactly one of them, so that a caller can say
// which way a token failed (the HTTP API turns each into its own problem code).
var (
	// ErrMalformed: not a JWT, or one that lacks or garbles a claim a session token has.
	ErrMalformed = errors.New("session token is malformed")
	// ErrUnsupportedAlgorithm: signed with anything but EdDSA, "none" included.
	ErrUnsupportedAlgorithm = errors.New("session token algorithm is not accepted")
	// ErrUnknownKey: the kid header names no key of the key set (or is missing).
	ErrUnknownKey = errors.New("session token is signed with an unknown key")
	// ErrInvalidSignature: the signature does not verify with the key the kid names: the token
	// was changed, or signed with another key under a known kid.
	ErrInvalidSignature = errors.New("session token signature is invalid")
	// ErrExpired: past its exp.
	ErrExpired = errors.New("session token has expired")
	// ErrNotYetValid: before its nbf or iat.
	ErrNotYetValid = errors.New("session token is not valid yet")
	// ErrWrongAudience: issued for another client than the one expected.
	ErrWrongAudience = errors.New("session token was issued for another client")
	// ErrWrongIssuer: signed with a known key but issued by another issuer (e.g. another
	// deployment that shares the key file).
	ErrWrongIssuer = errors.New("session token has another issuer")
)

// Defaults and bounds.
const (
	// DefaultTTL is how long a session token is valid: short, because a token cannot be revoked
	// one by one (deleting its user ends all of the user's tokens, revoking the API key that
	// minted it all of that key's).
	DefaultTTL = 15 * time.Minute
	// MaxTTL bounds the TTL a deployment may choose.
	MaxTTL = 24 * time.Hour
	// ClockSkew is the tolerance of exp, nbf and iat, for replicas whose clocks differ a little.
	ClockSkew = 30 * time.Second
	// maxTokenBytes bounds a token before it is parsed; Samla's tokens have about 400 bytes.
	maxTokenBytes = 4 << 10
)

// Config configures Tokens.
type Config struct {
	// Issuer is the iss claim of issued tokens, and the only one accepted. Required.
	Issuer string
	// TTL is the lifetime of an issued token; 0 means DefaultTTL.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Tokens issues and verifies session tokens with a key set. It is safe for concurrent use.
type Tokens struct {
	keys   *KeySet
	issuer string
	ttl    time.Duration
	now    func() time.Time
}

// New returns Tokens over keys.
func New(keys *KeySet, cfg Config) (*Tokens, error) {
	if keys == nil {
		return nil, errors.New("sessiontoken.New: a key set is required")
	}
	if cfg.Issuer == "" {
		return nil, errors.New("sessiontoken.New: an issuer is required")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.TTL < 0 || cfg.TTL > MaxTTL {
		return nil, fmt.Errorf("sessiontoken.New: the TTL must be positive and at most %s, not %s", MaxTTL, cfg.TTL)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Tokens{keys: keys, issuer: cfg.Issuer, ttl: cfg.TTL, now: cfg.Now}, nil
}

// Keys is the key set the tokens are signed and verified with.
func (t *Tokens) Keys() *KeySet { return t.keys }

// Claims are what a verified session token says.
type Claims struct {
	// ClientID is the client the token was issued to (aud).
	ClientID string
	// UserUUID is the user the token acts for (sub).
	UserUUID string
	// TokenID is the token's unique id (jti).
	TokenID   string
	IssuedAt  time.Time
	ExpiresAt time.Time
	// KeyID is the id of the key that signed it (kid).
	KeyID string
	// APIKeyID is the id of the client's API key that minted the token (akid): the key id of
	// the apikeys read model, never the key or its hash. A revoked key is usually a leaked one,
	// so the sessions it minted end with it. "" for a token minted before tokens named their
	// key (or by a caller that knows none); such a token lives out its TTL.
	APIKeyID string
}

// Issued is a newly signed session token.
type Issued struct {
	Token     string
	ExpiresAt time.Time
	Claims    Claims
}

// claims is the token's payload. aud is a single string, as RFC 7519 allows, rather than the
// one-element array the library would write by default: one token serves one client.
type claims struct {
	Issuer    string           `json:"iss"`
	Subject   string           `json:"sub"`
	Audience  string           `json:"aud"`
	IssuedAt  *jwt.NumericDate `json:"iat"`
	NotBefore *jwt.NumericDate `json:"nbf"`
	ExpiresAt *jwt.NumericDate `json:"exp"`
	ID        string           `json:"jti"`
	APIKeyID  string           `json:"akid,omitempty"`
}

func (c *claims) GetExpirationTime() (*jwt.NumericDate, error) { return c.ExpiresAt, nil }
func (c *claims) GetIssuedAt() (*jwt.NumericDate, error)       { return c.IssuedAt, nil }
func (c *claims) GetNotBefore() (*jwt.NumericDate, error)      { return c.NotBefore, nil }
func (c *claims) GetIssuer() (string, error)                   { return c.Issuer, nil }
func (c *claims) GetSubject() (string, error)                  { return c.Subject, nil }
func (c *claims) GetAudience() (jwt.ClaimStrings, error)       { return jwt.ClaimStrings{c.Audience}, nil }

// maxAPIKeyIDBytes bounds the akid claim; a client's key ids are short ("k-" and a few bytes).
const maxAPIKeyIDBytes = 128

// Issue signs a token for userUUID of clientID, valid from now for the TTL. apiKeyID names the
// client's API key the token was minted with (the akid claim), so that revoking the key ends the
// token too; "" issues a token without it.
func (t *Tokens) Issue(clientID, userUUID, apiKeyID string) (Issued, error) {
	if clientID == "" || userUUID == "" {
		return Issued{}, errors.New("sessiontoken: a token needs a client and a user")
	}
	if len(apiKeyID) > maxAPIKeyIDBytes {
		return Issued{}, fmt.Errorf("sessiontoken: an API key id of %d bytes is longer than %d", len(apiKeyID), maxAPIKeyIDBytes)
	}
	jti, err := tokenID()
	if err != nil {
		return Issued{}, err
	}
	// Whole seconds: NumericDate keeps no more, and expiresAt must say what the token says.
	now := t.now().UTC().Truncate(time.Second)
	exp := now.Add(t.ttl)
	key := t.keys.signer()
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, &claims{
		Issuer: t.issuer, Subject: userUUID, Audience: clientID, ID: jti, APIKeyID: apiKeyID,
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
	})
	tok.Header["kid"] = key.id
	signed, err := tok.SignedString(key.private)
	if err != nil {
		return Issued{}, fmt.Errorf("sign a session token: %w", err)
	}
	return Issued{Token: signed, ExpiresAt: exp, Claims: Claims{
		ClientID: clientID, UserUUID: userUUID, TokenID: jti, IssuedAt: now, ExpiresAt: exp, KeyID: key.id,
		APIKeyID: apiKeyID,
	}}, nil
}

// tokenID is a random jti: 128 bits, base64url.
func tokenID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate a token id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Verify checks token: its algorithm, its key, its signature, its issuer, its times and, when
// audience is not empty, that it was issued to that client. It returns the token's claims, or an
// error that wraps exactly one of the Err* failures above.
func (t *Tokens) Verify(token, audience string) (Claims, error) {
	if token == "" || len(token) > maxTokenBytes {
		return Claims{}, fmt.Errorf("%w: %d bytes", ErrMalformed, len(token))
	}
	var c claims
	var kid string
	parser := jwt.NewParser(jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithLeeway(ClockSkew),
		jwt.WithTimeFunc(t.now), jwt.WithStrictDecoding())
	_, err := parser.ParseWithClaims(token, &c, func(tok *jwt.Token) (any, error) {
		// The algorithm is checked before anything else is trusted: a token must not choose how
		// it is verified ("none", or HS256 keyed with the public key).
		if tok.Method == nil || tok.Method.Alg() != algorithm {
			return nil, ErrUnsupportedAlgorithm
		}
		if _, ok := tok.Header["crit"]; ok {
			// RFC 7515 §4.1.11: a token whose crit header names extensions the verifier does
			// not understand must be refused; Samla understands none and issues none.
			return nil, fmt.Errorf("%w: crit header", ErrMalformed)
		}
		kid, _ = tok.Header["kid"].(string)
		pub, ok := t.keys.publicKey(kid)
		if !ok {
			return nil, ErrUnknownKey
		}
		return pub, nil
	})
	if err != nil {
		return Claims{}, classify(err)
	}
	// The claims every session token has; the library checks only those it is asked about.
	switch {
	case c.Issuer != t.issuer:
		return Claims{}, ErrWrongIssuer
	case c.Audience == "":
		return Claims{}, fmt.Errorf("%w: no aud", ErrMalformed)
	case audience != "" && c.Audience != audience:
		return Claims{}, ErrWrongAudience
	case c.Subject == "":
		return Claims{}, fmt.Errorf("%w: no sub", ErrMalformed)
	case !uuids.IsCanonical(c.Subject):
		return Claims{}, fmt.Errorf("%w: sub is not a user uuid", ErrMalformed)
	case c.ID == "":
		return Claims{}, fmt.Errorf("%w: no jti", ErrMalformed)
	case c.IssuedAt == nil || c.NotBefore == nil:
		return Claims{}, fmt.Errorf("%w: no iat or nbf", ErrMalformed)
	case len(c.APIKeyID) > maxAPIKeyIDBytes:
		// Signed by us, so not expected; bounded all the same, since it becomes a cache key.
		return Claims{}, fmt.Errorf("%w: akid of %d bytes", ErrMalformed, len(c.APIKeyID))
	case c.ExpiresAt.Sub(c.IssuedAt.Time) > MaxTTL:
		// No deployment issues tokens for longer; one that lives longer was not issued as a
		// session, whoever signed it (a key that leaked must not mint tokens for years).
		return Claims{}, fmt.Errorf("%w: valid for %s, more than %s", ErrMalformed, c.ExpiresAt.Sub(c.IssuedAt.Time), MaxTTL)
	}
	return Claims{ClientID: c.Audience, UserUUID: c.Subject, TokenID: c.ID, IssuedAt: c.IssuedAt.UTC(),
		ExpiresAt: c.ExpiresAt.UTC(), KeyID: kid, APIKeyID: c.APIKeyID}, nil
}

// classify maps the library's error to the one failure it is. The library reports every claim
// that fails at once; the order below picks the one a client can act on first.
func classify(err error) error {
	var failure error
	switch {
	case errors.Is(err, ErrUnsupportedAlgorithm):
		failure = ErrUnsupportedAlgorithm
	case errors.Is(err, ErrUnknownKey):
		failure = ErrUnknownKey
	case errors.Is(err, ErrMalformed): // refused before verification (a crit header)
		failure = ErrMalformed
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// An alg the library does not know, or none at all: nothing could verify it.
		failure = ErrUnsupportedAlgorithm
	case errors.Is(err, jwt.ErrTokenMalformed):
		failure = ErrMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		failure = ErrInvalidSignature
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing), errors.Is(err, jwt.ErrInvalidType):
		failure = ErrMalformed
	case errors.Is(err, jwt.ErrTokenExpired):
		failure = ErrExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		failure = ErrNotYetValid
	default:
		failure = ErrMalformed
	}
	return fmt.Errorf("%w: %w", failure, err)
}
