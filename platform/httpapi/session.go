package httpapi

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/platform/sessiontoken"
	"github.com/samla/samla/platform/uuids"
)

// User sessions (2026-04-01). A request may carry, besides or instead of the client's API key, a
// session token of one of the client's users in "Authorization: Bearer <token>". Its principal is
// then that session: the client is the token's (or, when an API key is sent too, the key's, and
// the token must have been issued to it), and the request reaches only the routes that opt in
// (AllowSessionsOfPathUser, AllowSessionsCheckedByHandler), and there only the token's own user. Older versions
// know no sessions: there the Authorization header is not looked at.

// HeaderAuthorization carries a user's session token as a Bearer token (RFC 6750).
const HeaderAuthorization = "Authorization"

// JWKSPath serves the public keys of the session tokens, without authentication.
const JWKSPath = "/.well-known/jwks.json"

// Problem codes of session authentication: a 401 says which way the token failed, so that a
// client knows whether to get a new token (expired), fix its clock (not yet valid) or stop
// (the rest).
const (
	CodeTokenMalformed            = "TOKEN_MALFORMED"
	CodeTokenUnsupportedAlgorithm = "TOKEN_UNSUPPORTED_ALGORITHM"
	CodeTokenUnknownKey           = "TOKEN_UNKNOWN_KEY"
	CodeTokenInvalidSignature     = "TOKEN_INVALID_SIGNATURE"
	CodeTokenExpired              = "TOKEN_EXPIRED"
	CodeTokenNotYetValid          = "TOKEN_NOT_YET_VALID"
	CodeTokenWrongAudience        = "TOKEN_WRONG_AUDIENCE"
	CodeTokenWrongIssuer          = "TOKEN_WRONG_ISSUER"
	// CodeTokenRevoked is a well-formed, valid token whose user was deleted (or is unknown), or
	// whose API key (the one that minted it) was revoked or no longer authenticates: a deleted
	// user's sessions end with it, and so do a revoked key's.
	CodeTokenRevoked = "TOKEN_REVOKED"
	// CodeForbiddenForSession is the 403 of a session outside its scope: a route that does not
	// serve sessions, or another user's resource.
	CodeForbiddenForSession = "FORBIDDEN_FOR_SESSION"
)

// SessionVerifier checks a session token (*sessiontoken.Tokens). A non-empty audience is the
// client the token must have been issued to. Its errors wrap one of sessiontoken's Err* failures;
// any other error is taken for a malformed token.
type SessionVerifier interface {
	Verify(token, audience string) (sessiontoken.Claims, error)
}

// SessionUsers tells whether a user of a client is live: it exists and is not deleted. It is
// asked on every request that carries a session token, never cached, so that a deleted user's
// tokens stop working as soon as the deletion is visible to it. An error is a fault of the
// lookup (503), not an answer.
type SessionUsers interface {
	IsLiveUser(ctx context.Context, clientID, userUUID string) (bool, error)
}

// SessionKeys tells whether a client's API key, by its id, still authenticates: false for a
// revoked key, a retiring one past its end, and one the client does not have. A session token
// names the key that minted it (sessiontoken.Claims.APIKeyID), and ends with it: a revoked key is
// usually a leaked one, and whoever held it may have minted sessions. An error is a fault of the
// lookup (503), not an answer.
//
// The engine caches the answers as it caches API keys (AuthCacheConfig): a revoked key's sessions
// end within PositiveTTL of the read model showing the revocation, as the key itself does.
//
// validUntil is when an active key stops authenticating (a retiring key's end; zero for none),
// so that the cache keeps the answer no longer than that.
type SessionKeys interface {
	KeyActiveUntil(ctx context.Context, clientID, keyID string) (active bool, validUntil time.Time, err error)
}

// sessionAuth is what the engine authenticates sessions with; nil fields: sessions are off
// (keys nil: tokens are not checked against the API keys that minted them).
type sessionAuth struct {
	verifier SessionVerifier
	users    SessionUsers
	keys     SessionKeys
	// keyCache caches keys' answers by (client, key id); an entry's clientID is "" for a key
	// that does not authenticate.
	keyCache *authCache
}

func (s sessionAuth) enabled() bool { return s.verifier != nil }

// session is the principal of a request authenticated by a session token.
type session struct {
	userUUID string
	tokenID  string
}

// SessionUser returns the user of a request authenticated by a session token; ok is false for a
// request authenticated by API key alone.
func SessionUser(c *gin.Context) (userUUID string, ok bool) {
	return SessionUserFrom(c.Request.Context())
}

// SessionUserFrom is SessionUser of a request's context.
func SessionUserFrom(ctx context.Context) (userUUID string, ok bool) {
	if info := infoFrom(ctx); info != nil && info.session != nil {
		return info.session.userUUID, true
	}
	return "", false
}

// RequireSessionUser reports whether the request may act on a resource of the user owner ("" for
// a resource of no user): an API-key request may, a session only when owner is its own user.
// Otherwise it answers 403 FORBIDDEN_FOR_SESSION and returns false. Handlers of routes that opt
// in with AllowSessionsCheckedByHandler call it with the owner of what they are about to serve,
// after they found it (an unknown resource stays a 404).
func RequireSessionUser(c *gin.Context, owner string) bool {
	user, ok := SessionUser(c)
	if !ok || (owner != "" && owner == user) {
		return true
	}
	forbiddenForSession(c, "The session token reaches only its own user's resources.")
	return false
}

// SessionUserParam is the path parameter that names a user in the routes that serve sessions
// with AllowSessionsOfPathUser, as in /users/:userUuid.
const SessionUserParam = "userUuid"

// AllowSessionsOfPathUser opts a route in for session principals, confined to requests whose
// path parameter SessionUserParam is the session's own user: any other user's is a 403. Place it
// first among the route's handlers.
//
// Every route that does not opt in (with this or AllowSessionsCheckedByHandler) answers a
// session 403 FORBIDDEN_FOR_SESSION before any of its handlers runs: sessions are refused unless
// a route says otherwise.
func AllowSessionsOfPathUser(c *gin.Context) {
	if user, ok := SessionUser(c); ok {
		// The path's user in any case is the one it names (uuids.Canonical).
		if id, valid := uuids.Canonical(c.Param(SessionUserParam)); !valid || id != user {
			forbiddenForSession(c, "The session token reaches only its own user.")
			return
		}
	}
	c.Next()
}

// AllowSessionsCheckedByHandler opts a route in for session principals, leaving their scope to
// the handler, which knows whose resource it serves only once it found it: it calls
// RequireSessionUser. Place it first among the route's handlers.
func AllowSessionsCheckedByHandler(c *gin.Context) { c.Next() }

// sessionOptIns are the names of the opt-in handlers. Gin runs the engine's middleware before any
// route's, so authentication learns whether a route serves sessions by finding one of them among
// the route's handlers. They are top-level functions, not closures, so that each has one name
// wherever it is used (a closure inlined into its caller is a function of its own).
var sessionOptIns = []string{funcName(AllowSessionsOfPathUser), funcName(AllowSessionsCheckedByHandler)}

func funcName(f gin.HandlerFunc) string {
	return runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
}

// servesSessions reports whether the route of c opted in for sessions.
func servesSessions(c *gin.Context) bool {
	return slices.ContainsFunc(c.HandlerNames(), func(name string) bool { return slices.Contains(sessionOptIns, name) })
}

func forbiddenForSession(c *gin.Context, detail string) {
	AbortProblem(c, http.StatusForbidden, CodeForbiddenForSession, detail)
}

// sessionsIn reports whether version v knows sessions.
func sessionsIn(v Version) bool { return v >= V20260401 } // ISO dates order lexically

// bearerToken returns the request's session token: present is false when it carries no
// Authorization header (or sessions do not apply to it), ok is false when it answered the
// request already (a header that is no single Bearer token).
func bearerToken(c *gin.Context, auth sessionAuth, gate authGate) (token string, present, ok bool) {
	if !auth.enabled() || !sessionsIn(ServiceVersion(c)) {
		return "", false, true
	}
	values := c.Request.Header.Values(HeaderAuthorization)
	switch len(values) {
	case 0:
		return "", false, true
	case 1:
	default:
		WriteProblem(c, ValidationProblem("Send one Authorization header.",
			FieldError{Field: HeaderAuthorization, Message: "must be sent once"}))
		return "", true, false
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		// Credentials of another scheme are not for the server to ignore: the client meant them
		// to count.
		tokenRefused(c, gate, CodeTokenMalformed, "The Authorization header must be \"Bearer <session token>\".")
		return "", true, false
	}
	return token, true, true
}

// authenticateSession verifies token for the request, whose client (clientID) is the API key's
// when it sent one, else "". It sets the session principal, or answers and returns false.
func authenticateSession(c *gin.Context, auth sessionAuth, gate authGate, token, clientID string) bool {
	claims, err := auth.verifier.Verify(token, clientID)
	if err != nil {
		code, detail := tokenFailure(err)
		tokenRefused(c, gate, code, detail)
		return false
	}
	if clientID == "" {
		clientID = claims.ClientID
	}
	ctx := c.Request.Context()
	if !sessionKeyActive(c, auth, gate, clientID, claims.APIKeyID) {
		return false
	}
	live, err := auth.users.IsLiveUser(ctx, clientID, claims.UserUUID)
	if err != nil {
		Logger(ctx).Error("session user lookup failed", "error", err)
		AbortProblem(c, http.StatusServiceUnavailable, CodeServiceUnavailable,
			"Authentication is temporarily unavailable; retry shortly.")
		return false
	}
	if !live {
		tokenRefused(c, gate, CodeTokenRevoked, "The session token's user no longer exists.")
		return false
	}
	setClient(c, clientID)
	if info := infoFrom(ctx); info != nil {
		info.session = &session{userUUID: claims.UserUUID, tokenID: claims.TokenID}
		// The token id ties a session's requests together in the logs without naming its user.
		info.addLogAttrs(slog.String("session_id", claims.TokenID))
	}
	if c.FullPath() != "" && !servesSessions(c) {
		// An unknown path or method stays the 404 or 405 it is.
		forbiddenForSession(c, "This resource is not available to a user's session token; use the client's API key.")
		return false
	}
	return true
}

// sessionKeyActive checks that the API key that minted the session (apiKeyID) still
// authenticates for clientID; otherwise it answers (401 TOKEN_REVOKED, or 503 when the lookup
// fails) and returns false.
//
// A token without the claim was minted before tokens named their key: it is not checked and
// stays valid until it expires (at most sessiontoken.MaxTTL after the upgrade), since there is no
// key to check it against. A retiring key (rotation grace) still authenticates, and so do the
// sessions it minted, until its end.
func sessionKeyActive(c *gin.Context, auth sessionAuth, gate authGate, clientID, apiKeyID string) bool {
	if apiKeyID == "" || auth.keys == nil {
		return true
	}
	// The digest of both ids, separated by a byte neither holds, keys the cache: bounded in
	// size whatever the ids, and no client's key id can stand for another client's.
	hash := cacheKey(sha256.Sum256([]byte(clientID + "\x00" + apiKeyID)))
	entry, ok := auth.keyCache.get(hash)
	if !ok {
		ctx := c.Request.Context()
		active, validUntil, err := auth.keys.KeyActiveUntil(ctx, clientID, apiKeyID)
		if err != nil {
			Logger(ctx).Error("session api key lookup failed", "error", err)
			AbortProblem(c, http.StatusServiceUnavailable, CodeServiceUnavailable,
				"Authentication is temporarily unavailable; retry shortly.")
			return false
		}
		entry = authEntry{}
		if active {
			entry.clientID = clientID
		}
		auth.keyCache.put(hash, KeyInfo{ClientID: entry.clientID, ValidUntil: validUntil})
	}
	if entry.clientID == "" {
		tokenRefused(c, gate, CodeTokenRevoked, "The API key that created this session token was revoked (or has retired); create a new session with a valid API key.")
		return false
	}
	return true
}

// tokenFailure maps a verification error to its problem code and detail.
func tokenFailure(err error) (code, detail string) {
	switch {
	case errors.Is(err, sessiontoken.ErrExpired):
		return CodeTokenExpired, "The session token has expired; create a new session."
	case errors.Is(err, sessiontoken.ErrNotYetValid):
		return CodeTokenNotYetValid, "The session token is not valid yet."
	case errors.Is(err, sessiontoken.ErrUnsupportedAlgorithm):
		return CodeTokenUnsupportedAlgorithm, "The session token must be signed with EdDSA."
	case errors.Is(err, sessiontoken.ErrUnknownKey):
		return CodeTokenUnknownKey, "The session token is signed with a key this service does not have."
	case errors.Is(err, sessiontoken.ErrInvalidSignature):
		return CodeTokenInvalidSignature, "The session token's signature is invalid."
	case errors.Is(err, sessiontoken.ErrWrongAudience):
		return CodeTokenWrongAudience, "The session token was issued to another client than the API key's."
	case errors.Is(err, sessiontoken.ErrWrongIssuer):
		return CodeTokenWrongIssuer, "The session token was issued by another service."
	default:
		return CodeTokenMalformed, "The session token is malformed."
	}
}

// tokenRefused answers 401 with a Bearer challenge (RFC 6750 §3), and counts the failure
// against the request's source unless the token is one this service signed (expired, not yet
// valid, of a deleted user): that is no guess (see authfailures.go).
func tokenRefused(c *gin.Context, gate authGate, code, detail string) {
	switch code {
	case CodeTokenExpired, CodeTokenNotYetValid, CodeTokenRevoked:
	default:
		if gate.failed(c) {
			return
		}
	}
	c.Header("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q, error="invalid_token"`, "samla"))
	AbortProblem(c, http.StatusUnauthorized, code, detail)
}

// jwksHandler serves the session tokens' public keys. They change only with a restart (key
// rotation), and a verifier that meets an unknown kid fetches them again, so caches may keep
// them for a while.
func jwksHandler(jwks []byte) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Header("Cache-Control", "public, max-age=300")
		c.Data(http.StatusOK, "application/jwk-set+json", jwks)
	}
}
