package cancellation_test

import (
	"errors"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/domaintest"
)

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func scenario(t *testing.T) *domaintest.Scenario[*cancellation.Cancellation] {
	return domaintest.For(t, cancellation.Kind)
}

func str(s string) *string { return &s }

// insuranceCollection is acme's insurance collection c1 of Tolvan ended in status, with two
// insurances: i1 renews after t0, i2 has no number, type or renewal date.
func insuranceCollection(t *testing.T, status collection.Status, product collection.Product) *collection.Collection {
	t.Helper()
	c := collection.Kind.New()
	evs := []domain.Event{
		collection.Started{CollectionID: "c1", ClientID: "acme", Company: "se-demo-insurer", Product: product,
			LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", APIVersion: "2026-04-01", UserUUID: "u1", StartedAt: t0,
			Personal: &collection.StartedPerson{PersonalNumber: "191212121212", RequestHash: "h"}},
		collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusCollecting, ChangedAt: t0},
	}
	if product == collection.ProductInsurance {
		evs = append(evs, collection.InsurancesCollected{InsuranceCount: 2, CollectedAt: t0,
			Personal: &collection.InsuranceRecords{
				Insurances: []collection.Insurance{
					{ID: "i1", InsuranceType: "HOME", InsuranceNumber: str("HEM-1"), RenewalDate: str("2027-03-01")},
					{ID: "i2", RenewalDate: str("2026-01-01")},
				},
				HolderNames: map[string]string{"i1": "Tolvan Tolvansson"}}})
	}
	if status != collection.StatusCollecting {
		evs = append(evs, collection.StatusChanged{From: collection.StatusCollecting, To: status, ChangedAt: t0})
	}
	if err := domain.Rehydrate(c, evs...); err != nil {
		t.Fatal(err)
	}
	return c
}

func request(col *collection.Collection, insuranceID string) cancellation.RequestInput {
	return cancellation.RequestInput{DocumentID: "d1", ClientID: "acme", Collection: col, InsuranceID: insuranceID,
		DeliveryMethod: cancellation.DeliveryEmail, Email: "tolvan@example.se", TemplateVersion: 1,
		IdempotencyKey: "k", RequestHash: "rh"}
}

func requested() cancellation.Requested {
	return cancellation.Requested{DocumentID: "d1", ClientID: "acme", CollectionID: "c1", UserUUID: "u1",
		Company: "se-demo-insurer", InsuranceID: "i1", InsuranceType: "HOME", DeliveryMethod: cancellation.DeliveryEmail,
		TemplateVersion: 1, CancellationDate: "2027-03-01", RequestedAt: t0,
		Personal: &cancellation.Requester{HolderName: "Tolvan Tolvansson", PersonalNumber: "191212121212",
			InsuranceNumber: "HEM-1", Email: "tolvan@example.se", IdempotencyKey: "k", RequestHash: "rh"}}
}

const (
	sha1 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	sha2 = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
)

var sent = cancellation.Sent{At: t0, Deadline: t0.Add(time.Hour), ProcessID: "p1", DocumentSHA256: sha1, DocumentSize: 10}

func TestRequest(t *testing.T) {
	completed := insuranceCollection(t, collection.StatusCompleted, collection.ProductInsurance)
	t.Run("one insurance of a completed insurance collection: PREPARATION with what the document needs", func(t *testing.T) {
		scenario(t).When(func(c *cancellation.Cancellation) error { return c.Request(request(completed, "i1"), t0) }).
			Then(requested())
	})
	t.Run("unknown values stay empty, the date is the request's when the renewal passed", func(t *testing.T) {
		want := requested()
		want.InsuranceID, want.InsuranceType, want.CancellationDate = "i2", "", "2026-11-25"
		want.Personal.HolderName, want.Personal.InsuranceNumber = "", ""
		scenario(t).When(func(c *cancellation.Cancellation) error { return c.Request(request(completed, "i2"), t0) }).
			Then(want)
	})
	t.Run("SMS keeps the phone number only", func(t *testing.T) {
		in := request(completed, "i1")
		in.DeliveryMethod, in.PhoneNumber = cancellation.DeliverySMS, "46701234567"
		want := requested()
		want.DeliveryMethod, want.Personal.Email, want.Personal.PhoneNumber = cancellation.DeliverySMS, "", "46701234567"
		scenario(t).When(func(c *cancellation.Cancellation) error { return c.Request(in, t0) }).Then(want)
	})
	for _, tc := range []struct {
		name  string
		edit  func(*cancellation.RequestInput)
		field string
	}{
		{"no document id", func(in *cancellation.RequestInput) { in.DocumentID = "" }, cancellation.FieldDocumentID},
		{"no method", func(in *cancellation.RequestInput) { in.DeliveryMethod = "" }, cancellation.FieldDeliveryMethod},
		{"letter", func(in *cancellation.RequestInput) { in.DeliveryMethod = "LETTER" }, cancellation.FieldDeliveryMethod},
		{"e-mail missing", func(in *cancellation.RequestInput) { in.Email = "" }, cancellation.FieldEmail},
		{"e-mail malformed", func(in *cancellation.RequestInput) { in.Email = "tolvan@example" }, cancellation.FieldEmail},
		{"phone missing for SMS", func(in *cancellation.RequestInput) { in.DeliveryMethod = cancellation.DeliverySMS },
			cancellation.FieldPhoneNumber},
		{"phone with a plus", func(in *cancellation.RequestInput) {
			in.DeliveryMethod, in.PhoneNumber = cancellation.DeliverySMS, "+46701234567"
		}, cancellation.FieldPhoneNumber},
		{"no template", func(in *cancellation.RequestInput) { in.TemplateVersion = 0 }, cancellation.FieldTemplateVersion},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			in := request(completed, "i1")
			tc.edit(&in)
			scenario(t).When(func(c *cancellation.Cancellation) error { return c.Request(in, t0) }).ThenFieldError(tc.field)
		})
	}
	for _, tc := range []struct {
		name string
		col  *collection.Collection
		ins  string
		want error
	}{
		{"a running collection", insuranceCollection(t, collection.StatusCollecting, collection.ProductInsurance), "i1", cancellation.ErrNotCancellable},
		{"a failed collection", insuranceCollection(t, collection.StatusThirdPartyError, collection.ProductInsurance), "i1", cancellation.ErrNotCancellable},
		{"a wealth collection", insuranceCollection(t, collection.StatusCompleted, collection.ProductWealth), "i1", cancellation.ErrNotCancellable},
		{"an insurance it did not collect", completed, "i9", cancellation.ErrUnknownInsurance},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			scenario(t).When(func(c *cancellation.Cancellation) error { return c.Request(request(tc.col, tc.ins), t0) }).ThenError(tc.want)
		})
	}
	t.Run("refused: another client's collection, as if it did not exist", func(t *testing.T) {
		in := request(completed, "i1")
		in.ClientID = "other"
		scenario(t).When(func(c *cancellation.Cancellation) error { return c.Request(in, t0) }).ThenError(cancellation.ErrNotCancellable)
	})
	t.Run("a partial collection may be cancelled from", func(t *testing.T) {
		partial := insuranceCollection(t, collection.StatusCompletedPartial, collection.ProductInsurance)
		if err := cancellation.Cancellable(partial, "acme"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a document id taken already", func(t *testing.T) {
		scenario(t).Given(requested()).When(func(c *cancellation.Cancellation) error { return c.Request(request(completed, "i1"), t0) }).
			ThenError(cancellation.ErrExists)
	})
}

func TestSigningLifecycle(t *testing.T) {
	t.Run("claim, then sent: PENDING with the deadline", func(t *testing.T) {
		scenario(t).Given(requested()).When(func(c *cancellation.Cancellation) error {
			if err := c.Claim("w1", t0, time.Minute); err != nil {
				return err
			}
			return c.MarkSent("p1", sha1, 10, time.Hour, t0)
		}).Then(cancellation.Claimed{WorkerID: "w1", ClaimedAt: t0}, sent)
	})
	t.Run("another live worker's claim blocks, a stale one does not", func(t *testing.T) {
		claimed := cancellation.Claimed{WorkerID: "w1", ClaimedAt: t0}
		scenario(t).Given(requested(), claimed).When(func(c *cancellation.Cancellation) error { return c.Claim("w2", t0.Add(time.Second), time.Minute) }).
			ThenError(cancellation.ErrAlreadyClaimed)
		scenario(t).Given(requested(), claimed).When(func(c *cancellation.Cancellation) error { return c.Claim("w2", t0.Add(2*time.Minute), time.Minute) }).
			Then(cancellation.Claimed{WorkerID: "w2", ClaimedAt: t0.Add(2 * time.Minute)})
	})
	t.Run("the same process again records nothing", func(t *testing.T) {
		scenario(t).Given(requested(), sent).When(func(c *cancellation.Cancellation) error { return c.MarkSent("p1", sha1, 10, time.Hour, t0) }).Then()
	})
	t.Run("signed: CLOSED, then sealed", func(t *testing.T) {
		signedAt := t0.Add(time.Minute)
		scenario(t).Given(requested(), sent).When(func(c *cancellation.Cancellation) error {
			if err := c.Sign(signedAt, "SANDBOX_EID"); err != nil {
				return err
			}
			if c.Status() != cancellation.StatusClosed || c.IsSignedAndSealed() {
				t.Errorf("signed: %s, sealed %v", c.Status(), c.IsSignedAndSealed())
			}
			if err := c.Seal([]byte("%PDF-sealed"), sha2, signedAt); err != nil {
				return err
			}
			if !c.IsSignedAndSealed() || string(c.SealedDocument()) != "%PDF-sealed" || c.NeedsProvider() {
				t.Errorf("sealed: %v %q, needs provider %v", c.IsSignedAndSealed(), c.SealedDocument(), c.NeedsProvider())
			}
			return c.Seal([]byte("%PDF-again"), sha1, signedAt) // a second seal records nothing
		}).Then(cancellation.Signed{SignedAt: signedAt, Method: "SANDBOX_EID"},
			cancellation.Sealed{SealedAt: signedAt, SHA256: sha2, Size: 11, Personal: &cancellation.SealedPersonal{Document: []byte("%PDF-sealed")}})
	})
	t.Run("rejected", func(t *testing.T) {
		scenario(t).Given(requested(), sent).When(func(c *cancellation.Cancellation) error { return c.Reject(t0) }).
			Then(cancellation.Rejected{At: t0})
	})
	t.Run("timed out only past the deadline", func(t *testing.T) {
		scenario(t).Given(requested(), sent).When(func(c *cancellation.Cancellation) error { return c.TimeOut(t0.Add(59 * time.Minute)) }).Then()
		scenario(t).Given(requested(), sent).When(func(c *cancellation.Cancellation) error { return c.TimeOut(t0.Add(time.Hour)) }).
			Then(cancellation.TimedOut{At: t0.Add(time.Hour)})
		scenario(t).Given(requested()).When(func(c *cancellation.Cancellation) error { return c.TimeOut(t0.Add(time.Hour)) }).Then()
	})
	t.Run("a signature after the cancellation was withdrawn is refused", func(t *testing.T) {
		scenario(t).Given(requested(), sent, cancellation.Canceled{At: t0, Reason: cancellation.CanceledByClient}).
			When(func(c *cancellation.Cancellation) error { return c.Sign(t0, "") }).ThenError(cancellation.ErrFinal)
	})
	t.Run("a document error ends PREPARATION only", func(t *testing.T) {
		scenario(t).Given(requested()).When(func(c *cancellation.Cancellation) error {
			return c.FailDocument(cancellation.DocumentRefused, "The signing provider refused the document.", t0)
		}).Then(cancellation.DocumentFailed{At: t0, Code: cancellation.DocumentRefused, Message: "The signing provider refused the document."})
		scenario(t).Given(requested(), sent).When(func(c *cancellation.Cancellation) error {
			return c.FailDocument(cancellation.DocumentRefused, "", t0)
		}).ThenError(cancellation.ErrIllegalTransition)
		scenario(t).Given(requested()).When(func(c *cancellation.Cancellation) error { return c.FailDocument("OOPS", "", t0) }).
			ThenFieldError("code")
	})
}

func TestCancel(t *testing.T) {
	for _, given := range [][]domain.Event{{requested()}, {requested(), sent}} {
		scenario(t).Given(given...).When(func(c *cancellation.Cancellation) error { return c.Cancel(cancellation.CanceledByClient, t0) }).
			Then(cancellation.Canceled{At: t0, Reason: cancellation.CanceledByClient})
	}
	for name, end := range map[string]domain.Event{
		"closed":    cancellation.Signed{SignedAt: t0},
		"rejected":  cancellation.Rejected{At: t0},
		"timed out": cancellation.TimedOut{At: t0},
		"canceled":  cancellation.Canceled{At: t0, Reason: cancellation.CanceledByClient},
	} {
		t.Run("409 once "+name, func(t *testing.T) {
			scenario(t).Given(requested(), sent, end).When(func(c *cancellation.Cancellation) error { return c.Cancel(cancellation.CanceledByClient, t0) }).
				ThenError(cancellation.ErrFinal)
		})
	}
	scenario(t).Given(requested()).When(func(c *cancellation.Cancellation) error { return c.Cancel("WHIM", t0) }).ThenFieldError("reason")
}

func TestProviderCallbacksAreRecordedOnce(t *testing.T) {
	notice := cancellation.ProviderNotified{At: t0, EventID: "e1"}
	scenario(t).Given(requested(), sent).When(func(c *cancellation.Cancellation) error {
		_, err := c.NoteProviderCallback("e1", t0)
		return err
	}).Then(notice)
	scenario(t).Given(requested(), sent, notice).When(func(c *cancellation.Cancellation) error {
		noted, err := c.NoteProviderCallback("e1", t0)
		if noted {
			t.Error("a replayed callback was noted")
		}
		return err
	}).Then()
	// A signed cancellation still waits for its sealed PDF: a callback about it counts.
	scenario(t).Given(requested(), sent, cancellation.Signed{SignedAt: t0}).When(func(c *cancellation.Cancellation) error {
		_, err := c.NoteProviderCallback("e2", t0)
		return err
	}).Then(cancellation.ProviderNotified{At: t0, EventID: "e2"})
	scenario(t).Given(requested(), cancellation.Canceled{At: t0, Reason: cancellation.CanceledByClient}).When(func(c *cancellation.Cancellation) error {
		_, err := c.NoteProviderCallback("e3", t0)
		return err
	}).Then()
}

func TestStatuses(t *testing.T) {
	live := map[cancellation.Status]bool{cancellation.StatusPreparation: true, cancellation.StatusPending: true, cancellation.StatusClosed: true}
	for _, s := range cancellation.AllStatuses() {
		if s.IsLive() != live[s] {
			t.Errorf("%s live %v", s, s.IsLive())
		}
		if s.IsFinal() == (s == cancellation.StatusPreparation || s == cancellation.StatusPending) {
			t.Errorf("%s final %v", s, s.IsFinal())
		}
	}
	if !errors.Is(cancellation.ErrFinal, domain.ErrConflict) || !errors.Is(cancellation.ErrNotCancellable, domain.ErrRefused) {
		t.Error("sentinels map to the wrong HTTP classes")
	}
}
