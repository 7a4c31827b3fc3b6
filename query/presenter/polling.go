package presenter

import (
	"time"

	"github.com/samla/samla/domain/company"
)

// DefaultPollingInterval is for a login method without an entry.
const DefaultPollingInterval = time.Second

// PollingInterval is how often a client should poll a collection's status, by login method: as
// often as the user can see a change, and no more.
func PollingInterval(loginMethod string) time.Duration {
	switch loginMethod {
	case company.LoginEIDOtherDevice, company.LoginEIDOtherDeviceMock:
		// The animated QR code changes every second; polling faster shows nothing new.
		return time.Second
	case company.LoginEIDSameDeviceClientSide:
		// Client-side login: the app waits on INSTRUCTIONS to run on the user's device, and each
		// round trip is on the user's critical path.
		return 500 * time.Millisecond
	case company.LoginPDFUpload:
		// Parsing an uploaded document takes seconds and nobody watches a screen that changes.
		return 2 * time.Second
	}
	return DefaultPollingInterval
}
