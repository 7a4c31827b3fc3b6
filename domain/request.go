package domain

// SameRequest tells whether a stored request hash (an idempotency fingerprint) identifies the
// request whose hash is hash in the current scheme and legacy in the scheme before it ("" for
// none), so that a retry of a request an older build recorded is still recognised. A stored hash
// that is "" identifies no request: it was erased with the personal data it sits in, or written
// before requests were fingerprinted, and no retry can be told from another request then.
func SameRequest(stored, hash, legacy string) bool {
	return stored != "" && (stored == hash || (legacy != "" && stored == legacy))
}
