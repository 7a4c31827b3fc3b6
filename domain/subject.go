package domain

// A data subject is whose personal data an event carries: each subject's personal data is
// sealed under a key of its own, so that destroying the key erases it everywhere
// (crypto-shredding). An aggregate whose events carry personal data implements
// DataSubject() string with the rules below; the repository seals what it appends under it.

// UserSubject is the data subject of a user, and of every collection made for that user.
func UserSubject(userUUID string) string { return "user-" + userUUID }

// CollectionSubject is the data subject of a collection that names no user: the collection
// is all Samla knows of the person.
func CollectionSubject(collectionID string) string { return "collection-" + collectionID }

// HolderSubject is the data subject of one user's hold on an externalId reservation, named by a
// random token rather than by the user: a sealed form names its subject in plain text, and a
// reservation's stream is the same for every user who ever has its externalId, so holds sealed
// under the users' own subjects would link an erased user to the next. The user records the
// token with its own personal data, and its erasure destroys both keys.
func HolderSubject(token string) string { return "holder-" + token }

// ClientSubject is the data subject of a client's secrets (its signing provider's key): they
// are sealed like personal data, under a key of the client's own.
func ClientSubject(clientID string) string { return "client-" + clientID }
