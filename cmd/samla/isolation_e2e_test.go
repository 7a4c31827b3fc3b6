package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/poa"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/projections/apikeys"
)

// The isolation walk (issue 10): every route of the API, asked about client A's user, session,
// collection, consent and cancellation by another client's key, by another user's session
// token of client A, without credentials and with a revoked key. Each answers as API.md says
// (another client: what it gets for something that does not exist, 404 for a resource; another
// user's session: 403 FORBIDDEN_FOR_SESSION; no or a revoked key: 401) with a problem that holds
// nothing of A's data.

// isolationRoute is one route of the walk: the path and body naming A's resources, and what
// another client gets for them.
type isolationRoute struct {
	method, route string // the route as the engine names it
	version       string // Service-Version; empty: 2026-04-01
	path          string // A's resource
	body          any
	// unknownPath and unknownBody name a resource that does not exist: another client's answer
	// about A's must be the same. Empty: the answer is compared with want alone.
	unknownPath string
	unknownBody any
	// other is what another client gets: a status and a problem code ("" for a success).
	other answer
	// public routes take no credentials (health, the JWKS) or are authenticated by the signing
	// provider's signature (the callbacks): every principal gets the same answer, publicAnswer.
	public       bool
	publicAnswer answer
}

type answer struct {
	status int
	code   string
}

// isolationPrincipal is one way of calling the API that must not reach A's data.
type isolationPrincipal struct {
	name    string
	headers map[string]string
	// want is its answer on a route that is not public; nil: the route's other.
	want *answer
}

func TestIsolationWalk(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir())
	// Client B, configured for signing as A is, so that its cancellation requests reach the
	// collection check; client C, whose only key is revoked below.
	keyB, err := CreateClient(ctx, cfg, testLogger(t), "iso-other", "Other AB")
	if err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	providerKeyFile, templateFile := filepath.Join(files, "key"), filepath.Join(files, "template")
	if err := os.WriteFile(providerKeyFile, []byte("iso-other-provider-key-0001"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(templateFile, []byte(poa.ExampleTemplate), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ConfigureClientSigning(ctx, cfg, testLogger(t), "iso-other", providerKeyFile, templateFile, "Malmö"); err != nil {
		t.Fatal(err)
	}
	keyC, err := CreateClient(ctx, cfg, testLogger(t), "iso-revoked", "Revoked AB")
	if err != nil {
		t.Fatal(err)
	}
	svc := start(t, cfg)
	defer stop(t, svc)
	base := "http://" + svc.HTTPAddr()
	a := apiClient{t: t, base: base, key: testAPIKey} // the sandbox client, configured for signing on start
	b := apiClient{t: t, base: base, key: keyB}
	v2h := map[string]string{"Service-Version": v2}

	// C's key is revoked before it was ever used, through the client's repository: no cache
	// can remember it as valid, and the read model must show the revocation.
	keyIDC := "k-" + client.HashAPIKey(keyC)[:12]
	clientRepo := repository.New(svc.store, svc.registry, client.Kind, repository.WithKeys(svc.keys))
	if _, _, err := clientRepo.Update(ctx, "iso-revoked", repository.Meta{Tenant: "iso-revoked", Actor: "operator", CorrelationID: "isolation-test"},
		func(c *client.Client) error { return c.RevokeAPIKey(keyIDC, time.Now()) }); err != nil {
		t.Fatalf("revoke C's key: %v", err)
	}
	a.waitFor("C's key revoked in the read model", func() bool {
		row, err := svc.models.APIKeys.ByKeyID(ctx, "iso-revoked", keyIDC)
		return err == nil && row.Revoked
	})
	waitAuthenticated(t, b)

	// A's data: a user with a completed insurance collection, a consent and a cancellation; a
	// second user with a session.
	const pn, extOwner, extOther = "191212121212", "iso-owner-7f3a91", "iso-other-user-c4e2"
	owner, otherUser := a.createUser(extOwner), a.createUser(extOther)
	otherToken, _ := a.createSession(otherUser)
	col := a.completed(collectionRequest{company: "se-demo-insurer", pn: pn, userUUID: owner})
	consentID := a.createConsent(consentRequest(owner, "se-demo-bank", "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", pn))
	a.readConsent(consentID, func(consentView) bool { return true })
	docs := a.cancel(map[string]any{"collectionId": col, "insuranceIds": []string{"sdi-home-121212"},
		"deliveryMethod": "EMAIL", "email": "tolvan.tolvansson@example.se"})
	doc := docs["sdi-home-121212"]
	a.waitCancellation(doc, 10*time.Second, func(cancellationView) bool { return true })

	const unknownID = "00000000-0000-4000-8000-00000000cafe"
	notFound := func(code string) answer { return answer{http.StatusNotFound, code} }
	supplement := map[string]any{"inputs": []map[string]any{{"type": "EMAIL", "value": "someone@example.se"}}}
	startFor := func(user string) map[string]any { return collectionBody(user) }
	consentFor := func(user string) map[string]any {
		return consentRequest(user, "se-demo-bank", "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", "199001010017")
	}
	cancelOf := func(collection string) map[string]any {
		return map[string]any{"collectionId": collection, "insuranceIds": []string{"sdi-car-121212"}, "deliveryMethod": "EMAIL", "email": "x@example.se"}
	}
	routes := []isolationRoute{
		{method: "GET", route: "/health", path: "/health", public: true, publicAnswer: answer{200, ""}},
		{method: "GET", route: httpapi.JWKSPath, path: httpapi.JWKSPath, public: true, publicAnswer: answer{200, ""}},
		{method: "POST", route: httpapi.SigningCallbackPath, path: "/callbacks/signing/" + "sandbox", body: map[string]any{"reference": doc},
			public: true, publicAnswer: answer{401, "INVALID_SIGNATURE"}},
		// The catalog is no client's data: another client reads it.
		{method: "GET", route: "/companies", path: "/companies", other: answer{200, ""}},
		{method: "GET", route: "/companies/availability", path: "/companies/availability", other: answer{200, ""}},
		{method: "GET", route: "/companies/:companyId/availability", path: "/companies/se-demo-insurer/availability", other: answer{200, ""}},

		{method: "POST", route: "/collections", path: "/collections", body: startFor(owner), unknownBody: startFor(unknownID),
			other: answer{422, "UNKNOWN_USER"}},
		{method: "GET", route: "/collections/:collectionId/status", path: "/collections/" + col + "/status", other: notFound("COLLECTION_NOT_FOUND")},
		{method: "GET", route: "/collections/:collectionId/events", path: "/collections/" + col + "/events", other: notFound("COLLECTION_NOT_FOUND")},
		{method: "GET", route: "/collections/:collectionId/insurance/data", path: "/collections/" + col + "/insurance/data", other: notFound("COLLECTION_NOT_FOUND")},
		{method: "GET", route: "/collections/:collectionId/wealth/data", path: "/collections/" + col + "/wealth/data", other: notFound("COLLECTION_NOT_FOUND")},
		{method: "GET", route: "/collections/:collectionId/wealth/career-statement", path: "/collections/" + col + "/wealth/career-statement", other: notFound("COLLECTION_NOT_FOUND")},
		{method: "POST", route: "/collections/:collectionId/supplement-info", path: "/collections/" + col + "/supplement-info", body: supplement,
			other: notFound("COLLECTION_NOT_FOUND")},
		// No client may cancel a collection: the same 405 for everyone, whoever's it is.
		{method: "DELETE", route: "/collections/:collectionId", path: "/collections/" + col, other: answer{405, "COLLECTION_CANNOT_BE_CANCELLED"}},
		{method: "GET", route: "/collections/:collectionId/cancellations", path: "/collections/" + col + "/cancellations", other: notFound("COLLECTION_NOT_FOUND")},
		// The 2025-01-01 data read; that version knows no sessions, so a session token there is
		// no credential (401).
		{method: "GET", route: "/data", version: "2025-01-01", path: "/data?collectionId=" + col, unknownPath: "/data?collectionId=" + unknownID, other: notFound("COLLECTION_NOT_FOUND")},

		// Another client's users are its own: the same externalId is a new user of B's.
		{method: "POST", route: "/users", path: "/users", body: map[string]any{"externalId": extOwner}, other: answer{201, ""}},
		{method: "GET", route: "/users", path: "/users?externalId=" + extOwner, unknownPath: "/users?externalId=iso-nobody", other: notFound("USER_NOT_FOUND")},
		{method: "GET", route: "/users/:userUuid", path: "/users/" + owner, other: notFound("USER_NOT_FOUND")},
		{method: "DELETE", route: "/users/:userUuid", path: "/users/" + owner, other: notFound("USER_NOT_FOUND")},
		{method: "GET", route: "/users/:userUuid/collections", path: "/users/" + owner + "/collections", other: notFound("USER_NOT_FOUND")},
		{method: "GET", route: "/users/:userUuid/consents", path: "/users/" + owner + "/consents", other: notFound("USER_NOT_FOUND")},
		{method: "POST", route: "/users/:userUuid/sessions", path: "/users/" + owner + "/sessions", other: notFound("USER_NOT_FOUND")},

		{method: "POST", route: "/consents", path: "/consents", body: consentFor(owner), unknownBody: consentFor(unknownID), other: answer{422, "UNKNOWN_USER"}},
		{method: "GET", route: "/consents/:consentId/status", path: "/consents/" + consentID + "/status", other: notFound("CONSENT_NOT_FOUND")},
		{method: "GET", route: "/consents/:consentId", path: "/consents/" + consentID, other: notFound("CONSENT_NOT_FOUND")},
		{method: "DELETE", route: "/consents/:consentId", path: "/consents/" + consentID, other: notFound("CONSENT_NOT_FOUND")},

		{method: "POST", route: "/cancellations", path: "/cancellations", body: cancelOf(col), unknownBody: cancelOf(unknownID), other: answer{422, "COLLECTION_NOT_CANCELLABLE"}},
		{method: "GET", route: "/cancellations/:documentId", path: "/cancellations/" + doc, other: notFound("CANCELLATION_NOT_FOUND")},
		{method: "GET", route: "/cancellations/:documentId/pdf", path: "/cancellations/" + doc + "/pdf", other: notFound("CANCELLATION_NOT_FOUND")},
		{method: "DELETE", route: "/cancellations/:documentId", path: "/cancellations/" + doc, other: notFound("CANCELLATION_NOT_FOUND")},
	}

	// The control: A's own key reads every one of those resources, and the owner's session
	// those of its own user, so that the refusals below are about who asks.
	ownerToken, _ := a.createSession(owner)
	for _, read := range []struct {
		path, version string
		session       bool // the owner's session reads it too
	}{
		{"/collections/" + col + "/status", v2, true}, {"/collections/" + col + "/events", v2, false},
		{"/collections/" + col + "/insurance/data", v2, true}, {"/collections/" + col + "/cancellations", v2, true},
		{"/data?collectionId=" + col, "2025-01-01", false}, {"/users?externalId=" + extOwner, v2, false},
		{"/users/" + owner, v2, true}, {"/users/" + owner + "/collections", v2, true}, {"/users/" + owner + "/consents", v2, true},
		{"/consents/" + consentID + "/status", v2, true}, {"/consents/" + consentID, v2, true}, {"/cancellations/" + doc, v2, true},
	} {
		if code, body, _ := a.do("GET", read.path, nil, map[string]string{"Service-Version": read.version}); code != http.StatusOK {
			t.Errorf("A reads %s: %d %s", read.path, code, body)
		}
		if read.session {
			if code, _, body := a.session(ownerToken).call("GET", read.path, nil); code != http.StatusOK {
				t.Errorf("the owner's session reads %s: %d %s", read.path, code, body)
			}
		}
	}

	// The table covers every route the engine serves, and nothing else.
	served := map[string]bool{}
	for _, r := range servedRoutes(t, svc) {
		served[r.Method+" "+r.Path] = true
	}
	listed := map[string]bool{}
	for _, r := range routes {
		key := r.method + " " + r.route
		listed[key] = true
		if !served[key] {
			t.Errorf("the walk lists %s, which the engine does not serve", key)
		}
	}
	for key := range served {
		if !listed[key] {
			t.Errorf("the engine serves %s, which the walk does not visit: add it to the table", key)
		}
	}

	principals := []isolationPrincipal{
		{name: "another client's key", headers: map[string]string{httpapi.HeaderAPIKey: keyB}},
		{name: "another user's session", headers: map[string]string{"Authorization": "Bearer " + otherToken},
			want: &answer{403, httpapi.CodeForbiddenForSession}},
		{name: "no credentials", headers: map[string]string{}, want: &answer{401, httpapi.CodeUnauthorized}},
		{name: "a revoked key", headers: map[string]string{httpapi.HeaderAPIKey: keyC}, want: &answer{401, httpapi.CodeUnauthorized}},
	}
	// Nothing of A's user may show in any answer: the personal number in every spelling, the
	// holder's names, the e-mail, the externalIds.
	secrets := []string{pn, "19121212-1212", "121212-1212", "1212121212", "tolvan", "tolvansson", "example.se", extOther}
	anon := apiClient{t: t, base: base}
	for _, p := range principals {
		for _, r := range routes {
			t.Run(p.name+"/"+r.method+" "+r.route, func(t *testing.T) {
				want := r.other
				version := v2
				if r.version != "" {
					version = r.version
				}
				switch {
				case r.public:
					want = r.publicAnswer
				case p.want != nil && p.want.status == http.StatusForbidden && version != v2:
					want = answer{http.StatusUnauthorized, httpapi.CodeUnauthorized}
				case p.want != nil:
					want = *p.want
				}
				headers := map[string]string{"Service-Version": version}
				for k, v := range p.headers {
					headers[k] = v
				}
				code, body, h := anon.do(r.method, r.path, r.body, headers)
				got := answer{code, problemCodeOf(body)}
				if got != want {
					t.Errorf("%s %s = %d %s, want %d %s", r.method, r.path, code, body, want.status, want.code)
				}
				if code >= 400 && h.Get("Content-Type") != httpapi.ContentTypeProblem {
					t.Errorf("a %d in %q: %s", code, h.Get("Content-Type"), body)
				}
				lower := strings.ToLower(string(body))
				for _, s := range secrets {
					if strings.Contains(lower, s) && !(r.route == "/users" && r.method == "POST") {
						t.Errorf("the answer holds %q: %s", s, body)
					}
				}
				if strings.Contains(lower, strings.ToLower(extOwner)) && !(r.route == "/users" && r.method == "POST" && code == http.StatusCreated) {
					t.Errorf("the answer holds A's externalId: %s", body)
				}
				if p.want != nil || r.public || (r.unknownPath == "" && r.unknownBody == nil && !strings.Contains(r.route, ":")) {
					return
				}
				// Another client cannot tell A's resource from one that does not exist.
				path, reqBody := r.path, r.body
				if r.unknownPath != "" {
					path = r.unknownPath
				} else if r.unknownBody == nil {
					path = replaceIDs(r.path, unknownID, owner, col, consentID, doc)
				}
				if r.unknownBody != nil {
					reqBody = r.unknownBody
				}
				ucode, ubody, _ := anon.do(r.method, path, reqBody, headers)
				if ucode != code || problemCodeOf(ubody) != got.code {
					t.Errorf("A's resource: %d %s; one that does not exist: %d %s", code, body, ucode, ubody)
				}
			})
		}
	}

	// And nothing of A's changed: the user, its consent and its cancellation are as they were.
	if code, body, _ := a.do("GET", "/users/"+owner, nil, v2h); code != 200 || strings.Contains(string(body), "deletedAt") {
		t.Errorf("A's user after the walk: %d %s", code, body)
	}
	if v := a.readConsent(consentID, func(consentView) bool { return true }); v.Status == "REVOKED" {
		t.Errorf("A's consent after the walk: %+v", v)
	}
	if code, body, _ := a.do("GET", "/cancellations/"+doc, nil, nil); code != 200 || strings.Contains(string(body), "CANCELED") {
		t.Errorf("A's cancellation after the walk: %d %s", code, body)
	}
	if code, body, _ := a.do("GET", "/collections/"+col+"/cancellations", nil, nil); code != 200 || strings.Count(string(body), `"documentId"`) != 1 {
		t.Errorf("A's collection's cancellations after the walk: %d %s", code, body)
	}
}

// servedRoutes lists the routes of the API engine as the service builds it.
func servedRoutes(t *testing.T, svc *Service) gin.RoutesInfo {
	t.Helper()
	sessions, err := svc.sessionAuth()
	if err != nil {
		t.Fatal(err)
	}
	engine := httpapi.NewEngine(httpapi.Options{Keys: apikeys.NewReader(svc.models.APIKeys),
		Sessions: sessions.tokens, SessionUsers: sessions.users, JWKS: sessions.tokens.Keys().JWKSJSON()})
	if err := svc.registerRoutes(engine, sessions); err != nil {
		t.Fatal(err)
	}
	routes := engine.Routes()
	slices.SortFunc(routes, func(x, y gin.RouteInfo) int { return strings.Compare(x.Method+x.Path, y.Method+y.Path) })
	return routes
}

// replaceIDs replaces every one of ids in path by unknown.
func replaceIDs(path, unknown string, ids ...string) string {
	for _, id := range ids {
		path = strings.ReplaceAll(path, id, unknown)
	}
	return path
}
