package httpapi

import "time"

// TimeFormat is how every time leaves the API: RFC 3339 in UTC with milliseconds, the precision
// envelopes carry, so that the same instant always renders the same string.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// FormatTime renders t in TimeFormat.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }
