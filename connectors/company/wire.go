package company

import "time"

// Wire format of the demo companies' API (connectors/sandbox). Pointers are values the company
// may not know.
type (
	wireLoginRequest struct {
		PersonalNumber string `json:"personalNumber,omitempty"`
		LoginMethod    string `json:"loginMethod"`
		Reference      string `json:"reference,omitempty"`
	}
	wireSession struct {
		SessionID     string `json:"sessionId"`
		State         string `json:"state"`
		FailureReason string `json:"failureReason"`
		Message       string `json:"message"`
		EIDOrder      *struct {
			OrderRef       string    `json:"orderRef"`
			AutoStartToken string    `json:"autoStartToken"`
			QRStartToken   string    `json:"qrStartToken"`
			QRStartSecret  string    `json:"qrStartSecret"`
			StartedAt      time.Time `json:"startedAt"`
			ExpiresAt      time.Time `json:"expiresAt"`
			Status         string    `json:"status"`
			HintCode       string    `json:"hintCode"`
			CompletionData *struct {
				User struct {
					PersonalNumber string `json:"personalNumber"`
					Name           string `json:"name"`
				} `json:"user"`
			} `json:"completionData"`
		} `json:"eidOrder"`
		Instructions []struct {
			RequestID string            `json:"requestId"`
			Method    string            `json:"method"`
			URL       string            `json:"url"`
			Headers   map[string]string `json:"headers"`
			Body      *string           `json:"body"`
		} `json:"instructions"`
		TwoFactor *struct {
			Methods []string `json:"methods"`
			Method  string   `json:"method"`
		} `json:"twoFactor"`
		RequiredInputs []string `json:"requiredInputs"`
		Customer       *struct {
			PersonalNumber string `json:"personalNumber"`
		} `json:"customer"`
		AccessToken string   `json:"accessToken"`
		Products    []string `json:"products"`
	}
	wireError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Errors  []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	wireInput struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	}
	wireClientResponse struct {
		RequestID string            `json:"requestId"`
		Status    int               `json:"status"`
		Headers   map[string]string `json:"headers"`
		Body      string            `json:"body"`
	}
	wireMoney struct {
		Amount   *float64 `json:"amount"`
		Currency string   `json:"currency"`
	}
	wireInsurance struct {
		ID           string  `json:"id"`
		Product      string  `json:"product"`
		Name         *string `json:"name"`
		PolicyNumber *string `json:"policyNumber"`
		Premium      *struct {
			Amount    *float64 `json:"amount"`
			Currency  string   `json:"currency"`
			Frequency *string  `json:"frequency"`
		} `json:"premium"`
		RenewalDate  *string `json:"renewalDate"`
		StartDate    *string `json:"startDate"`
		PolicyHolder *struct {
			Name string `json:"name"`
		} `json:"policyHolder"`
	}
	wirePension struct {
		ID                 string     `json:"id"`
		Name               *string    `json:"name"`
		PensionType        *string    `json:"pensionType"`
		PolicyNumber       *string    `json:"policyNumber"`
		InsuredPersonName  *string    `json:"insuredPersonName"`
		OtherInsuredPerson *bool      `json:"otherInsuredPerson"`
		Value              *wireMoney `json:"value"`
		MonthlyPayout      *wireMoney `json:"monthlyPayout"`
		PayoutStartDate    *string    `json:"payoutStartDate"`
	}
	wireInvestment struct {
		ID            string     `json:"id"`
		Name          *string    `json:"name"`
		AccountType   *string    `json:"accountType"`
		AccountNumber *string    `json:"accountNumber"`
		Value         *wireMoney `json:"value"`
		Holdings      []struct {
			Name     string     `json:"name"`
			ISIN     *string    `json:"isin"`
			Quantity *float64   `json:"quantity"`
			Value    *wireMoney `json:"value"`
		} `json:"holdings"`
	}
	wirePSD2Amount struct {
		Amount   string `json:"amount"`
		Currency string `json:"currency"`
	}
	wirePSD2Balance struct {
		BalanceType   string         `json:"balanceType"`
		BalanceAmount wirePSD2Amount `json:"balanceAmount"`
	}
	wireAccount struct {
		ResourceID      string            `json:"resourceId"`
		Name            *string           `json:"name"`
		Product         *string           `json:"product"`
		CashAccountType string            `json:"cashAccountType"`
		IBAN            *string           `json:"iban"`
		BBAN            *string           `json:"bban"`
		Currency        string            `json:"currency"`
		Balances        []wirePSD2Balance `json:"balances"`
	}
	wireCard struct {
		ResourceID  string            `json:"resourceId"`
		MaskedPan   *string           `json:"maskedPan"`
		Name        *string           `json:"name"`
		Product     *string           `json:"product"`
		Currency    string            `json:"currency"`
		CreditLimit *wirePSD2Amount   `json:"creditLimit"`
		Balances    []wirePSD2Balance `json:"balances"`
	}
	wireLoan struct {
		ID             string     `json:"id"`
		Name           *string    `json:"name"`
		LoanType       *string    `json:"loanType"`
		Outstanding    *wireMoney `json:"outstanding"`
		InterestRate   *float64   `json:"interestRate"`
		MonthlyPayment *wireMoney `json:"monthlyPayment"`
	}
	wireSaving struct {
		ID           string     `json:"id"`
		Name         *string    `json:"name"`
		Balance      *wireMoney `json:"balance"`
		InterestRate *float64   `json:"interestRate"`
	}
	wirePersonalInformation struct {
		PersonalNumber *string `json:"personalNumber"`
		Name           *string `json:"name"`
		FirstName      *string `json:"firstName"`
		LastName       *string `json:"lastName"`
		Address        *struct {
			Street     *string `json:"street"`
			PostalCode *string `json:"postalCode"`
			City       *string `json:"city"`
			Country    *string `json:"country"`
		} `json:"address"`
		Email       *string `json:"email"`
		PhoneNumber *string `json:"phoneNumber"`
	}
	// wireProduct is every product's envelope; only the product's own key is set.
	wireProduct struct {
		Insurances          []wireInsurance          `json:"insurances"`
		Pensions            []wirePension            `json:"pensions"`
		Investments         []wireInvestment         `json:"investments"`
		Accounts            []wireAccount            `json:"accounts"`
		CardAccounts        []wireCard               `json:"cardAccounts"`
		Loans               []wireLoan               `json:"loans"`
		Savings             []wireSaving             `json:"savings"`
		PersonalInformation *wirePersonalInformation `json:"personalInformation"`
	}
)
