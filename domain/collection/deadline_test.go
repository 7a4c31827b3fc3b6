package collection_test

import (
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
)

func TestExpireDeadline(t *testing.T) {
	due := t0.Add(2 * time.Minute)
	cases := []struct {
		status collection.Status
		kind   collection.DeadlineKind
		want   collection.Status
	}{
		{collection.StatusContactFormPending, collection.DeadlineContactForm, collection.StatusContactForm},
		{collection.StatusCollectionInputPending, collection.DeadlineCollectionInput, collection.StatusCollectionInputTimeout},
		{collection.StatusLogin, collection.DeadlineMethodSelection, collection.StatusTwoFactorMethodSelectionTimeout},
		{collection.StatusWaitingForUserAction, collection.DeadlineEIDOrder, collection.StatusAuthenticationTimeout},
	}
	for _, c := range cases {
		given := []domain.Event{started(), changed(collection.StatusRunning, collection.StatusLogin),
			collection.StatusChanged{From: collection.StatusLogin, To: c.status, ChangedAt: t0,
				Deadline: &collection.Deadline{Kind: c.kind, DueAt: due}}}
		if c.status == collection.StatusLogin {
			given = given[:1]
			given = append(given, collection.StatusChanged{From: collection.StatusRunning, To: c.status, ChangedAt: t0,
				Deadline: &collection.Deadline{Kind: c.kind, DueAt: due}})
		}
		t.Run(string(c.kind)+" before it is due", func(t *testing.T) {
			scenario(t).Given(given...).When(func(col *collection.Collection) error {
				return col.ExpireDeadline(due.Add(-time.Millisecond))
			}).Then()
		})
		t.Run(string(c.kind)+" when due", func(t *testing.T) {
			scenario(t).Given(given...).When(func(col *collection.Collection) error {
				return col.ExpireDeadline(due)
			}).Then(collection.StatusChanged{From: c.status, To: c.want, Message: "The user did not act before the deadline.", ChangedAt: due})
		})
	}
	t.Run("a status without a deadline never expires", func(t *testing.T) {
		scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusLogin)).
			When(func(col *collection.Collection) error { return col.ExpireDeadline(t0.Add(time.Hour)) }).Then()
	})
	t.Run("a later status clears the deadline", func(t *testing.T) {
		scenario(t).Given(started(), collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusLogin, ChangedAt: t0,
			Deadline: &collection.Deadline{Kind: collection.DeadlineMethodSelection, DueAt: due}},
			changed(collection.StatusLogin, collection.StatusCollecting)).
			When(func(col *collection.Collection) error {
				return col.ExpireDeadline(due.Add(time.Hour))
			}).Then()
	})
	t.Run("a final status cannot carry a deadline", func(t *testing.T) {
		scenario(t).Given(started()).When(func(col *collection.Collection) error {
			return col.ChangeStatusWith(collection.StatusFailed, collection.StatusDetails{Deadline: &collection.Deadline{Kind: collection.DeadlineEIDOrder, DueAt: due}}, t0)
		}).ThenError(domain.ErrInvalid)
	})
	t.Run("staying in a status with new instructions records them", func(t *testing.T) {
		details := collection.StatusDetails{Message: "Open the app"}
		scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusLogin)).
			When(func(col *collection.Collection) error {
				return col.ChangeStatusWith(collection.StatusLogin, details, t0)
			}).Then(collection.StatusChanged{From: collection.StatusLogin, To: collection.StatusLogin, Message: "Open the app", ChangedAt: t0})
	})
}

func TestCheckAuthenticatedPerson(t *testing.T) {
	const asked, other = "199001010017", "199001010082"
	cases := []struct {
		rule                     string
		requested, flow, company string
		want                     collection.PersonCheck
	}{
		{"(a) verified in the flow, same", asked, asked, "", collection.PersonMatches},
		{"(a)+(c) verified in the flow, another person", asked, other, "", collection.PersonMismatch},
		{"(a) the flow wins over the company", asked, asked, other, collection.PersonMatches},
		{"(b) the company's number, same", asked, "", asked, collection.PersonMatches},
		{"(b)+(c) the company's number, another person", asked, "", other, collection.PersonMismatch},
		{"(d) nobody tells", asked, "", "", collection.PersonUnverifiable},
		{"(d) nothing requested to compare with", "", other, other, collection.PersonUnverifiable},
	}
	for _, c := range cases {
		if got := collection.CheckAuthenticatedPerson(c.requested, c.flow, c.company); got != c.want {
			t.Errorf("%s: %v, want %v", c.rule, got, c.want)
		}
	}
}
