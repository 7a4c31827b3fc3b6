package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// The users of 2026-04-01 over HTTP, as a client drives them: the lifecycle of a user and its
// collections, uniqueness of the externalId under a race, UNKNOWN_USER, and other clients' users.

type userE2E struct {
	UserUUID   string  `json:"userUuid"`
	ExternalID *string `json:"externalId"`
	CreatedAt  string  `json:"createdAt"`
	DeletedAt  *string `json:"deletedAt"`
}

// userCall sends a request of the user routes (2026-04-01) and returns the status, the decoded
// problem code ("" for none) and the body.
func (c apiClient) userCall(method, path string, body any, headers map[string]string) (int, string, []byte) {
	c.t.Helper()
	h := map[string]string{"Service-Version": "2026-04-01"}
	for k, v := range headers {
		h[k] = v
	}
	code, b, _ := c.do(method, path, body, h)
	var p struct{ Code string }
	_ = json.Unmarshal(b, &p)
	return code, p.Code, b
}

func (c apiClient) expectProblem(method, path string, body any, status int, problem string) {
	c.t.Helper()
	if code, got, b := c.userCall(method, path, body, nil); code != status || got != problem {
		c.t.Fatalf("%s %s = %d %s, want %d %s", method, path, code, b, status, problem)
	}
}

func (c apiClient) postUser(externalID string, headers map[string]string) userE2E {
	c.t.Helper()
	code, _, body := c.userCall("POST", "/users", map[string]any{"externalId": externalID}, headers)
	if code != http.StatusCreated {
		c.t.Fatalf("POST /users = %d %s", code, body)
	}
	var u userE2E
	if err := json.Unmarshal(body, &u); err != nil || u.UserUUID == "" || u.ExternalID == nil || *u.ExternalID != externalID {
		c.t.Fatalf("created user %s (%v)", body, err)
	}
	return u
}

// eventually polls get until it answers want (the read models follow the event store within
// moments), and returns the last body.
func (c apiClient) eventually(path string, want int) []byte {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, _, body := c.userCall("GET", path, nil, nil)
		if code == want {
			return body
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("GET %s = %d %s; want %d", path, code, body, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c apiClient) startFor(userUUID string) (int, string, []byte) {
	c.t.Helper()
	return c.userCall("POST", "/collections", map[string]any{"company": "se-demo-insurer",
		"loginMethod": "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", "userUuid": userUUID,
		"parameters": []map[string]any{{"type": "SwedishPersonalNumberParameter", "personalNumber": "191212121212"}}}, nil)
}

type userCollectionsPage struct {
	Items []struct {
		CollectionID string `json:"collectionId"`
		Company      string `json:"company"`
		LoginMethod  string `json:"loginMethod"`
		Status       string `json:"status"`
		CreatedAt    string `json:"createdAt"`
		UpdatedAt    string `json:"updatedAt"`
	} `json:"items"`
	NextCursor *string `json:"nextCursor"`
}

// allCollectionsOf pages through a user's collections, limit at a time.
func (c apiClient) allCollectionsOf(userUUID string, limit int) (ids []string, pages int) {
	c.t.Helper()
	path := "/users/" + userUUID + "/collections?limit=" + jsonInt(limit)
	for {
		code, _, body := c.userCall("GET", path, nil, nil)
		if code != http.StatusOK {
			c.t.Fatalf("GET %s = %d %s", path, code, body)
		}
		var page userCollectionsPage
		if err := json.Unmarshal(body, &page); err != nil {
			c.t.Fatal(err)
		}
		pages++
		for _, it := range page.Items {
			if it.Company != "se-demo-insurer" || it.LoginMethod != "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK" || it.Status == "" ||
				it.CreatedAt == "" || it.UpdatedAt == "" {
				c.t.Fatalf("item %+v", it)
			}
			ids = append(ids, it.CollectionID)
		}
		if page.NextCursor == nil {
			return ids, pages
		}
		if len(page.Items) != limit || pages > 20 {
			c.t.Fatalf("page %d of %d items has a next cursor", pages, len(page.Items))
		}
		path = "/users/" + userUUID + "/collections?limit=" + jsonInt(limit) + "&cursor=" + url.QueryEscape(*page.NextCursor)
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestUsersEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	svc := start(t, cfg)
	defer stop(t, svc)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}

	// Older versions have no users.
	for _, version := range []string{"2025-01-01", ""} {
		h := map[string]string{}
		if version != "" {
			h["Service-Version"] = version
		}
		code, body, _ := c.do("POST", "/users", map[string]any{"externalId": "customer-42"}, h)
		if code != http.StatusNotFound {
			t.Fatalf("POST /users in %q = %d %s", version, code, body)
		}
	}

	// Create; a user works for a collection at once, before any read model shows it.
	u := c.postUser("customer-42", nil)
	if code, _, body := c.startFor(u.UserUUID); code != http.StatusCreated {
		t.Fatalf("a collection for a just-created user = %d %s", code, body)
	}
	c.expectProblem("POST", "/users", map[string]any{"externalId": "customer-42"}, http.StatusConflict, "USER_EXISTS")

	// Found by externalId and by id.
	var found userE2E
	if err := json.Unmarshal(c.eventually("/users?externalId=customer-42", http.StatusOK), &found); err != nil ||
		found.UserUUID != u.UserUUID || found.CreatedAt != u.CreatedAt || found.ExternalID == nil || *found.ExternalID != "customer-42" ||
		found.DeletedAt != nil {
		t.Fatalf("found %+v, created %+v", found, u)
	}
	var got userE2E
	if err := json.Unmarshal(c.eventually("/users/"+u.UserUUID, http.StatusOK), &got); err != nil ||
		got.UserUUID != u.UserUUID || got.ExternalID == nil || *got.ExternalID != "customer-42" || got.DeletedAt != nil {
		t.Fatalf("got %+v", got)
	}

	// Idempotency-Key as on collections.
	keyed := map[string]string{"Idempotency-Key": "create-customer-43"}
	first := c.postUser("customer-43", keyed)
	code, _, body := c.userCall("POST", "/users", map[string]any{"externalId": "customer-43"}, keyed)
	var again userE2E
	if err := json.Unmarshal(body, &again); code != http.StatusCreated || err != nil || again.UserUUID != first.UserUUID || again.CreatedAt != first.CreatedAt {
		t.Fatalf("retry = %d %s, first %+v", code, body, first)
	}
	if code, problem, body := c.userCall("POST", "/users", map[string]any{"externalId": "customer-44"}, keyed); code != http.StatusUnprocessableEntity ||
		problem != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("key reused = %d %s", code, body)
	}

	// Its collections, newest first, across pages.
	want := []string{}
	for range 4 {
		code, _, body := c.startFor(u.UserUUID)
		if code != http.StatusCreated {
			t.Fatalf("POST /collections = %d %s", code, body)
		}
		var created struct{ CollectionID string }
		_ = json.Unmarshal(body, &created)
		want = append([]string{created.CollectionID}, want...)
	}
	deadline := time.Now().Add(15 * time.Second)
	var ids []string
	var pages int
	for {
		ids, pages = c.allCollectionsOf(u.UserUUID, 2)
		if len(ids) == 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(ids) != 5 || !slices.Equal(ids[:4], want) || pages != 3 {
		t.Fatalf("collections %v in %d pages; want the newest %v first, of 5 in 3 pages", ids, pages, want)
	}
	c.expectProblem("GET", "/users/"+u.UserUUID+"/collections?limit=501", nil, http.StatusBadRequest, "VALIDATION_FAILED")
	c.expectProblem("GET", "/users/"+u.UserUUID+"/collections?cursor=nonsense", nil, http.StatusBadRequest, "VALIDATION_FAILED")

	// A userUuid that is no user of this client: UNKNOWN_USER, and nothing recorded.
	c.expectProblem("POST", "/collections", map[string]any{"company": "se-demo-insurer", "loginMethod": "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",
		"userUuid": "0190f4a2-1111-7b3a-9a51-2f1e3d4c5b6a", "parameters": []map[string]any{}}, http.StatusUnprocessableEntity, "UNKNOWN_USER")

	// Another client's users do not exist for this one, on every path.
	otherKey, err := CreateClient(context.Background(), cfg, testLogger(t), "users-other", "Other")
	if err != nil {
		t.Fatal(err)
	}
	other := apiClient{t: t, base: c.base, key: otherKey}
	waitAuthenticated(t, other)
	other.expectProblem("GET", "/users/"+u.UserUUID, nil, http.StatusNotFound, "USER_NOT_FOUND")
	other.expectProblem("GET", "/users/"+u.UserUUID+"/collections", nil, http.StatusNotFound, "USER_NOT_FOUND")
	other.expectProblem("GET", "/users?externalId=customer-42", nil, http.StatusNotFound, "USER_NOT_FOUND")
	other.expectProblem("DELETE", "/users/"+u.UserUUID, nil, http.StatusNotFound, "USER_NOT_FOUND")
	if code, problem, body := other.startFor(u.UserUUID); code != http.StatusUnprocessableEntity || problem != "UNKNOWN_USER" {
		t.Fatalf("a collection for another client's user = %d %s", code, body)
	}
	otherUser := other.postUser("customer-42", nil) // its externalIds are its own
	c.expectProblem("GET", "/users/"+otherUser.UserUUID, nil, http.StatusNotFound, "USER_NOT_FOUND")

	// Delete: no new collections for it at once, shown without its externalId, found by it no
	// more, and the externalId is free for a new user; its collections keep their statuses.
	if code, _, body := c.userCall("DELETE", "/users/"+u.UserUUID, nil, nil); code != http.StatusNoContent || len(body) != 0 {
		t.Fatalf("DELETE = %d %s", code, body)
	}
	if code, problem, body := c.startFor(u.UserUUID); code != http.StatusUnprocessableEntity || problem != "UNKNOWN_USER" {
		t.Fatalf("a collection for a deleted user = %d %s", code, body)
	}
	deadline = time.Now().Add(15 * time.Second)
	for {
		var deleted userE2E
		_ = json.Unmarshal(c.eventually("/users/"+u.UserUUID, http.StatusOK), &deleted)
		if deleted.DeletedAt != nil {
			if deleted.ExternalID != nil || deleted.CreatedAt != u.CreatedAt {
				t.Fatalf("deleted user %+v", deleted)
			}
			var raw map[string]any
			_ = json.Unmarshal(c.eventually("/users/"+u.UserUUID, http.StatusOK), &raw)
			if v, ok := raw["externalId"]; !ok || v != nil {
				t.Fatalf("a deleted user's externalId is not null: %v", raw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the user is not shown deleted: %+v", deleted)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.eventually("/users?externalId=customer-42", http.StatusNotFound)
	reused := c.postUser("customer-42", nil)
	if reused.UserUUID == u.UserUUID {
		t.Fatal("the deleted user came back")
	}
	var refound userE2E
	if err := json.Unmarshal(c.eventually("/users?externalId=customer-42", http.StatusOK), &refound); err != nil || refound.UserUUID != reused.UserUUID {
		t.Fatalf("the reused externalId finds %+v", refound)
	}
	if ids, _ := c.allCollectionsOf(u.UserUUID, 50); len(ids) != 5 {
		t.Fatalf("the deleted user's collections: %v", ids)
	}
	stop(t, svc)

	// The externalIds are personal data: the event store and the Kafka log hold them sealed,
	// and nothing names a stream or a key by them.
	for _, sub := range []string{"eventstore", "kafka"} {
		err := filepath.WalkDir(filepath.Join(dir, sub), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, ext := range []string{"customer-42", "customer-43"} {
				if bytes.Contains(raw, []byte(ext)) {
					t.Errorf("%s holds the externalId %s in plain text", path, ext)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestConcurrentCreatesOfOneExternalIDOverHTTP: however many requests race for one externalId,
// exactly one user is created; every other request is 409 USER_EXISTS.
func TestConcurrentCreatesOfOneExternalIDOverHTTP(t *testing.T) {
	t.Parallel()
	svc := start(t, testConfig(t, t.TempDir()))
	defer stop(t, svc)
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}

	const n = 12
	codes := make([]int, n)
	bodies := make([][]byte, n)
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			// Plain net/http: the test's helpers fail the test from their own goroutine.
			req, _ := http.NewRequest("POST", c.base+"/users", bytes.NewReader([]byte(`{"externalId":"racer-1"}`)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization-token", c.key)
			req.Header.Set("Service-Version", "2026-04-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			codes[i] = resp.StatusCode
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			bodies[i] = buf.Bytes()
		}()
	}
	close(begin)
	wg.Wait()
	created, exists := 0, 0
	var winner userE2E
	for i, code := range codes {
		switch code {
		case http.StatusCreated:
			created++
			_ = json.Unmarshal(bodies[i], &winner)
		case http.StatusConflict:
			var p struct{ Code string }
			if err := json.Unmarshal(bodies[i], &p); err != nil || p.Code != "USER_EXISTS" {
				t.Fatalf("409 %s", bodies[i])
			}
			exists++
		default:
			t.Fatalf("request %d = %d %s", i, code, bodies[i])
		}
	}
	if created != 1 || exists != n-1 {
		t.Fatalf("%d created and %d USER_EXISTS of %d", created, exists, n)
	}
	var found userE2E
	if err := json.Unmarshal(c.eventually("/users?externalId=racer-1", http.StatusOK), &found); err != nil || found.UserUUID != winner.UserUUID {
		t.Fatalf("found %+v, the winner %+v", found, winner)
	}
}
