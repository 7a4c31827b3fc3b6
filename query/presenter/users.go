package presenter

import (
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/query"
)

// UserResponse is the API's UserResponse (2026-04-01): a live user has its externalId; a deleted
// one has externalId null and deletedAt.
type UserResponse struct {
	UserUUID   string  `json:"userUuid"`
	ExternalID *string `json:"externalId"`
	CreatedAt  string  `json:"createdAt"`
	DeletedAt  *string `json:"deletedAt,omitempty"`
}

// User presents a user.
func User(v query.UserView) UserResponse {
	out := UserResponse{UserUUID: v.UserUUID, ExternalID: v.ExternalID, CreatedAt: v.CreatedAt.UTC().Format(timeFormat)}
	if v.DeletedAt != nil {
		deleted := v.DeletedAt.UTC().Format(timeFormat)
		out.DeletedAt = &deleted
		out.ExternalID = nil // erased with the user, whatever a read model still held
	}
	return out
}

// UserCollectionItem is one collection in GET /users/{userUuid}/collections.
type UserCollectionItem struct {
	CollectionID string `json:"collectionId"`
	Company      string `json:"company"`
	LoginMethod  string `json:"loginMethod"`
	Status       string `json:"status"`
	CreatedAt    string `json:"createdAt"`
	UpdatedAt    string `json:"updatedAt"`
}

// UserCollectionsResponse is a page of a user's collections, newest first; NextCursor is absent
// on the last page.
type UserCollectionsResponse struct {
	Items      []UserCollectionItem `json:"items"`
	NextCursor string               `json:"nextCursor,omitempty"`
}

// UserCollection presents one collection of a user's list for a client speaking version, its
// status as that version shows it (market is the company's, "" when the catalog no longer has
// it), as the status poll would.
func UserCollection(version httpapi.Version, market string, s query.CollectionSummary) UserCollectionItem {
	aud := Audience{Version: version, Product: collection.Product(s.Product), Market: market}
	return UserCollectionItem{
		CollectionID: s.CollectionID, Company: s.Company, LoginMethod: s.LoginMethod,
		Status:    string(Status(aud, collection.Status(s.Status))),
		CreatedAt: s.CreatedAt.UTC().Format(timeFormat), UpdatedAt: s.UpdatedAt.UTC().Format(timeFormat),
	}
}
