package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/command/clients"
	"github.com/samla/samla/command/eventstore/sqlite"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/connectors/pdfletter"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore/sqlitekeys"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

// The erasure of a user over HTTP, as a client drives it (issue 7, "Erasure").

// erasurePersona is the richest persona, whose collections the erased user has.
const (
	erasurePersona = "191212121212"
	erasureOwner   = "Tolvan Tolvansson"
)

// personalKeys are the members of a data body that hold personal data wherever they are; the
// whole personalInformation object is personal data too.
var personalKeys = map[string]bool{"holderName": true, "insuredPersonName": true}

// personalValues collects the personal data of a data body: every string under
// personalInformation, and the names of holders and insured persons.
func personalValues(v any, key string, inPersonal bool, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			personalValues(child, k, inPersonal || k == "personalInformation", out)
		}
	case []any:
		for _, child := range v {
			personalValues(child, key, inPersonal, out)
		}
	case string:
		if (inPersonal || personalKeys[key]) && v != "" {
			out[v] = true
		}
	}
}

// distinctive keeps the values long enough not to turn up by chance in other data or in a binary
// file (a country code, a postal code): the personal number, names, street, e-mail, phone.
func distinctive(values map[string]bool) map[string]bool {
	out := map[string]bool{}
	for v := range values {
		if len(v) >= 6 {
			out[v] = true
		}
	}
	return out
}

// grepFiles fails t for every file under dir/sub… that holds one of secrets.
func grepFiles(t *testing.T, when, dir string, subs []string, secrets map[string][]byte) int {
	t.Helper()
	files := 0
	for _, sub := range subs {
		err := filepath.WalkDir(filepath.Join(dir, sub), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			for what, secret := range secrets {
				if bytes.Contains(raw, secret) {
					t.Errorf("%s: %s holds the %s in plain text", when, path, what)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// leftInReadModels counts what the SQLite read models under dir still keep of the user's
// personal data, sealed or not: the projections blank it when they see user.deleted.
func leftInReadModels(t *testing.T, dir, userUUID string) int {
	t.Helper()
	count := func(file, q string) int {
		db, err := readdb.OpenSQLite(filepath.Join(dir, "readmodels", file))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRow(q, userUUID).Scan(&n); err != nil && err != sql.ErrNoRows {
			t.Fatal(err)
		}
		return n
	}
	return count("collection_status.db", `SELECT count(*) FROM collection_status
		WHERE user_uuid = ? AND (personal != '' OR instructions != '' OR qr_start_secret != '')`) +
		count("collection_data.db", `SELECT count(*) FROM collection_data WHERE user_uuid = ? AND personal_json IS NOT NULL`) +
		count("collection_data.db", `SELECT count(*) FROM collection_documents d JOIN collection_data c USING (collection_id)
			WHERE c.user_uuid = ? AND (d.personal_content IS NOT NULL OR d.file_name != '')`) +
		count("users.db", `SELECT count(*) FROM users WHERE user_uuid = ? AND length(personal) > 0`)
}

// protectedMarks returns the protectedData marks of a collection's history.
func (c apiClient) protectedMarks(id string) map[string]int {
	c.t.Helper()
	marks := map[string]int{}
	for _, e := range c.history(id).Events {
		var p struct {
			ProtectedData string `json:"protectedData"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			c.t.Fatal(err)
		}
		marks[p.ProtectedData]++
	}
	return marks
}

// TestErasureEndToEnd: a user's collections of the richest persona (the insurer, a PDF letter, the
// pension company with the owner's name, the bank, the French pension-information company), one
// waiting for a signature, one showing a client-side login's instructions, one waiting for
// input; then DELETE /users. The raw files of the event store and the Kafka log never hold the
// personal number, the externalId or the owner's name, before or after; after it the read
// models hold none of the user's personal data, even sealed, and the API shows the user
// anonymised, its collections' statuses kept and their data without personal data, the
// career statement gone, the pending polls without QR data or instructions, supplement-info
// refused, the audit history marked erased, and the user's session refused at the next request.
func TestErasureEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := personaConfig(t, dir)
	// The pending collections must still be pending when the user is erased.
	cfg.EIDOrderTimeout, cfg.InputTimeout = time.Minute, time.Minute
	svc := start(t, cfg)
	defer func() {
		if svc != nil {
			stop(t, svc)
		}
	}()
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}

	const externalID = "erasure-e2e-customer-4711"
	userUUID := c.createUser(externalID)
	token, _ := c.createSession(userUUID)
	session := c.session(token)

	var letter bytes.Buffer
	if err := pdfletter.WriteSample(&letter, pdfletter.SampleOptions{Holder: erasureOwner}); err != nil {
		t.Fatal(err)
	}
	letterB64 := base64.StdEncoding.EncodeToString(letter.Bytes())
	forUser := func(r collectionRequest) string {
		r.userUUID = userUUID
		return c.mustStart(r)
	}
	completed := map[string]string{} // collection → its data path
	for _, r := range []struct {
		req     collectionRequest
		product string
	}{
		{collectionRequest{company: "se-demo-insurer", pn: erasurePersona}, "insurance"},
		{collectionRequest{company: "se-demo-insurer", loginMethod: "PDF_UPLOAD", extraParams: []map[string]any{
			{"type": "PdfDocumentParameter", "contentBase64": letterB64, "fileName": "letter.pdf"}}}, "insurance"},
		{collectionRequest{company: "se-demo-pension", pn: erasurePersona, ownerName: erasureOwner}, "wealth"},
		{collectionRequest{company: "se-demo-bank", pn: erasurePersona}, "wealth"},
	} {
		completed[forUser(r.req)] = r.product
	}
	french := forUser(collectionRequest{company: "fr-demo-pension-info", pn: erasurePersona})
	completed[french] = "wealth"
	personal := map[string]bool{}
	for id, product := range completed {
		if final := c.waitStatus(id, 30*time.Second, finalStatus); final.Status != "COMPLETED" {
			t.Fatalf("%s ended %+v", id, final)
		}
		code, out, _ := c.data("/collections/"+id+"/"+product+"/data", v2)
		if code != http.StatusOK {
			t.Fatalf("data of %s = %d %v", id, code, out)
		}
		personalValues(out, "", false, personal)
	}
	for _, want := range []string{erasurePersona, erasureOwner} {
		if !personal[want] {
			t.Fatalf("the data holds no %q to look for after the erasure: %v", want, personal)
		}
	}
	if code, _, _ := c.do("GET", "/collections/"+french+"/wealth/career-statement", nil, map[string]string{"Service-Version": v2}); code != http.StatusOK {
		t.Fatalf("career statement before the erasure = %d", code)
	}
	// Each pending one as its own person: EID orders of one person conflict.
	waitingQR := forUser(collectionRequest{company: "se-demo-insurer", loginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", pn: "198005051233"})
	waitingInstructions := forUser(collectionRequest{company: "se-demo-insurer",
		loginMethod: "SWEDISH_MOBILE_EID_SAME_DEVICE_CLIENT_SIDE_AUTHENTICATION", pn: "198106061230"})
	awaitingInput := forUser(collectionRequest{company: "se-demo-insurer", pn: "199001010074"})
	pendingExtra := func(id, key string) bool { // false too while the poll is not projected yet
		code, raw, _ := c.do("GET", "/collections/"+id+"/status", nil, map[string]string{"Service-Version": v2})
		var st statusBody
		if code != http.StatusOK || json.Unmarshal(raw, &st) != nil {
			return false
		}
		_, ok := st.ExtraInformation[key]
		return ok
	}
	c.waitFor("the QR data", func() bool { return pendingExtra(waitingQR, "SWEDISH_MOBILE_EID_ANIMATED_QR_DATA") })
	c.waitFor("the instructions", func() bool { return pendingExtra(waitingInstructions, "INSTRUCTIONS") })
	c.waitStatus(awaitingInput, 20*time.Second, is("COLLECTION_INPUT_PENDING"))
	var insurer string
	for id, product := range completed {
		if product == "insurance" && c.statusAs(id, v2).LoginMethod != "PDF_UPLOAD" {
			insurer = id
		}
	}
	c.historyPath(insurer, "COMPLETED")
	if marks := c.protectedMarks(insurer); marks["sealed"] == 0 || marks["erased"] != 0 {
		t.Fatalf("the history before the erasure marks %v", marks)
	}

	secrets := map[string][]byte{
		"personal number":        []byte(erasurePersona),
		"dashed personal number": []byte("19121212-1212"),
		"short personal number":  []byte("121212-1212"),
		"externalId":             []byte(externalID),
		"owner's name":           []byte(erasureOwner),
		"owner's last name":      []byte("Tolvansson"),
		"letter in base64":       []byte(letterB64[:64]),
		"letter's bytes":         letter.Bytes()[:64],
	}
	logFiles := []string{"eventstore", "kafka"}
	if n := grepFiles(t, "before the delete", dir, logFiles, secrets); n < 2 {
		t.Fatalf("read only %d files: is the data dir where the test thinks?", n)
	}

	// The delete answers once the user's sessions end: the very next request is refused.
	if code, body, _ := c.do("DELETE", "/users/"+userUUID, nil, map[string]string{"Service-Version": v2}); code != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", code, body)
	}
	session.expect("GET", "/users/"+userUUID, nil, http.StatusUnauthorized, "TOKEN_REVOKED")

	// The user, anonymised; its externalId finds nobody.
	var gone userE2E
	if code, _, body := c.userCall("GET", "/users/"+userUUID, nil, nil); code != http.StatusOK || json.Unmarshal(body, &gone) != nil ||
		gone.ExternalID != nil || gone.DeletedAt == nil {
		t.Fatalf("GET the deleted user = %d %s", code, body)
	}
	c.expectProblem("GET", "/users?externalId="+url.QueryEscape(externalID), nil, http.StatusNotFound, "USER_NOT_FOUND")

	// Its collections keep their statuses; their data holds no personal data.
	for id, product := range completed {
		if st := c.statusAs(id, v2); st.Status != "COMPLETED" {
			t.Errorf("%s is %s after the erasure", id, st.Status)
		}
		code, out, _ := c.data("/collections/"+id+"/"+product+"/data", v2)
		if code != http.StatusOK {
			t.Fatalf("data of %s after the erasure = %d %v", id, code, out)
		}
		left := map[string]bool{}
		personalValues(out, "", false, left)
		dump := mustJSON(t, out)
		for v := range distinctive(personal) {
			if strings.Contains(dump, v) {
				left[v] = true
			}
		}
		if len(left) > 0 {
			t.Errorf("data of %s after the erasure still holds %v: %s", id, left, dump)
		}
		// The statement's content is unreadable at once (its key is gone); the reference to it
		// goes when the data projection folds the erasure, which may trail the 204 by the
		// relay's batch interval (20 ms) when events keep coming.
		c.waitFor("the data of "+id+" to drop its career statement", func() bool {
			code, out, _ := c.data("/collections/"+id+"/"+product+"/data", v2)
			return code == http.StatusOK && out["careerStatement"] == nil
		})
	}
	if code, _, _ := c.do("GET", "/collections/"+french+"/wealth/career-statement", nil, map[string]string{"Service-Version": v2}); code != http.StatusNotFound {
		t.Errorf("the erased career statement = %d, want 404", code)
	}
	// The pending polls show no QR data and no instructions; no input is taken.
	if pendingExtra(waitingQR, "SWEDISH_MOBILE_EID_ANIMATED_QR_DATA") || pendingExtra(waitingInstructions, "INSTRUCTIONS") {
		t.Error("a pending poll still shows the QR data or the instructions of the erased user")
	}
	// The collections that were pending ended with the erasure: FAILED, saying why, asking the
	// client nothing (no autostart token to sign with, no input to give).
	for _, id := range []string{waitingQR, waitingInstructions, awaitingInput} {
		st := c.waitStatus(id, 10*time.Second, is("FAILED"))
		if len(st.ExtraInformation) != 1 || st.ExtraInformation["MESSAGE"] != collection.MessageUserErased {
			t.Errorf("%s ended with %v, want only the erasure's message", id, st.ExtraInformation)
		}
	}
	code, raw := c.supplement(awaitingInput, map[string]any{"inputs": []map[string]string{{"type": "EMAIL", "value": "tolvan@example.se"}}})
	if code != http.StatusConflict || problemCodeOf(raw) != "USER_DELETED" {
		t.Errorf("supplement-info after the erasure = %d %s, want 409 USER_DELETED", code, raw)
	}
	// The history stays, its personal data marked erased.
	if marks := c.protectedMarks(insurer); marks["erased"] == 0 || marks["sealed"] != 0 {
		t.Errorf("the history after the erasure marks %v", marks)
	}

	// The projections blank even the sealed copies of the read models.
	c.waitFor("the read models' copies blanked", func() bool { return leftInReadModels(t, dir, userUUID) == 0 })
	stop(t, svc)
	svc = nil
	for v := range distinctive(personal) {
		secrets["collected "+v] = []byte(v)
	}
	grepFiles(t, "after the delete", dir, append(logFiles, "readmodels"), secrets)
}

// TestErasureFinishesADeleteThatStopped: a DELETE that stopped right after recording
// user.deleted (its process crashed before the release and the keys) leaves the user deleted
// and its key alive; the next start's erasure process manager finishes it without the client:
// the externalId is released and the user's key destroyed, so its history reads erased.
func TestErasureFinishesADeleteThatStopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	svc := start(t, testConfig(t, dir))
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	const externalID = "crashed-delete-customer"
	userUUID := c.createUser(externalID)
	id := c.mustStart(collectionRequest{company: "se-demo-insurer", pn: "199001010017", userUUID: userUUID})
	c.waitStatus(id, 20*time.Second, finalStatus)
	c.historyPath(id, "COMPLETED")
	if marks := c.protectedMarks(id); marks["sealed"] == 0 {
		t.Fatalf("the history marks %v", marks)
	}
	stop(t, svc)

	// The crash: user.deleted is recorded, nothing after it.
	ctx := context.Background()
	store, err := sqlite.Open(filepath.Join(dir, "eventstore", "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := sqlitekeys.Open(filepath.Join(dir, KeyStoreFile))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	users := repository.New(store, reg, user.Kind, repository.WithKeys(keys))
	if _, _, err := users.Update(ctx, userUUID, repository.Meta{Tenant: clients.SandboxClientID, Actor: "client:sandbox"},
		func(u *user.User) error { return u.Delete(time.Now()) }); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Get(ctx, domain.UserSubject(userUUID)); err != nil {
		t.Fatalf("the user's key before the restart: %v", err)
	}
	if err := errors.Join(store.Close(), keys.Close()); err != nil {
		t.Fatal(err)
	}

	svc = start(t, testConfig(t, dir))
	c.base = "http://" + svc.HTTPAddr()
	c.waitFor("the history marked erased", func() bool { return c.protectedMarks(id)["erased"] > 0 })
	stop(t, svc)

	keys, err = sqlitekeys.Open(filepath.Join(dir, KeyStoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	if _, err := keys.Get(ctx, domain.UserSubject(userUUID)); !errors.Is(err, eventschema.ErrSubjectErased) {
		t.Fatalf("the user's key after the restart: %v", err)
	}
	store, err = sqlite.Open(filepath.Join(dir, "eventstore", "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	secret, err := fingerprintKey(testConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	reservation, err := store.ReadStream(ctx, user.ReservationStreamName(user.ExternalIDKey(secret, clients.SandboxClientID, externalID)), 0, 0)
	if err != nil || len(reservation) != 2 || reservation[1].Type != user.EventExternalIDReleased || reservation[1].Actor != "samla:erasure" {
		t.Fatalf("the externalId's reservation = %+v, %v", reservation, err)
	}
}

// TestErasureInClickHouse runs a user's collections and erasure with the read models in
// ClickHouse, where analysts read every table: no column of any table, in any stored row
// version, holds the personal number, the externalId or the owner's name (their personal data is
// sealed; the externalId is known only by its keyed hash), and after the erasure the current
// rows keep nothing of the user's personal data, not even sealed.
func TestErasureInClickHouse(t *testing.T) {
	t.Parallel()
	dsn := readdbtest.ClickHouseDatabase(t)
	cfg := personaConfig(t, t.TempDir())
	cfg.ClickHouseDSN = dsn
	svc := start(t, cfg)
	defer stop(t, svc)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	conn, err := readdb.OpenClickHouse(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	const externalID = "clickhouse-erasure-customer"
	userUUID := c.createUser(externalID)
	var ids []string
	for _, r := range []collectionRequest{
		{company: "se-demo-insurer", pn: erasurePersona},
		{company: "se-demo-pension", pn: erasurePersona, ownerName: erasureOwner},
		{company: "fr-demo-pension-info", pn: erasurePersona},
	} {
		r.userUUID = userUUID
		ids = append(ids, c.mustStart(r))
	}
	for _, id := range ids {
		if final := c.waitStatus(id, 30*time.Second, finalStatus); final.Status != "COMPLETED" {
			t.Fatalf("%s ended %+v", id, final)
		}
		c.historyPath(id, "COMPLETED")
	}
	code, out, _ := c.data("/collections/"+ids[1]+"/wealth/data", v2)
	if code != http.StatusOK || !strings.Contains(mustJSON(t, out), erasurePersona) {
		t.Fatalf("pension data = %d %v", code, out)
	}

	ctx := t.Context()
	type column struct{ table, name string }
	var columns []column
	rows, err := conn.Query(ctx, `SELECT table, name FROM system.columns WHERE database = currentDatabase() AND type = 'String'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var col column
		if err := rows.Scan(&col.table, &col.name); err != nil {
			t.Fatal(err)
		}
		columns = append(columns, col)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if len(columns) < 20 {
		t.Fatalf("only %d String columns: is the database the service's?", len(columns))
	}
	secrets := []string{erasurePersona, "19121212-1212", "121212-1212", externalID, erasureOwner, "Tolvansson"}
	scan := func(when string) {
		t.Helper()
		for _, col := range columns {
			for _, secret := range secrets {
				var n uint64
				// Every stored row version, not only the current ones: analysts can read them
				// all until the parts merge.
				if err := conn.QueryRow(ctx, `SELECT count() FROM `+col.table+` WHERE position(`+col.name+`, ?) > 0`, secret).
					Scan(&n); err != nil {
					t.Fatalf("%s.%s: %v", col.table, col.name, err)
				}
				if n > 0 {
					t.Errorf("%s: %s.%s holds %q in %d rows", when, col.table, col.name, secret, n)
				}
			}
		}
	}
	scan("before the erasure")

	if code, body, _ := c.do("DELETE", "/users/"+userUUID, nil, map[string]string{"Service-Version": v2}); code != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", code, body)
	}
	left := func() uint64 {
		var total uint64
		for _, q := range []string{
			`SELECT count() FROM (SELECT personal FROM collection_status FINAL WHERE user_uuid = ?) WHERE personal != ''`,
			`SELECT count() FROM (SELECT personal_json FROM collection_data FINAL WHERE user_uuid = ?) WHERE personal_json != ''`,
			`SELECT count() FROM (SELECT personal FROM users FINAL WHERE user_uuid = ?) WHERE personal != ''`,
		} {
			var n uint64
			if err := conn.QueryRow(ctx, q, userUUID).Scan(&n); err != nil {
				t.Fatal(err)
			}
			total += n
		}
		return total
	}
	c.waitFor("the read models' copies blanked", func() bool { return left() == 0 })
	scan("after the erasure")
}
