package company_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/connectors/company"
	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/connectors/worker"
	dcompany "github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/consent"
)

const bankCo = "se-demo-bank"

var allScopes = []consent.Scope{consent.ScopeCheckingAccounts, consent.ScopeCreditCards, consent.ScopeSavingsAccounts}

// awaitConsent polls a bank consent until it leaves PENDING.
func awaitConsent(t *testing.T, c *company.Client, bc worker.BankConsent) worker.BankConsent {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for bc.State == worker.BankConsentPending {
		if time.Now().After(deadline) {
			t.Fatalf("consent %s stays pending", bc.ID)
		}
		time.Sleep(5 * time.Millisecond)
		var err error
		if bc, err = c.ConsentStatus(context.Background(), bankCo, bc.ID); err != nil {
			t.Fatal(err)
		}
	}
	return bc
}

func askConsent(t *testing.T, c *company.Client, req worker.BankConsentRequest) worker.BankConsent {
	t.Helper()
	if req.LoginMethod == "" {
		req.LoginMethod = mock
	}
	if req.Scope == nil {
		req.Scope = allScopes
	}
	bc, err := c.CreateConsent(context.Background(), bankCo, req)
	if err != nil {
		t.Fatal(err)
	}
	return bc
}

// TestConsentOfEveryPersonaThroughTheAdapter: SANDBOX.md's consent personas, as the bank
// reports them in Samla's terms.
func TestConsentOfEveryPersonaThroughTheAdapter(t *testing.T) {
	sb := startSandbox(t, quick()...)
	f := newClient(t, sb.BaseURL, nil)
	cases := map[string]consent.FailureCode{
		"199001010017": "",
		"191212121212": "",
		"198507099805": "",
		"199001010090": consent.FailureAuthenticationCancelled,
		"199001010108": consent.FailureAuthenticationTimeout,
		"199001010082": consent.FailureAuthenticationMismatch,
		"199001010116": consent.FailureAuthenticationConflict,
		"199001010157": consent.FailureThirdPartyError,
	}
	for pn, want := range cases {
		t.Run(pn, func(t *testing.T) {
			ref := "consent-" + pn
			before := time.Now()
			bc := askConsent(t, f.client, worker.BankConsentRequest{PersonalNumber: pn, Reference: ref, IdempotencyKey: ref + "/1"})
			if bc.ID == "" || bc.Reference != ref || !slices.Equal(bc.Scope, allScopes) {
				t.Fatalf("%+v", bc)
			}
			if pn != "199001010116" && (bc.State != worker.BankConsentPending || bc.EIDOrder == nil || bc.EIDOrder.QRStartSecret == "" ||
				bc.EIDOrder.AutoStartToken == "" || !bc.EIDOrder.ExpiresAt.After(bc.EIDOrder.StartedAt)) {
				t.Fatalf("a new consent waits for the signature: %+v", bc)
			}
			bc = awaitConsent(t, f.client, bc)
			if want == "" {
				if bc.State != worker.BankConsentAuthorized || bc.AuthorizedAt.Before(before.Add(-time.Second)) ||
					bc.ValidUntil.Sub(bc.AuthorizedAt) != sandbox.DefaultConsentValidity || bc.Outcome != "" ||
					bc.Signer == nil || bc.Signer.PersonalNumber != pn {
					t.Fatalf("%+v", bc)
				}
				return
			}
			if bc.State != worker.BankConsentFailed || bc.Outcome != want || bc.FailureReason == "" || !bc.AuthorizedAt.IsZero() {
				t.Fatalf("%+v, want FAILED %s", bc, want)
			}
			if want == consent.FailureAuthenticationMismatch && (bc.Signer == nil || bc.Signer.PersonalNumber != "199001010017") {
				t.Fatalf("the signer is someone else: %+v", bc.Signer)
			}
		})
	}
	if logs := f.logs.String(); strings.Contains(logs, "19900101") || strings.Contains(logs, "191212") {
		t.Errorf("personal numbers in logs:\n%s", logs)
	}
}

func TestConsentSignedOnAnotherDevice(t *testing.T) {
	sb := startSandbox(t, quick(sandbox.WithEIDOrderTimeout(5*time.Second))...)
	f := newClient(t, sb.BaseURL, nil)
	ctx := context.Background()
	bc := askConsent(t, f.client, worker.BankConsentRequest{PersonalNumber: "191212121212", LoginMethod: dcompany.LoginEIDOtherDevice,
		Reference: "consent-od", Scope: []consent.Scope{consent.ScopeCreditCards}})
	time.Sleep(50 * time.Millisecond)
	if got, err := f.client.ConsentStatus(ctx, bankCo, bc.ID); err != nil || got.State != worker.BankConsentPending ||
		got.Reference != "consent-od" || got.EIDOrder == nil || got.EIDOrder.OrderRef != bc.EIDOrder.OrderRef {
		t.Fatalf("nobody signs by themselves: %+v %v", got, err)
	}
	if _, err := sb.EID().SignByReference("consent-od", time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := awaitConsent(t, f.client, bc); got.State != worker.BankConsentAuthorized || !slices.Equal(got.Scope, []consent.Scope{consent.ScopeCreditCards}) {
		t.Fatalf("%+v", got)
	}
}

func TestConsentRevocationAndRequests(t *testing.T) {
	sb := startSandbox(t, quick(sandbox.WithEIDOrderTimeout(5*time.Second))...)
	f := newClient(t, sb.BaseURL, nil)
	ctx := context.Background()

	t.Run("revoking a pending consent withdraws its order", func(t *testing.T) {
		bc := askConsent(t, f.client, worker.BankConsentRequest{PersonalNumber: "199001010017", LoginMethod: dcompany.LoginEIDOtherDevice, Reference: "consent-r1"})
		if err := f.client.RevokeConsent(ctx, bankCo, bc.ID); err != nil {
			t.Fatal(err)
		}
		if got, err := f.client.ConsentStatus(ctx, bankCo, bc.ID); err != nil || got.State != worker.BankConsentRevoked {
			t.Fatalf("%+v %v", got, err)
		}
		if _, err := sb.EID().SignByReference("consent-r1", time.Now()); err == nil {
			t.Fatal("the order of a revoked consent can still be signed")
		}
		if err := f.client.RevokeConsent(ctx, bankCo, bc.ID); err != nil {
			t.Fatalf("revoking twice: %v", err)
		}
		if err := f.client.RevokeConsent(ctx, bankCo, "no-such-consent"); err != nil {
			t.Fatalf("revoking what the bank does not know: %v", err)
		}
	})
	t.Run("an authorized consent expires", func(t *testing.T) {
		bc := awaitConsent(t, f.client, askConsent(t, f.client, worker.BankConsentRequest{PersonalNumber: "199001010017",
			Reference: "consent-x", Validity: 300 * time.Millisecond}))
		if bc.State != worker.BankConsentAuthorized || bc.ValidUntil.Sub(bc.AuthorizedAt) != time.Second {
			t.Fatalf("validity is asked for in whole seconds, rounded up: %+v", bc)
		}
		time.Sleep(time.Until(bc.ValidUntil) + 10*time.Millisecond)
		if got, err := f.client.ConsentStatus(ctx, bankCo, bc.ID); err != nil || got.State != worker.BankConsentExpired {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("a retried create gives the same consent", func(t *testing.T) {
		req := worker.BankConsentRequest{PersonalNumber: "191212121212", LoginMethod: dcompany.LoginEIDOtherDevice,
			Reference: "consent-i", IdempotencyKey: "consent-i/1", Scope: allScopes}
		first := askConsent(t, f.client, req)
		again := askConsent(t, f.client, req)
		if again.ID != first.ID || again.EIDOrder.OrderRef != first.EIDOrder.OrderRef {
			t.Fatalf("%+v / %+v", first, again)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		if _, err := f.client.ConsentStatus(ctx, bankCo, "no-such-consent"); !errors.Is(err, worker.ErrBankConsentUnknown) {
			t.Fatalf("unknown: %v", err)
		}
		_, err := f.client.CreateConsent(ctx, "se-demo-insurer", worker.BankConsentRequest{PersonalNumber: "199001010017", LoginMethod: mock, Scope: allScopes})
		if !errors.Is(err, worker.ErrConsentsNotSupported) || !errors.Is(err, worker.ErrCompanyFailed) {
			t.Fatalf("insurer: %v", err)
		}
		_, err = f.client.CreateConsent(ctx, bankCo, worker.BankConsentRequest{PersonalNumber: "199001010017", LoginMethod: dcompany.LoginPDFUpload, Scope: allScopes})
		if !errors.Is(err, worker.ErrLoginMethodNotSupported) {
			t.Fatalf("PDF: %v", err)
		}
		_, err = f.client.CreateConsent(ctx, bankCo, worker.BankConsentRequest{PersonalNumber: "199001010017", LoginMethod: mock, Scope: []consent.Scope{"LOANS"}})
		if !errors.Is(err, worker.ErrCompanyFailed) {
			t.Fatalf("unknown scope: %v", err)
		}
	})
}

func TestPSD2DataThroughTheAdapter(t *testing.T) {
	sb := startSandbox(t, quick()...)
	f := newClient(t, sb.BaseURL, nil)
	ctx := context.Background()
	authorized := func(t *testing.T, pn, ref string, scope ...consent.Scope) worker.BankConsent {
		t.Helper()
		bc := awaitConsent(t, f.client, askConsent(t, f.client, worker.BankConsentRequest{PersonalNumber: pn, Reference: ref, Scope: scope}))
		if bc.State != worker.BankConsentAuthorized {
			t.Fatalf("%+v", bc)
		}
		return bc
	}
	fetch := func(t *testing.T, grant worker.PSD2Grant, p worker.DataProduct) worker.ProductData {
		t.Helper()
		d, err := f.client.FetchPSD2(ctx, bankCo, grant, p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return d
	}

	t.Run("every product of the richest persona", func(t *testing.T) {
		bc := authorized(t, "191212121212", "consent-all")
		grant := worker.PSD2Grant{BankConsentID: bc.ID, Scope: allScopes}
		if got := worker.PSD2Products(grant.Scope); !slices.Equal(got, []worker.DataProduct{worker.ProductAccounts, worker.ProductCards}) {
			t.Fatalf("PSD2 products %v", got)
		}
		acc := fetch(t, grant, worker.ProductAccounts)
		if acc.Product != worker.ProductAccounts || len(acc.CheckingAccounts) != 1 || len(acc.SavingsAccounts) != 2 ||
			acc.CheckingAccounts[0].Balance.Amount != 23456.78 || acc.CheckingAccounts[0].AvailableBalance.Amount != 21034.50 ||
			acc.SavingsAccounts[0].AvailableBalance != nil || len(acc.CreditCards) != 0 {
			t.Errorf("accounts %+v", acc)
		}
		cards := fetch(t, grant, worker.ProductCards).CreditCards
		if len(cards) != 2 || cards[0].Balance.Amount != -4312.90 || cards[0].CreditLimit.Amount != 50000 || cards[1].CreditLimit != nil {
			t.Errorf("cards %+v", cards)
		}
	})
	t.Run("the scope decides", func(t *testing.T) {
		checking := authorized(t, "191212121212", "consent-checking", consent.ScopeCheckingAccounts)
		grant := worker.PSD2Grant{BankConsentID: checking.ID, Scope: []consent.Scope{consent.ScopeCheckingAccounts}}
		if got := worker.PSD2Products(grant.Scope); !slices.Equal(got, []worker.DataProduct{worker.ProductAccounts}) {
			t.Fatalf("PSD2 products %v", got)
		}
		if d := fetch(t, grant, worker.ProductAccounts); len(d.CheckingAccounts) != 1 || d.SavingsAccounts != nil {
			t.Errorf("checking only: %+v", d)
		}
		if _, err := f.client.FetchPSD2(ctx, bankCo, grant, worker.ProductCards); !errors.Is(err, worker.ErrConsentNotUsable) {
			t.Errorf("cards outside the bank consent's scope: %v", err)
		}
		// A grant narrower than its bank consent reads only what the grant names.
		all := authorized(t, "191212121212", "consent-wide")
		narrow := worker.PSD2Grant{BankConsentID: all.ID, Scope: []consent.Scope{consent.ScopeSavingsAccounts}}
		if d := fetch(t, narrow, worker.ProductAccounts); d.CheckingAccounts != nil || len(d.SavingsAccounts) != 2 {
			t.Errorf("savings only: %+v", d)
		}
		if got := worker.PSD2Products(nil); len(got) != 0 {
			t.Errorf("no scope, no products: %v", got)
		}
	})
	t.Run("a consent the bank refuses", func(t *testing.T) {
		pending := askConsent(t, f.client, worker.BankConsentRequest{PersonalNumber: "199001010017", LoginMethod: dcompany.LoginEIDOtherDevice,
			Reference: "consent-pending", Scope: allScopes})
		revoked := authorized(t, "199001010017", "consent-revoked")
		if err := f.client.RevokeConsent(ctx, bankCo, revoked.ID); err != nil {
			t.Fatal(err)
		}
		for name, id := range map[string]string{"pending": pending.ID, "revoked": revoked.ID, "unknown": "no-such-consent", "none": ""} {
			before := sb.Stats().Requests
			_, err := f.client.FetchPSD2(ctx, bankCo, worker.PSD2Grant{BankConsentID: id, Scope: allScopes}, worker.ProductAccounts)
			if !errors.Is(err, worker.ErrConsentNotUsable) || errors.Is(err, worker.ErrCompanyFailed) {
				t.Errorf("%s: %v", name, err)
			}
			if n := sb.Stats().Requests - before; n > 1 {
				t.Errorf("%s: %d requests; a refused consent is not worth retrying", name, n)
			}
		}
		if _, err := f.client.FetchPSD2(ctx, bankCo, worker.PSD2Grant{BankConsentID: revoked.ID, Scope: allScopes}, worker.ProductLoans); !errors.Is(err, worker.ErrCompanyFailed) {
			t.Errorf("loans are no PSD2 product: %v", err)
		}
		if _, err := f.client.FetchPSD2(ctx, "se-demo-insurer", worker.PSD2Grant{BankConsentID: revoked.ID, Scope: allScopes}, worker.ProductAccounts); !errors.Is(err, worker.ErrCompanyFailed) {
			t.Errorf("a company without PSD2: %v", err)
		}
	})
}
