// Package eid holds what Samla needs to know about the Swedish mobile electronic ID (EID)
// relying-party flow without talking to an EID provider: the animated QR code algorithm and the
// vocabulary of order states and hint codes. It has no dependencies so that the query side can
// compute the QR data at every status poll from the order data the connector recorded.
package eid

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// Order statuses of a collect answer.
const (
	StatusPending  = "pending"
	StatusComplete = "complete"
	StatusFailed   = "failed"
)

// Hint codes of a pending order.
const (
	// HintOutstandingTransaction: the order is out; the user has not opened the app yet.
	HintOutstandingTransaction = "outstandingTransaction"
	// HintStarted: the app was started (autostart token or QR scanned) and looks for the ID.
	HintStarted = "started"
	// HintUserSign: the user is asked to confirm with their security code.
	HintUserSign = "userSign"
)

// Hint codes of a failed order, and the error code of an order refused at start.
const (
	HintExpiredTransaction = "expiredTransaction"
	HintUserCancel         = "userCancel"
	HintStartFailed        = "startFailed"
	// HintCancelled: the order was cancelled because a new order for the same person came in.
	HintCancelled = "cancelled"
	// ErrorAlreadyInProgress refuses a new order while one for the same person is pending.
	ErrorAlreadyInProgress = "alreadyInProgress"
)

// QRPrefix starts every animated QR code.
const QRPrefix = "bankid"

// QRData is the content of the animated QR code at now: "bankid." + qrStartToken + "." + t +
// "." + hex(HMAC-SHA256(qrStartSecret, t)), t the whole seconds since the order started as a
// decimal string. It changes every second, so a photo of the code is useless a moment later;
// the secret itself is never shown. A clock behind the order's start counts as second 0.
func QRData(qrStartToken, qrStartSecret string, orderStartedAt, now time.Time) string {
	t := QRSeconds(orderStartedAt, now)
	return QRPrefix + "." + qrStartToken + "." + strconv.FormatInt(t, 10) + "." + QRAuthCode(qrStartSecret, t)
}

// QRSeconds is t of the QR algorithm: whole seconds elapsed since the order started, never
// negative.
func QRSeconds(orderStartedAt, now time.Time) int64 {
	d := now.Sub(orderStartedAt)
	if d < 0 {
		return 0
	}
	return int64(d / time.Second)
}

// QRAuthCode is hex(HMAC-SHA256(key = qrStartSecret, message = t as a decimal string)).
func QRAuthCode(qrStartSecret string, t int64) string {
	mac := hmac.New(sha256.New, []byte(qrStartSecret))
	mac.Write([]byte(strconv.FormatInt(t, 10)))
	return hex.EncodeToString(mac.Sum(nil))
}
