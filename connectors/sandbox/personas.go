package sandbox

import (
	"fmt"
	"time"
)

// loginBehaviour is how a persona's sign-in at the company goes.
type loginBehaviour int

const (
	// signs: the user signs in the EID app and the company authenticates them.
	signs loginBehaviour = iota
	// refusedAtStart: the company refuses the login before any signature is asked for.
	refusedAtStart
	// failsAtSignature: the order is shown to the user; when they act, the sign-in fails.
	failsAtSignature
	// neverSigns: the order waits for a signature that never comes and expires.
	neverSigns
)

// Failure reasons of the company's API. They are the company's vocabulary, not Samla's: the
// company adapter maps them to collection statuses.
const (
	reasonInvalidCredentials     = "INVALID_CREDENTIALS"
	reasonUserCancelled          = "USER_CANCELLED"
	reasonOrderExpired           = "ORDER_EXPIRED"
	reasonAlreadyInProgress      = "ALREADY_IN_PROGRESS"
	reasonAccountLocked          = "ACCOUNT_LOCKED"
	reasonKYCRequired            = "KYC_REQUIRED"
	reasonNotACustomer           = "NOT_A_CUSTOMER"
	reasonContactDetailsRequired = "CONTACT_DETAILS_REQUIRED"
	reasonSignInRejected         = "SIGN_IN_REJECTED"
	reasonTemporaryError         = "TEMPORARY_ERROR"
)

// persona is one row of SANDBOX.md's persona table as the demo insurer plays it. New personas
// (two-factor, contact form, collection input, partial data) are new rows plus, where the row
// needs a step the company API does not have yet, a new session state.
type persona struct {
	personalNumber string
	name           string
	login          loginBehaviour
	failureReason  string // refusedAtStart and failsAtSignature
	// authenticatesAs is the personal number the EID says signed, when not the requested one
	// (the company reports it; Samla must notice the mismatch).
	authenticatesAs string
	// insurances builds the persona's insurances at an insurance company; nil means none.
	insurances func(now time.Time, holder string) []insurance
	// collectionFails makes every data request of the persona fail with 500.
	collectionFails bool
}

// defaultPersonalNumber is the persona any other valid personal number behaves like.
const defaultPersonalNumber = "199001010017"

type personaTable map[string]*persona

func newPersonaTable() personaTable {
	rows := []*persona{
		{personalNumber: "199001010017", name: "Test Testsson", insurances: basicInsurances},
		{personalNumber: "191212121212", name: "Tolvan Tolvansson", insurances: tolvanInsurances},
		{personalNumber: "199001010033", name: "Tom Tomsson"},
		{personalNumber: "199001010041", name: "Fel Felsson", login: refusedAtStart, failureReason: reasonInvalidCredentials},
		{personalNumber: "199001010082", name: "Annan Andersson", authenticatesAs: "199001010017", insurances: basicInsurances},
		{personalNumber: "199001010090", name: "Ångra Ångrasson", login: failsAtSignature, failureReason: reasonUserCancelled},
		{personalNumber: "199001010108", name: "Väntar Väntarsson", login: neverSigns},
		{personalNumber: "199001010116", name: "Dubbel Dubbelsson", login: refusedAtStart, failureReason: reasonAlreadyInProgress},
		{personalNumber: "199001010124", name: "Låst Låstsson", login: failsAtSignature, failureReason: reasonAccountLocked},
		{personalNumber: "199001010132", name: "Kyc Kycsson", login: failsAtSignature, failureReason: reasonKYCRequired},
		{personalNumber: "199001010140", name: "Ny Nysson", login: failsAtSignature, failureReason: reasonNotACustomer},
		{personalNumber: "199001010157", name: "Trasig Trasigsson", insurances: basicInsurances, collectionFails: true},
		{personalNumber: "199001010165", name: "Miss Lyckadsson", login: failsAtSignature, failureReason: reasonTemporaryError},
		{personalNumber: "199001010173", name: "Nekad Nekadsson", login: failsAtSignature, failureReason: reasonSignInRejected},
		{personalNumber: "199001010207", name: "Kontakt Kontaktsson", login: failsAtSignature, failureReason: reasonContactDetailsRequired},
	}
	t := make(personaTable, len(rows))
	for _, p := range rows {
		if _, dup := t[p.personalNumber]; dup {
			panic(fmt.Sprintf("sandbox persona %s listed twice", p.personalNumber))
		}
		t[p.personalNumber] = p
	}
	return t
}

// lookup returns the persona of a validated personal number; unknown numbers (and a login
// without one, as when the user scans a QR code) behave like the default persona.
func (t personaTable) lookup(personalNumber string) *persona {
	if p, ok := t[personalNumber]; ok {
		return p
	}
	return t[defaultPersonalNumber]
}

// insurance is one insurance in the demo insurer's wire format. Pointers are sent as null or
// left out: the company does not know that value.
type insurance struct {
	ID           string   `json:"id"`
	Product      string   `json:"product"` // home, motor, accident, pet, life
	Name         *string  `json:"name"`
	PolicyNumber *string  `json:"policyNumber,omitempty"`
	Premium      *premium `json:"premium,omitempty"`
	RenewalDate  *string  `json:"renewalDate,omitempty"`
	StartDate    *string  `json:"startDate"`
	PolicyHolder *holder  `json:"policyHolder,omitempty"`
}

type premium struct {
	Amount    *float64 `json:"amount"`
	Currency  string   `json:"currency"`
	Frequency *string  `json:"frequency"` // monthly, quarterly, yearly
}

type holder struct {
	Name string `json:"name"`
}

func ptr[T any](v T) *T { return &v }

// nextAnniversary is the first month/day on or after now, so that renewal dates stay in the
// future however long the sandbox lives.
func nextAnniversary(now time.Time, month time.Month, day int) *string {
	d := time.Date(now.Year(), month, day, 0, 0, 0, 0, time.UTC)
	if d.Before(now.UTC().Truncate(24 * time.Hour)) {
		d = d.AddDate(1, 0, 0)
	}
	return ptr(d.Format(time.DateOnly))
}

func sek(amount float64, frequency string) *premium {
	return &premium{Amount: ptr(amount), Currency: "SEK", Frequency: ptr(frequency)}
}

func basicInsurances(now time.Time, holderName string) []insurance {
	return []insurance{{
		ID: "sdi-home-100017", Product: "home", Name: ptr("Hemförsäkring Bas"),
		PolicyNumber: ptr("H-100017"), Premium: sek(245, "monthly"),
		RenewalDate: nextAnniversary(now, time.April, 1), StartDate: ptr("2020-04-01"),
		PolicyHolder: &holder{Name: holderName},
	}}
}

// tolvanInsurances is the richest data set (SANDBOX.md: at least home, car, accident and pet,
// each with insurance number, premium and frequency and renewal date, some fields unknown).
func tolvanInsurances(now time.Time, holderName string) []insurance {
	h := &holder{Name: holderName}
	return []insurance{
		{ID: "sdi-home-121212", Product: "home", Name: ptr("Hemförsäkring Stor"),
			PolicyNumber: ptr("H-4471-1212"), Premium: sek(289, "monthly"),
			RenewalDate: nextAnniversary(now, time.September, 1), StartDate: ptr("2015-09-01"), PolicyHolder: h},
		// Start date unknown: the insurer migrated the policy from an older system.
		{ID: "sdi-car-121212", Product: "motor", Name: ptr("Bilförsäkring Halv ABC123"),
			PolicyNumber: ptr("B-2093-1212"), Premium: sek(4860, "yearly"),
			RenewalDate: nextAnniversary(now, time.March, 15), StartDate: nil, PolicyHolder: h},
		{ID: "sdi-accident-121212", Product: "accident", Name: ptr("Olycksfallsförsäkring"),
			PolicyNumber: ptr("O-7310-1212"), Premium: sek(129, "quarterly"),
			RenewalDate: nextAnniversary(now, time.January, 1), StartDate: ptr("2019-01-01"), PolicyHolder: h},
		// No product name on file.
		{ID: "sdi-pet-121212", Product: "pet", Name: nil,
			PolicyNumber: ptr("D-8810-1212"), Premium: sek(312, "monthly"),
			RenewalDate: nextAnniversary(now, time.June, 30), StartDate: nil, PolicyHolder: h},
		// Premium and renewal unknown: paid through the employer's group agreement.
		{ID: "sdi-life-121212", Product: "life", Name: ptr("Livförsäkring Grupp"),
			PolicyNumber: ptr("L-5150-1212"), Premium: &premium{Currency: "SEK"},
			StartDate: ptr("2012-12-12"), PolicyHolder: h},
	}
}
