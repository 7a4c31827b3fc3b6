package query

import (
	"context"
	"time"
)

// UserView is a user as the users read model holds it, its personal data opened.
type UserView struct {
	UserUUID string
	Tenant   string
	// ExternalID is the client's identifier of the user; nil once the user was deleted (its
	// personal data erased). Personal data: never logged.
	ExternalID *string
	CreatedAt  time.Time
	// DeletedAt is when the user was deleted, nil while it is live.
	DeletedAt *time.Time
}

// UserReader reads the users read model.
type UserReader interface {
	// Get returns the tenant's user, deleted or not, or an error wrapping ErrNotFound when the
	// tenant has no such user (another tenant's included).
	Get(ctx context.Context, tenant, userUUID string) (UserView, error)
	// FindByExternalID returns the tenant's live user with this externalId, or an error
	// wrapping ErrNotFound: a deleted user's externalId names nobody.
	FindByExternalID(ctx context.Context, tenant, externalID string) (UserView, error)
}

// CollectionSummary is one collection in a user's list, as the status read model holds it.
type CollectionSummary struct {
	CollectionID string
	Company      string
	Product      string // INSURANCE or WEALTH
	LoginMethod  string
	Status       string // a domain status (collection.Status); the presenter maps it per version
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// CollectionCursor is where a page of a user's collections ends: the list is ordered newest
// first, by CreatedAt and then CollectionID, both of which never change, so the next page starts
// strictly after it whatever was added or changed meanwhile.
type CollectionCursor struct {
	CreatedAt    time.Time
	CollectionID string
}

// UserCollectionsReader lists a user's collections.
type UserCollectionsReader interface {
	// ListByUser returns up to limit of the tenant's collections made for userUUID, newest
	// first, starting after the cursor (nil: from the newest). It returns nothing for another
	// tenant's user.
	ListByUser(ctx context.Context, tenant, userUUID string, after *CollectionCursor, limit int) ([]CollectionSummary, error)
}
