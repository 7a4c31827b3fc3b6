package presenter

import (
	"maps"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/eid"
	"github.com/samla/samla/query"
)

// Keys of a status's extraInformation (API.md).
const (
	ExtraAnimatedQRData     = "SWEDISH_MOBILE_EID_ANIMATED_QR_DATA"
	ExtraAutoStartToken     = "SWEDISH_MOBILE_EID_AUTOSTART_TOKEN"
	ExtraRequiredInputTypes = "REQUIRED_INPUT_TYPES"
	ExtraInstructions       = "INSTRUCTIONS"
	ExtraMessage            = "MESSAGE"
)

// RequestObject is one entry of INSTRUCTIONS: the API's Request object. headers is always an
// object, body only present when the request has one.
type RequestObject struct {
	RequestID string            `json:"requestId"`
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	Body      *string           `json:"body,omitempty"`
}

// ExtraInformation is the extraInformation of a status as a poll at now shows it: what the
// status change attached as free-form extra information, overlaid with what the current status
// asks of the client (REQUIRED_INPUT_TYPES, INSTRUCTIONS, MESSAGE) and, for a pending EID order,
// the autostart token and the animated QR data. The QR data is computed here, at every poll,
// because it changes every second (SANDBOX.md); the secret it is computed from never appears.
// A final status asks nothing, so it shows no input kinds, instructions or EID data whatever
// the row still holds; its MESSAGE stays (it explains the outcome). The result is never nil.
func ExtraInformation(v query.StatusView, now time.Time) map[string]any {
	out := make(map[string]any, len(v.ExtraInformation)+5)
	maps.Copy(out, v.ExtraInformation)
	if v.Message != "" {
		out[ExtraMessage] = v.Message
	}
	if collection.Status(v.Status).IsFinal() {
		for _, k := range []string{ExtraAnimatedQRData, ExtraAutoStartToken, ExtraRequiredInputTypes, ExtraInstructions} {
			delete(out, k)
		}
		return out
	}
	if len(v.RequiredInputTypes) > 0 {
		out[ExtraRequiredInputTypes] = append([]string(nil), v.RequiredInputTypes...)
	}
	if len(v.Instructions) > 0 {
		list := make([]RequestObject, len(v.Instructions))
		for i, in := range v.Instructions {
			headers := in.Headers
			if headers == nil {
				headers = map[string]string{} // the contract always has the object
			}
			list[i] = RequestObject{RequestID: in.RequestID, Method: in.Method, URL: in.URL, Headers: headers, Body: in.Body}
		}
		out[ExtraInstructions] = list
	}
	if o := v.EIDOrder; o != nil {
		if o.AutoStartToken != "" {
			out[ExtraAutoStartToken] = o.AutoStartToken
		}
		if o.QRStartToken != "" && v.QRStartSecret != "" {
			out[ExtraAnimatedQRData] = eid.QRData(o.QRStartToken, v.QRStartSecret, o.StartedAt, now)
		}
	}
	return out
}
