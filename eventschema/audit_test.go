package eventschema_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
)

// auditSummaries is what the audit history shows of every stored example: the allowlist,
// pinned. The examples carry every kind of value the history must not show.
var auditSummaries = map[string]string{
	"client.api-key-issued.v1":  `{"keyId":"k1","issuedAt":"2026-01-02T03:04:05.000Z"}`,
	"client.api-key-revoked.v1": `{"keyId":"k1","revokedAt":"2026-01-03T03:04:05.000Z"}`,
	"client.registered.v1":      `{"sandbox":true,"registeredAt":"2026-01-02T03:04:05.000Z"}`,
	"collection.claimed.v1":     `{"claimedAt":"2026-01-02T03:04:05.700Z"}`,
	"collection.document-collected.v1": `{"kind":"FRENCH_CAREER_STATEMENT","contentType":"application/pdf","sizeBytes":8,` +
		`"at":"2026-01-02T03:04:05.000Z"}`,
	"collection.document-uploaded.v1": `{"kind":"UPLOADED_PDF","contentType":"application/pdf","sizeBytes":8,"at":"2026-01-02T03:04:05.000Z"}`,
	"collection.document-collected.v2": `{"kind":"FRENCH_CAREER_STATEMENT","contentType":"application/pdf","sizeBytes":8,` +
		`"at":"2026-01-02T03:04:05.000Z"}`,
	"collection.document-uploaded.v2": `{"kind":"UPLOADED_PDF","contentType":"application/pdf","sizeBytes":8,"at":"2026-01-02T03:04:05.000Z"}`,
	"collection.input-supplied.v1": `{"kind":"COLLECTION_INPUT","inputTypes":["EMAIL","MOBILE_PHONE_NUMBER"],` +
		`"suppliedAt":"2026-01-02T03:04:07.000Z"}`,
	"collection.input-supplied.v1.responses": `{"kind":"CLIENT_RESPONSES","responseCount":1,"suppliedAt":"2026-01-02T03:04:07.000Z"}`,
	"collection.input-supplied.v1.keyed":     `{"kind":"COLLECTION_INPUT","inputTypes":["EMAIL"],"suppliedAt":"2026-01-02T03:04:07.000Z"}`,
	"collection.input-supplied.v2": `{"kind":"COLLECTION_INPUT","inputTypes":["EMAIL","MOBILE_PHONE_NUMBER"],` +
		`"suppliedAt":"2026-01-02T03:04:07.000Z"}`,
	"collection.input-supplied.v2.responses":   `{"kind":"CLIENT_RESPONSES","responseCount":1,"suppliedAt":"2026-01-02T03:04:07.000Z"}`,
	"collection.insurances-collected.v2":       `{"counts":{"insurances":2},"collectedAt":"2026-01-02T03:04:08.000Z"}`,
	"collection.insurances-collected.v2.empty": `{"counts":{"insurances":0},"collectedAt":"2026-01-02T03:04:08.000Z"}`,
	"collection.insurances-collected.v1": `{"counts":{"insurances":2},` +
		`"collectedAt":"2026-01-02T03:04:08.000Z"}`,
	"collection.started.v1": `{"company":"se-demo-insurer","product":"INSURANCE","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",` +
		`"apiVersion":"2025-01-01","hasUserUuid":false,"startedAt":"2026-01-02T03:04:05.678Z"}`,
	"collection.started.v2": `{"company":"se-demo-insurer","product":"INSURANCE","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",` +
		`"apiVersion":"2026-04-01","hasUserUuid":true,"startedAt":"2026-01-02T03:04:05.678Z"}`,
	"collection.started.v3": `{"company":"se-demo-insurer","product":"INSURANCE","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",` +
		`"apiVersion":"2026-04-01","hasUserUuid":true,"startedAt":"2026-01-02T03:04:05.678Z"}`,
	"collection.started.v4": `{"company":"se-demo-insurer","product":"INSURANCE","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",` +
		`"apiVersion":"2026-04-01","hasUserUuid":true,"startedAt":"2026-01-02T03:04:05.678Z"}`,
	"collection.started.v4.consent": `{"company":"se-demo-bank","product":"WEALTH","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",` +
		`"apiVersion":"2026-04-01","hasUserUuid":true,"consent":{"consentId":"2b7e9d41-5c3a-4f08-b6e2-8d1a0c9f7e35",` +
		`"scope":["CHECKING_ACCOUNTS","CREDIT_CARDS"]},"startedAt":"2026-01-02T03:04:05.678Z"}`,
	"collection.started.v3.pdf-upload": `{"company":"se-demo-insurer","product":"INSURANCE","loginMethod":"PDF_UPLOAD",` +
		`"apiVersion":"2026-04-01","hasUserUuid":false,"startedAt":"2026-01-02T03:04:05.678Z"}`,
	"collection.status-changed.v1": `{"from":"LOGIN","to":"WAITING_FOR_USER_ACTION","changedAt":"2026-01-02T03:04:06.000Z"}`,
	"collection.status-changed.v1.eid-order": `{"from":"LOGIN","to":"WAITING_FOR_USER_ACTION","eidOrderOpened":true,` +
		`"deadline":{"kind":"EID_ORDER","dueAt":"2026-01-02T03:04:35.500Z"},"changedAt":"2026-01-02T03:04:05.500Z"}`,
	"collection.status-changed.v1.input": `{"from":"LOGIN","to":"COLLECTION_INPUT_PENDING","requiredInputTypes":["EMAIL"],` +
		`"deadline":{"kind":"COLLECTION_INPUT","dueAt":"2026-01-02T03:06:05.000Z"},"changedAt":"2026-01-02T03:04:05.000Z"}`,
	"collection.status-changed.v1.instructions": `{"from":"LOGIN","to":"WAITING_FOR_USER_ACTION","instructionCount":1,` +
		`"changedAt":"2026-01-02T03:04:05.000Z"}`,
	"collection.status-changed.v2": `{"from":"LOGIN","to":"WAITING_FOR_USER_ACTION","changedAt":"2026-01-02T03:04:06.000Z"}`,
	"collection.status-changed.v2.eid-order": `{"from":"LOGIN","to":"WAITING_FOR_USER_ACTION","eidOrderOpened":true,` +
		`"deadline":{"kind":"EID_ORDER","dueAt":"2026-01-02T03:04:35.500Z"},"changedAt":"2026-01-02T03:04:05.500Z"}`,
	"collection.status-changed.v2.input": `{"from":"LOGIN","to":"COLLECTION_INPUT_PENDING","requiredInputTypes":["EMAIL"],` +
		`"deadline":{"kind":"COLLECTION_INPUT","dueAt":"2026-01-02T03:06:05.000Z"},"changedAt":"2026-01-02T03:04:05.000Z"}`,
	"collection.status-changed.v2.instructions": `{"from":"LOGIN","to":"WAITING_FOR_USER_ACTION","instructionCount":2,` +
		`"deadline":{"kind":"EID_ORDER","dueAt":"2026-01-02T03:05:05.000Z"},"changedAt":"2026-01-02T03:04:05.000Z"}`,
	"externalid.released.v1": `{"releasedAt":"2026-01-03T03:04:05.000Z"}`,
	"externalid.reserved.v1": `{"reservedAt":"2026-01-02T03:04:05.678Z"}`,
	"externalid.released.v2": `{"releasedAt":"2026-01-03T03:04:05.000Z"}`,
	"externalid.reserved.v2": `{"reservedAt":"2026-01-02T03:04:05.678Z"}`,
	"user.created.v1":        `{"createdAt":"2026-01-02T03:04:05.678Z"}`,
	"user.created.v1.erased": `{"createdAt":"2026-01-02T03:04:05.678Z"}`,
	"user.created.v2":        `{"createdAt":"2026-01-02T03:04:05.678Z"}`,
	"user.deleted.v1":        `{"deletedAt":"2026-01-03T03:04:05.000Z"}`,
	"consent.created.v1": `{"company":"se-demo-bank","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE",` +
		`"scope":["CHECKING_ACCOUNTS","CREDIT_CARDS","SAVINGS_ACCOUNTS"],"createdAt":"2026-01-02T03:04:05.678Z"}`,
	"consent.created.v1.erased": `{"company":"se-demo-bank","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",` +
		`"scope":["SAVINGS_ACCOUNTS"],"createdAt":"2026-01-02T03:04:05.678Z"}`,
	"consent.claimed.v1":                      `{"claimedAt":"2026-01-02T03:04:05.700Z"}`,
	"consent.authorization-started.v1":        `{"at":"2026-01-02T03:04:06.000Z","deadline":"2026-01-02T03:04:36.000Z"}`,
	"consent.authorization-started.v1.erased": `{"at":"2026-01-02T03:04:06.000Z","deadline":"2026-01-02T03:04:36.000Z"}`,
	"consent.authorized.v1":                   `{"authorizedAt":"2026-01-02T03:04:10.000Z","expiresAt":"2026-07-01T03:04:10.000Z"}`,
	"consent.failed.v1":                       `{"code":"AUTHENTICATION_MISMATCH","at":"2026-01-02T03:04:10.000Z"}`,
	"consent.revoked.v1":                      `{"reason":"CLIENT","at":"2026-01-03T03:04:05.000Z"}`,
	"consent.revoked.v1.user-deleted":         `{"reason":"USER_DELETED","at":"2026-01-03T03:04:05.000Z"}`,
	"consent.expired.v1":                      `{"at":"2026-07-01T03:04:10.000Z"}`,
	"collection.wealth-collected.v1": `{"counts":{"investments":1,"loans":1,"pensions":2,"psd2CheckingAccounts":1,` +
		`"psd2CreditCards":1,"psd2SavingsAccounts":0,"savings":1},"collectedAt":"2026-01-02T03:04:08.000Z"}`,
	"collection.wealth-collected.v2": `{"counts":{"investments":1,"loans":1,"pensions":2,"psd2CheckingAccounts":1,` +
		`"psd2CreditCards":1,"psd2SavingsAccounts":0,"savings":1},"collectedAt":"2026-01-02T03:04:08.000Z"}`,
	"collection.wealth-collected.v3": `{"counts":{"investments":1,"loans":1,"pensions":2,"psd2CheckingAccounts":1,` +
		`"psd2CreditCards":1,"psd2SavingsAccounts":0,"savings":1},"collectedAt":"2026-01-02T03:04:08.000Z",` +
		`"psd2Read":["CHECKING_ACCOUNTS","CREDIT_CARDS","SAVINGS_ACCOUNTS"]}`,
	"cancellation.canceled.v1":          `{"at":"2026-11-25T10:03:00.000Z","reason":"CLIENT"}`,
	"cancellation.claimed.v1":           `{"claimedAt":"2026-11-25T10:00:01.000Z"}`,
	"cancellation.document-failed.v1":   `{"at":"2026-11-25T10:00:02.000Z","code":"DOCUMENT_REFUSED"}`,
	"cancellation.provider-notified.v1": `{"at":"2026-11-25T10:05:00.500Z"}`,
	"cancellation.rejected.v1":          `{"at":"2026-11-25T10:05:00.000Z"}`,
	"cancellation.requested.v1":         `{"company":"se-demo-insurer","insuranceId":"INS-1","insuranceType":"HOME","deliveryMethod":"EMAIL","templateVersion":1,"requestedAt":"2026-11-25T10:00:00.000Z"}`,
	"cancellation.sealed.v1":            `{"sealedAt":"2026-11-25T10:05:01.000Z","size":8}`,
	"cancellation.sent.v1":              `{"at":"2026-11-25T10:00:02.000Z","deadline":"2026-12-25T10:00:02.000Z","documentSize":2048}`,
	"cancellation.signed.v1":            `{"signedAt":"2026-11-25T10:05:00.000Z","method":"SANDBOX_EID"}`,
	"cancellation.timed-out.v1":         `{"at":"2026-12-25T10:00:02.000Z"}`,
	"client.api-key-retiring.v1":        `{"keyId":"k-0c1d2e3f4a5b","validUntil":"2026-11-26T09:00:00.000Z","at":"2026-11-25T09:00:00.000Z"}`,
	"client.certificate-issued.v1":      `{"serial":"4f2a9c","environment":"test","notAfter":"2027-11-25T09:00:00.000Z","issuedAt":"2026-11-25T09:00:00.000Z"}`,
	"client.certificate-revoked.v1":     `{"serial":"4f2a9c","revokedAt":"2026-12-01T09:00:00.000Z"}`,
	"client.settings-changed.v1":        `{"rateLimit":500,"burst":1000,"mtlsOnly":true,"changedAt":"2026-11-25T09:00:00.000Z"}`,
	"client.signing-configured.v1":      `{"templateVersion":1,"templateHash":"sha256:5e8f0c9a7b6d4e3f","configuredAt":"2026-11-25T09:00:00.000Z"}`,
}

// neverAudited are values of the stored examples that the audit history must never show:
// personal data, collected values, free text, tokens, secrets, file names and fingerprints.
var neverAudited = []string{
	"199001010017", "191212121212", "Tolvan", "tolvan@example.se", "46701234567", "Stockholm", // personal data
	"H-123", "189.5", "MONTHLY", "2027-03-01", "ITP-0001", "512345.5", "Tjänstepension", "SE4550000000058398257466",
	"10523.75", "1234", "30000", "2100000", "3.42", "Global Index", "SE0000000001", "ISK", "MORTGAGE", "OCCUPATIONAL", // collected values
	"Open the electronic-ID app", "Scan the QR code", "Enter the e-mail", "Run the requests", // the company's free text
	"67df3917", "7c40b5c9", "d28db9a7", "device-token", "company.example", "autoStartToken", // EID tokens, secrets, requests
	"ABC123", "Bolån", "Tolvgatan", "5555 55", "9960-121", // number plates, addresses and numbers in collected values
	"letter.pdf", "releve-de-carriere.pdf", "hemförsäkring", "JVBERi0", // file names and content
	"5b0a4e5a", "5e884898", "9f2c", "9f2d", "9f2e", "1a2b", "supply-tolvan", // digests, key hashes, request fingerprints, keys
	"6f1c2a9e", "0190f4a2", "Acme AB", "embedded", "r1", // the user's id, ids the URL already gives, names, hosts
	"holder-", "3d1c5a0e", // the subject of a user's hold on its externalId
	"bank-consent", "5e1f", "Another person signed", // a consent's id at the bank, a failure's free text
}

func TestAuditSummaryOfEveryStoredExample(t *testing.T) {
	r := registry(t)
	files, err := filepath.Glob("testdata/examples/*.json")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		m := exampleName.FindStringSubmatch(name)
		if m == nil {
			t.Fatalf("%s: name is not <type>.v<version>[.<variant>].json", f)
		}
		version, _ := strconv.Atoi(m[2])
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		summary, gotVersion, err := r.AuditSummary(eventschema.Envelope{EventID: "e", Type: m[1], SchemaVersion: version,
			Stream: "s", Payload: raw})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		seen[name] = true
		if current, _ := r.CurrentVersion(m[1]); gotVersion != current {
			t.Errorf("%s: summary of version %d, want the current %d", name, gotVersion, current)
		}
		want, ok := auditSummaries[name]
		if !ok {
			t.Errorf("%s: no expected summary; its summary is %s", name, summary)
			continue
		}
		if !jsonEqual(t, summary, []byte(want)) {
			t.Errorf("%s: summary\n got %s\nwant %s", name, summary, want)
		}
		for _, value := range neverAudited {
			if strings.Contains(string(summary), value) {
				t.Errorf("%s: summary %s shows %q", name, summary, value)
			}
		}
		// The summary shows nothing of the personal part, so an erasure changes none of it:
		// the counts of collected records, too, stay as they were.
		erased, _, err := r.AuditSummary(eventschema.Envelope{EventID: "e", Type: m[1], SchemaVersion: version,
			Stream: "s", Payload: sealedThenErased(t, raw)})
		if err != nil || !jsonEqual(t, erased, summary) {
			t.Errorf("%s: summary after the erasure %s, %v; want %s", name, erased, err, summary)
		}
	}
	for name := range auditSummaries {
		if !seen[name] {
			t.Errorf("expected summary of %s, which is not a stored example", name)
		}
	}
}

// TestAuditSummaryOfUnknownIsTheEnvelopeOnly: a type or version written by a newer build has no
// summary, whatever its payload holds.
func TestAuditSummaryOfUnknownIsTheEnvelopeOnly(t *testing.T) {
	r := registry(t)
	for _, env := range []eventschema.Envelope{
		{Type: "consent.granted", SchemaVersion: 1, Payload: json.RawMessage(`{"personalNumber":"199001010017"}`)},
		{Type: "consent.granted", SchemaVersion: 4, Payload: json.RawMessage(`["not an object"]`)},
		{Type: collection.EventClaimed, SchemaVersion: 9, Payload: json.RawMessage(`{"workerId":"w","secret":"x"}`)},
	} {
		summary, version, err := r.AuditSummary(env)
		if err != nil || summary != nil || version != env.SchemaVersion {
			t.Errorf("%s v%d: summary %s, version %d, %v; want none, %d", env.Type, env.SchemaVersion, summary, version, err, env.SchemaVersion)
		}
	}
	// A payload of a known type that does not decode is an error, not an empty summary.
	if _, _, err := r.AuditSummary(eventschema.Envelope{Type: collection.EventClaimed, SchemaVersion: 1,
		Payload: json.RawMessage(`["not","an","object"]`)}); err == nil {
		t.Fatal("a malformed payload of a known type was summarised")
	}
}

func jsonEqual(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// TestWithProtectedData: the marker joins a summary's members, keeping their order, and never
// spells "personal" (no history may contain it).
func TestWithProtectedData(t *testing.T) {
	for _, tc := range []struct{ in, state, want string }{
		{`{"from":"RUNNING","to":"LOGIN"}`, eventschema.ProtectedDataSealed, `{"from":"RUNNING","to":"LOGIN","protectedData":"sealed"}`},
		{` {} `, eventschema.ProtectedDataErased, `{"protectedData":"erased"}`},
		{`{ }`, eventschema.ProtectedDataUnsealed, `{"protectedData":"unsealed"}`},
	} {
		got, err := eventschema.WithProtectedData(json.RawMessage(tc.in), tc.state)
		if err != nil || string(got) != tc.want {
			t.Errorf("WithProtectedData(%s, %s) = %s, %v; want %s", tc.in, tc.state, got, err, tc.want)
		}
		if strings.Contains(string(got), "personal") {
			t.Errorf("the marker spells personal: %s", got)
		}
	}
	for _, bad := range []string{``, `null`, `[1]`, `"x"`} {
		if _, err := eventschema.WithProtectedData(json.RawMessage(bad), eventschema.ProtectedDataSealed); err == nil {
			t.Errorf("WithProtectedData(%q) accepted a summary that is not an object", bad)
		}
	}
}
