package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// collectedValueKeys are the members of the data bodies whose values are collected data or
// personal data: none of them may appear in the audit history.
var collectedValueKeys = map[string]bool{
	"insuranceNumber": true, "displayName": true, "holderName": true, "name": true, "policyNumber": true,
	"insuredPersonName": true, "accountNumber": true, "isin": true, "iban": true, "bban": true, "maskedPan": true,
	"personalNumber": true, "firstName": true, "lastName": true, "email": true, "phoneNumber": true,
	"street": true, "postalCode": true, "city": true, "fileName": true,
	// numbers
	"amount": true, "premium": true, "interestRate": true, "quantity": true,
}

// collectedValues walks a data body and returns, as they would be written in JSON, the values of
// its collectedValueKeys.
func collectedValues(v any, key string, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			collectedValues(child, k, out)
		}
	case []any:
		for _, child := range v {
			collectedValues(child, key, out)
		}
	case string:
		if collectedValueKeys[key] && v != "" {
			out[v] = true
		}
	case float64:
		if collectedValueKeys[key] {
			out[strconv.FormatFloat(v, 'f', -1, 64)] = true
		}
	}
}

// apiTime is how the API writes times (httpapi.TimeFormat).
var apiTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// fingerprint matches a hex SHA-256 (a request hash, a key hash, a file's digest).
var fingerprint = regexp.MustCompile(`[0-9a-f]{64}`)

// TestAuditHistoryShowsWhatHappenedNeverValues is the regression test of the audit view: the
// history of a completed collection of the richest persona, at the insurer, the pension company,
// the bank and the French pension-information company, shows its status path, and none of the
// personal number, the name given, any collected value (numbers, names, amounts), file name or
// fingerprint.
func TestAuditHistoryShowsWhatHappenedNeverValues(t *testing.T) {
	t.Parallel()
	c := personaService(t)
	for _, tc := range []struct{ company, data string }{
		{"se-demo-insurer", "insurance"},
		{"se-demo-pension", "wealth"},
		{"se-demo-bank", "wealth"},
		{"fr-demo-pension-info", "wealth"},
	} {
		id := c.completed(collectionRequest{company: tc.company, pn: "191212121212", ownerName: "Tolvan Tolvansson"})
		code, data, _ := c.data("/collections/"+id+"/"+tc.data+"/data", "2026-04-01")
		if code != http.StatusOK {
			t.Fatalf("%s: data = %d %v", tc.company, code, data)
		}
		values := map[string]bool{}
		collectedValues(data, "", values)
		if len(values) < 3 {
			t.Fatalf("%s: the data holds too few values to check the history against: %v", tc.company, values)
		}

		path := c.historyPath(id, "COMPLETED")
		if len(path) < 2 || !slices.Contains(path, "LOGIN") || path[len(path)-1] != "COMPLETED" {
			t.Fatalf("%s: the history lost the status path: %v", tc.company, path)
		}
		code, raw, _ := c.do("GET", "/collections/"+id+"/events", nil, nil)
		if code != http.StatusOK {
			t.Fatalf("%s: events = %d %s", tc.company, code, raw)
		}
		history := string(raw)
		for _, secret := range []string{"191212121212", "Tolvan", "requestHash", "keyHash", "sha256", "fileName",
			"hmac-sha256", "personal", "instructions", "qrStart", "autoStart"} {
			if strings.Contains(history, secret) {
				t.Errorf("%s: the history shows %q: %s", tc.company, secret, history)
			}
		}
		if m := fingerprint.FindString(history); m != "" {
			t.Errorf("%s: the history shows a fingerprint %s", tc.company, m)
		}
		var h historyBody
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatal(err)
		}
		// Values are looked for in the payloads only: the envelopes' ids, positions and times
		// are Samla's own and may contain any digits by chance.
		texts, numbers := payloadLeaves(t, h)
		// Which kinds of insurance a person holds (life, health) is collected data too.
		kinds := map[string]bool{}
		collectedKinds(data, kinds)
		for _, text := range texts {
			if kinds[text] {
				t.Errorf("%s: the history names the insurance type %s: %s", tc.company, text, history)
			}
		}
		for v := range values {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				// A number is only a leak as a whole token; short ones (0, 1, 12) are counts too.
				if len(v) < 3 {
					continue
				}
				token := regexp.MustCompile(`(^|[^0-9.])` + regexp.QuoteMeta(v) + `($|[^0-9.])`)
				if numbers[f] || slices.ContainsFunc(texts, token.MatchString) {
					t.Errorf("%s: the history shows the collected number %s: %s", tc.company, v, history)
				}
				continue
			}
			if strings.Contains(history, v) {
				t.Errorf("%s: the history shows the collected value %q: %s", tc.company, v, history)
			}
		}
		types := map[string]bool{}
		for _, e := range h.Events {
			types[e.Type] = true
		}
		want := "collection.insurances-collected"
		if tc.data == "wealth" {
			want = "collection.wealth-collected"
		}
		if !types["collection.started"] || !types[want] {
			t.Errorf("%s: the history lacks events: %v", tc.company, types)
		}
	}
}

// payloadLeaves returns the strings (times left out) and the numbers of every payload of h.
func payloadLeaves(t *testing.T, h historyBody) (texts []string, numbers map[float64]bool) {
	t.Helper()
	numbers = map[float64]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, child := range v {
				walk(child)
			}
		case []any:
			for _, child := range v {
				walk(child)
			}
		case string:
			if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
				texts = append(texts, v)
			} else if !apiTime.MatchString(v) {
				t.Errorf("a time of the history is not in the API's format (UTC, milliseconds): %s", v)
			}
		case float64:
			numbers[v] = true
		}
	}
	for _, e := range h.Events {
		var payload any
		if err := json.Unmarshal(e.Payload, &payload); err != nil {
			t.Fatalf("payload of %s: %v", e.Type, err)
		}
		walk(payload)
	}
	return texts, numbers
}

// collectedKinds adds the insuranceType values of a data body to out.
func collectedKinds(v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if s, ok := child.(string); ok && k == "insuranceType" {
				out[s] = true
			}
			collectedKinds(child, out)
		}
	case []any:
		for _, child := range v {
			collectedKinds(child, out)
		}
	}
}
