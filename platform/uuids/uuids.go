// Package uuids spells ids the one way Samla stores and compares them. Every UUID that enters
// through the API (a path's collectionId or userUuid, a body's userUuid, a cursor's position, a
// session token's subject) goes through Canonical, so that one id has one spelling wherever it
// is looked up, compared or scoped: an uppercase spelling of a session's own user is that user.
package uuids

// Canonical returns s in the canonical form of RFC 9562, lowercase 8-4-4-4-12 hexadecimal, and
// true when s is a UUID in that textual form in any case. Anything else, the braced, URN and
// unhyphenated forms included, is not an id of Samla's: false.
func Canonical(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	var out [36]byte
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", false
			}
		default:
			switch {
			case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
			case 'A' <= c && c <= 'F':
				c += 'a' - 'A'
			default:
				return "", false
			}
		}
		out[i] = c
	}
	return string(out[:]), true
}

// IsCanonical reports whether s is a UUID already in its canonical form.
func IsCanonical(s string) bool {
	c, ok := Canonical(s)
	return ok && c == s
}
