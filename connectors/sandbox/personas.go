package sandbox

import (
	"fmt"

	"github.com/samla/samla/connectors/sandbox/eidsim"
)

// loginFlow is how a persona's sign-in at the company goes, whatever the login method.
type loginFlow int

const (
	// flowEID: the login method's electronic-ID flow (the user signs, cancels or never acts).
	flowEID loginFlow = iota
	// flowRefused: the company refuses the login before any signature is asked for.
	flowRefused
	// flowTwoFactor: the company sends a code; the simulated user enters it after a while.
	flowTwoFactor
	// flowWrongCode: as flowTwoFactor, but the code the user enters is wrong.
	flowWrongCode
	// flowMethodSelection: the company asks the user to pick a two-factor method; they never do.
	flowMethodSelection
	// flowContactForm: the company asks for the persona's contactDetails first.
	flowContactForm
	// flowInput: the company asks for more input (EMAIL) first.
	flowInput
)

// dataSet is how much a persona has at a company.
type dataSet int

const (
	dataBasic dataSet = iota // a small plausible set
	dataRich                 // 191212121212: every product, with unknown values here and there
	dataNone                 // 199001010033: a customer without products
)

// Failure reasons of the company's API. They are the company's vocabulary, not Samla's: the
// company adapter maps them to collection statuses in one table.
const (
	reasonInvalidCredentials     = "INVALID_CREDENTIALS"
	reasonUserCancelled          = "USER_CANCELLED"
	reasonOrderExpired           = "ORDER_EXPIRED"
	reasonAlreadyInProgress      = "ALREADY_IN_PROGRESS"
	reasonEIDStartFailed         = "EID_START_FAILED"
	reasonAccountLocked          = "ACCOUNT_LOCKED"
	reasonKYCRequired            = "KYC_REQUIRED"
	reasonNotACustomer           = "NOT_A_CUSTOMER"
	reasonContactDetailsRequired = "CONTACT_DETAILS_REQUIRED"
	reasonSignInRejected         = "SIGN_IN_REJECTED"
	reasonTemporaryError         = "TEMPORARY_ERROR"
	reasonIncorrectCode          = "INCORRECT_TWO_FACTOR_CODE"
	reasonClientResponseInvalid  = "CLIENT_RESPONSE_INVALID"
	reasonPDFParseFailed         = "PDF_PARSE_FAILED"
	reasonPDFUnsupported         = "PDF_UNSUPPORTED"
)

// persona is one row of SANDBOX.md's persona table as the demo companies play it.
type persona struct {
	personalNumber string
	givenName      string
	surname        string
	flow           loginFlow
	// eidAction is what the persona does with an EID order.
	eidAction eidsim.Action
	// signsAs is the personal number of whoever really signs the EID order, when not the
	// persona (the EID reports it; Samla must notice the mismatch).
	signsAs string
	// conflicting: another EID order for the persona is running elsewhere when the company
	// starts its own.
	conflicting bool
	// failureReason ends a refused login (flowRefused) or, for flowEID, the login right after
	// the signature (the company's own checks after authentication).
	failureReason string
	// collectionFails makes every data request fail with 500.
	collectionFails bool
	// partial makes one data product of each company time out.
	partial bool
	// contactDetails are the input kinds the contact form of flowContactForm asks for: both
	// kinds, or the e-mail address alone, as companies differ in what they keep.
	contactDetails []string
	data           dataSet
}

func (p *persona) name() string { return p.givenName + " " + p.surname }

// defaultPersonalNumber is the persona any other valid personal number behaves like, and who
// signs when the login started without a personal number (the user identifies in the app).
const defaultPersonalNumber = "199001010017"

type personaTable map[string]*persona

func newPersonaTable() personaTable {
	rows := []*persona{
		{personalNumber: "199001010017", givenName: "Test", surname: "Testsson"},
		{personalNumber: "191212121212", givenName: "Tolvan", surname: "Tolvansson", data: dataRich},
		{personalNumber: "199001010025", givenName: "Halv", surname: "Halvsson", partial: true},
		{personalNumber: "199001010033", givenName: "Tom", surname: "Tomsson", data: dataNone},
		{personalNumber: "199001010041", givenName: "Fel", surname: "Felsson", flow: flowRefused, failureReason: reasonInvalidCredentials},
		{personalNumber: "199001010058", givenName: "Kod", surname: "Kodsson", flow: flowTwoFactor},
		{personalNumber: "199001010066", givenName: "Kontakta", surname: "Kontaktsson", flow: flowContactForm,
			contactDetails: []string{inputEmail, inputPhone}},
		{personalNumber: "199001010074", givenName: "Inmatning", surname: "Inmatningsson", flow: flowInput},
		{personalNumber: "199001010082", givenName: "Annan", surname: "Andersson", signsAs: defaultPersonalNumber},
		{personalNumber: "199001010090", givenName: "Ångra", surname: "Ångrasson", eidAction: eidsim.CancelInApp},
		{personalNumber: "199001010108", givenName: "Väntar", surname: "Väntarsson", eidAction: eidsim.Ignore},
		{personalNumber: "199001010116", givenName: "Dubbel", surname: "Dubbelsson", conflicting: true},
		{personalNumber: "199001010124", givenName: "Låst", surname: "Låstsson", failureReason: reasonAccountLocked},
		{personalNumber: "199001010132", givenName: "Kyc", surname: "Kycsson", failureReason: reasonKYCRequired},
		{personalNumber: "199001010140", givenName: "Ny", surname: "Nysson", failureReason: reasonNotACustomer},
		{personalNumber: "199001010157", givenName: "Trasig", surname: "Trasigsson", collectionFails: true},
		{personalNumber: "199001010165", givenName: "Miss", surname: "Lyckadsson", failureReason: reasonTemporaryError},
		{personalNumber: "199001010173", givenName: "Nekad", surname: "Nekadsson", failureReason: reasonSignInRejected},
		{personalNumber: "199001010181", givenName: "Välj", surname: "Väljsson", flow: flowMethodSelection},
		{personalNumber: "199001010199", givenName: "Felkod", surname: "Felkodsson", flow: flowWrongCode},
		{personalNumber: "199001010207", givenName: "Formulär", surname: "Formulärsson", failureReason: reasonContactDetailsRequired},
		{personalNumber: "199001010215", givenName: "Epost", surname: "Epostsson", flow: flowContactForm,
			contactDetails: []string{inputEmail}},
	}
	t := make(personaTable, len(rows))
	for _, p := range rows {
		if _, dup := t[p.personalNumber]; dup {
			panic(fmt.Sprintf("sandbox persona %s listed twice", p.personalNumber))
		}
		if p.flow == flowContactForm && len(p.contactDetails) == 0 {
			panic(fmt.Sprintf("sandbox persona %s has a contact form that asks for nothing", p.personalNumber))
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

// eidUser is the simulated person holding the phone for an order that asked for pn.
func (t personaTable) eidUser(pn string) eidsim.User {
	p := t.lookup(pn)
	who := pn
	if who == "" {
		who = defaultPersonalNumber
	}
	signer := p
	if p.signsAs != "" {
		who, signer = p.signsAs, t.lookup(p.signsAs)
	}
	return eidsim.User{PersonalNumber: who, GivenName: signer.givenName, Surname: signer.surname, Action: p.eidAction}
}
