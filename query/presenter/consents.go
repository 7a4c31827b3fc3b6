package presenter

import (
	"time"

	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/eid"
	"github.com/samla/samla/query"
)

// Consents exist from 2026-04-01 on only, so these bodies have one version.

// ConsentStatusResponse is the body of GET /consents/{consentId}/status.
type ConsentStatusResponse struct {
	ConsentID string   `json:"consentId"`
	Status    string   `json:"status"`
	ExpiresAt *string  `json:"expiresAt,omitempty"`
	Scope     []string `json:"scope"`
	// AuthInstructions is there only while the consent awaits its authorization.
	AuthInstructions *ConsentAuthInstructions `json:"authInstructions,omitempty"`
	PollingInterval  int64                    `json:"pollingInterval"` // milliseconds
	Error            *ConsentErrorResponse    `json:"error,omitempty"`
}

// ConsentAuthInstructions is how the user signs the consent's EID order: the animated QR data of
// this second for another device, the autostart token for this one.
type ConsentAuthInstructions struct {
	QRData         string `json:"qrData,omitempty"`
	AutoStartToken string `json:"autoStartToken,omitempty"`
}

// ConsentErrorResponse is a failed consent's error.
type ConsentErrorResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ConsentResponse is the body of GET /consents/{consentId} and DELETE /consents/{consentId},
// and one item of GET /users/{userUuid}/consents.
type ConsentResponse struct {
	ConsentID    string                `json:"consentId"`
	UserUUID     string                `json:"userUuid"`
	Company      string                `json:"company"`
	Status       string                `json:"status"`
	Scope        []string              `json:"scope"`
	CreatedAt    string                `json:"createdAt"`
	AuthorizedAt *string               `json:"authorizedAt,omitempty"`
	ExpiresAt    *string               `json:"expiresAt,omitempty"`
	Error        *ConsentErrorResponse `json:"error,omitempty"`
}

// UserConsentsResponse is a page of a user's consents, newest first; NextCursor is absent on the
// last page.
type UserConsentsResponse struct {
	Items      []ConsentResponse `json:"items"`
	NextCursor string            `json:"nextCursor,omitempty"`
}

// ConsentStatus is the status a consent shows at now: an AUTHORIZED consent past its expiry is
// EXPIRED, whether or not the worker has recorded the expiry yet (it is a durable deadline,
// never a poll's decision, but no reader may see an expired consent as authorized meanwhile).
func ConsentStatus(v query.ConsentView, now time.Time) string {
	if consent.Status(v.Status) == consent.StatusAuthorized && !v.ExpiresAt.IsZero() && !now.Before(v.ExpiresAt) {
		return string(consent.StatusExpired)
	}
	return v.Status
}

// ConsentStatusPoll presents a consent's status poll at now. The animated QR data is computed
// here, at every poll, from the order's QR secret (SANDBOX.md), which never appears itself.
func ConsentStatusPoll(v query.ConsentView, now time.Time) ConsentStatusResponse {
	status := ConsentStatus(v, now)
	out := ConsentStatusResponse{
		ConsentID: v.ConsentID, Status: status, ExpiresAt: optionalTime(v.ExpiresAt), Scope: consentScope(v.Scope),
		PollingInterval: PollingInterval(v.LoginMethod).Milliseconds(), Error: consentError(v.Error),
	}
	if consent.Status(status) == consent.StatusAwaitingAuthorization {
		in := &ConsentAuthInstructions{}
		if o := v.EIDOrder; o != nil {
			in.AutoStartToken = o.AutoStartToken
			if o.QRStartToken != "" && o.QRStartSecret != "" {
				in.QRData = eid.QRData(o.QRStartToken, o.QRStartSecret, o.StartedAt, now)
			}
		}
		out.AuthInstructions = in
	}
	return out
}

// Consent presents a consent as it is at now.
func Consent(v query.ConsentView, now time.Time) ConsentResponse {
	return ConsentResponse{
		ConsentID: v.ConsentID, UserUUID: v.UserUUID, Company: v.Company, Status: ConsentStatus(v, now),
		Scope: consentScope(v.Scope), CreatedAt: v.CreatedAt.UTC().Format(timeFormat),
		AuthorizedAt: optionalTime(v.AuthorizedAt), ExpiresAt: optionalTime(v.ExpiresAt), Error: consentError(v.Error),
	}
}

// consentScope is a consent's scope as the contract has it: always a list.
func consentScope(s []string) []string {
	if s == nil {
		return []string{}
	}
	return append([]string(nil), s...)
}

func consentError(e *query.ConsentError) *ConsentErrorResponse {
	if e == nil {
		return nil
	}
	return &ConsentErrorResponse{Code: e.Code, Message: e.Message}
}

// optionalTime is a time of the API, or nil (absent) for the zero time.
func optionalTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(timeFormat)
	return &s
}
