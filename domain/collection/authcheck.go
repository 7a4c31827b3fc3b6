package collection

// PersonCheck is the outcome of the spec's AUTHENTICATION_MISMATCH rules.
type PersonCheck int

const (
	// PersonUnverifiable: neither the authentication flow nor the company told who
	// authenticated (rule d), or the collection named nobody to compare with.
	PersonUnverifiable PersonCheck = iota
	// PersonMatches: the person who authenticated is the one who started the collection.
	PersonMatches
	// PersonMismatch: someone else authenticated (rule c): the collection ends
	// AUTHENTICATION_MISMATCH.
	PersonMismatch
)

// CheckAuthenticatedPerson applies the spec's rules (a)–(d): the personal number verified in
// the authentication flow is used when there is one (a); otherwise one the company returns (b);
// a difference from the personal number of the request is a mismatch (c); without either, or
// without a number in the request, nothing can be verified (d). Numbers are the 12-digit form.
func CheckAuthenticatedPerson(requested, verifiedInFlow, reportedByCompany string) PersonCheck {
	if requested == "" {
		return PersonUnverifiable
	}
	observed := verifiedInFlow
	if observed == "" {
		observed = reportedByCompany
	}
	switch {
	case observed == "":
		return PersonUnverifiable
	case observed == requested:
		return PersonMatches
	default:
		return PersonMismatch
	}
}
