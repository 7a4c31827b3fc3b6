package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/samla/samla/connectors/worker"
)

const (
	// SignatureHeader carries a callback's signature:
	// "t=<unix seconds>,v1=<hex HMAC-SHA256(key=the client's provider API key, "<t>.<body>")>".
	// Several v1 entries may appear (a provider rotating keys); one matching is enough.
	SignatureHeader = "Signing-Signature"
	// DefaultCallbackTolerance is how far a callback's timestamp may be from the receiver's
	// clock when VerifyCallback is given no tolerance.
	DefaultCallbackTolerance = 5 * time.Minute
	// MaxCallbackBody bounds a callback body: a receiver reads at most this much
	// (http.MaxBytesReader) before calling VerifyCallback, which refuses more.
	MaxCallbackBody = 64 << 10
)

var (
	// ErrCallbackSignatureMissing: no Signing-Signature header, or one without a timestamp and
	// a v1 signature of the expected form.
	ErrCallbackSignatureMissing = errors.New("signing callback: signature header missing or malformed")
	// ErrCallbackSignatureInvalid: no v1 signature matches the body under the key.
	ErrCallbackSignatureInvalid = errors.New("signing callback: signature does not match")
	// ErrCallbackStale: authentic, but signed outside the tolerance around now (a replay, or a
	// clock far off).
	ErrCallbackStale = errors.New("signing callback: timestamp outside the tolerance")
	// ErrCallbackMalformed: authentic and fresh, but the body is not a callback.
	ErrCallbackMalformed = errors.New("signing callback: body is not a valid callback")
)

// Callback is one state change the provider reported.
type Callback struct {
	// EventID is unique per event: the provider may deliver an event more than once.
	EventID   string
	ProcessID string
	// Reference is Samla's document id.
	Reference string
	State     worker.SigningState
	Sealed    bool
	// At is when the change happened at the provider.
	At time.Time
}

// VerifyCallback authenticates a callback and decodes it. It checks the HMAC of
// "<t>.<body>" under apiKey (constant-time) and then that t is within ±tolerance of now
// (DefaultCallbackTolerance when tolerance <= 0). The timestamp bounds replays in time only: a
// captured callback replays within the tolerance, so the receiver must also drop an EventID it
// has processed already. Callbacks may arrive out of order; the receiver treats one as a hint and
// reads the process (SigningStatus) rather than trusting the order of arrival.
func VerifyCallback(apiKey string, header http.Header, body []byte, now time.Time, tolerance time.Duration) (Callback, error) {
	if tolerance <= 0 {
		tolerance = DefaultCallbackTolerance
	}
	t, sigs, err := parseSignatureHeader(header.Values(SignatureHeader))
	if err != nil {
		return Callback{}, err
	}
	if apiKey == "" {
		// An empty HMAC key is no secret: whoever knows the format could sign.
		return Callback{}, fmt.Errorf("%w: no key to verify with", ErrCallbackSignatureInvalid)
	}
	mac := hmac.New(sha256.New, []byte(apiKey))
	mac.Write([]byte(strconv.FormatInt(t, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := mac.Sum(nil)
	ok := false
	for _, s := range sigs {
		// Every candidate is compared, so the time taken does not tell which one matched.
		if hmac.Equal(s, want) {
			ok = true
		}
	}
	if !ok {
		return Callback{}, ErrCallbackSignatureInvalid
	}
	signedAt := time.Unix(t, 0)
	if d := now.Sub(signedAt); d > tolerance || d < -tolerance {
		return Callback{}, fmt.Errorf("%w: signed %s from now (tolerance %s)", ErrCallbackStale, d.Round(time.Second), tolerance)
	}
	if len(body) > MaxCallbackBody {
		return Callback{}, fmt.Errorf("%w: larger than %d bytes", ErrCallbackMalformed, MaxCallbackBody)
	}
	var w struct {
		EventID   string    `json:"eventId"`
		ProcessID string    `json:"processId"`
		Reference string    `json:"reference"`
		State     string    `json:"state"`
		Sealed    bool      `json:"sealed"`
		At        time.Time `json:"at"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return Callback{}, fmt.Errorf("%w: %w", ErrCallbackMalformed, err)
	}
	state, known := mapState(w.State)
	switch {
	case w.EventID == "" || w.ProcessID == "":
		return Callback{}, fmt.Errorf("%w: eventId and processId are required", ErrCallbackMalformed)
	case !known:
		return Callback{}, fmt.Errorf("%w: unknown state %q", ErrCallbackMalformed, truncate(w.State, 32))
	case w.At.IsZero():
		return Callback{}, fmt.Errorf("%w: at is required", ErrCallbackMalformed)
	}
	return Callback{EventID: w.EventID, ProcessID: w.ProcessID, Reference: w.Reference, State: state, Sealed: w.Sealed, At: w.At}, nil
}

// parseSignatureHeader reads "t=<unix seconds>,v1=<hex>[,v1=<hex>…]"; other keys are ignored
// (later schemes), a repeated t is malformed.
func parseSignatureHeader(values []string) (int64, [][]byte, error) {
	if len(values) != 1 || len(values[0]) > 1024 {
		return 0, nil, ErrCallbackSignatureMissing
	}
	var (
		t     int64
		haveT bool
		sigs  [][]byte
	)
	for part := range strings.SplitSeq(values[0], ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return 0, nil, ErrCallbackSignatureMissing
		}
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || haveT || n <= 0 {
				return 0, nil, ErrCallbackSignatureMissing
			}
			t, haveT = n, true
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != sha256.Size {
				return 0, nil, ErrCallbackSignatureMissing
			}
			sigs = append(sigs, b)
		}
	}
	if !haveT || len(sigs) == 0 {
		return 0, nil, ErrCallbackSignatureMissing
	}
	return t, sigs, nil
}
