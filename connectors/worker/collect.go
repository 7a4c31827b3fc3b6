package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/platform/retry"
)

// recordable tells the data products a collection of a product keeps. Personal information of
// an insurance company has no place in insurance data; it only serves the person check.
func recordable(p collection.Product, d DataProduct) bool {
	switch p {
	case collection.ProductInsurance:
		return d == ProductInsurances || d == ProductGroupInsurances
	case collection.ProductWealth:
		switch d {
		case ProductPensions, ProductInvestments, ProductAccounts, ProductCards, ProductLoans,
			ProductSavings, ProductPersonalInformation, ProductCareerStatement:
			return true
		}
	}
	return false
}

// collected is what the products of one session returned, before it is recorded.
type collected struct {
	insurances  []collection.Insurance
	holderNames map[string]string
	wealth      collection.WealthData
	documents   []collection.Document
	fetched     map[DataProduct]bool
	timedOut    []DataProduct
	// refused are the PSD2 products left unread because the bank refused the consent (revoked
	// or expired meanwhile): the collection is partial, as after a timeout.
	refused []DataProduct
}

// readPSD2 notes that a PSD2 product was read under grant: the consent scope values it covers
// (those the grant names) go on the wealth data, so that readers tell a list read and found
// empty from one never read.
func (g *collected) readPSD2(p DataProduct, grant PSD2Grant) {
	for _, s := range grant.Scope {
		if slices.Contains(PSD2Products([]consent.Scope{s}), p) && !slices.Contains(g.wealth.PSD2Read, s) {
			g.wealth.PSD2Read = append(g.wealth.PSD2Read, s)
		}
	}
}

// add keeps one product's data. A record a company lists twice (in two products) is kept once:
// the domain refuses repeated ids, and a harmless overlap must not fail the collection.
func (g *collected) add(collectionID string, d ProductData) {
	for _, ins := range d.Insurances {
		if slices.ContainsFunc(g.insurances, func(x collection.Insurance) bool { return x.ID == ins.ID }) {
			continue
		}
		g.insurances = append(g.insurances, ins)
		if name, ok := d.HolderNames[ins.ID]; ok {
			if g.holderNames == nil {
				g.holderNames = map[string]string{}
			}
			g.holderNames[ins.ID] = name
		}
	}
	for _, p := range d.Pensions {
		if !slices.ContainsFunc(g.wealth.Pensions, func(x collection.CompanyPension) bool { return x.ID == p.ID }) {
			g.wealth.Pensions = append(g.wealth.Pensions, p)
		}
	}
	g.wealth.Investments = append(g.wealth.Investments, d.Investments...)
	g.wealth.Loans = append(g.wealth.Loans, d.Loans...)
	g.wealth.Savings = append(g.wealth.Savings, d.Savings...)
	g.wealth.CheckingAccounts = append(g.wealth.CheckingAccounts, d.CheckingAccounts...)
	g.wealth.SavingsAccounts = append(g.wealth.SavingsAccounts, d.SavingsAccounts...)
	g.wealth.CreditCards = append(g.wealth.CreditCards, d.CreditCards...)
	if d.PersonalInformation != nil {
		g.wealth.PersonalInformation = d.PersonalInformation
	}
	if doc := d.CareerStatement; doc != nil && len(doc.Content) > 0 {
		ct := doc.ContentType
		if ct == "" {
			ct = "application/pdf"
		}
		g.documents = append(g.documents, collection.NewDocument(documentID(collectionID, d.Product),
			collection.DocumentFrenchCareerStatement, ct, doc.FileName, doc.Content))
	}
}

// documentID names a collected document after its collection and product, so that a retried
// append records the same document rather than a second one.
func documentID(collectionID string, p DataProduct) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("samla:collection:"+collectionID+":"+string(p))).String()
}

func (g *collected) wealthRecords() int {
	w := g.wealth
	return len(w.Pensions) + len(w.Investments) + len(w.Loans) + len(w.Savings) +
		len(w.CheckingAccounts) + len(w.SavingsAccounts) + len(w.CreditCards)
}

// records counts the financial records (personal information not included).
func (g *collected) records() int {
	return len(g.insurances) + g.wealthRecords() + len(g.documents)
}

// collect applies the person check (unless nobody authenticated, as with PDF_UPLOAD), then
// reads every product of the authenticated session that the collection keeps, in the
// company's order, and ends the collection. A product that times out is left out and the
// collection ends COMPLETED_PARTIAL; any other company failure ends it THIRD_PARTY_ERROR,
// since a collection that silently lacks a product would claim to be complete.
func (s *session) collect(ctx context.Context, c *collection.Collection, companyID string, cs CompanySession, checkPerson bool) error {
	g := &collected{fetched: map[DataProduct]bool{}}
	// The person check compares with the personal number the collection was loaded with; once
	// the user is erased there is none, and no data may be read for them.
	if err := s.refuseErased(ctx); err != nil {
		return err
	}
	if checkPerson {
		ended, err := s.checkPerson(ctx, c, companyID, cs, g)
		if ended || err != nil {
			return err
		}
	}
	c, err := s.advance(ctx, c, collection.StatusCollecting)
	if err != nil {
		return err
	}
	for _, p := range cs.Products {
		if !recordable(c.Product(), p) || g.fetched[p] {
			continue
		}
		if _, err := s.fetch(ctx, c, companyID, cs, p, g); err != nil {
			return s.companyFailed(ctx, err)
		}
	}
	if err := s.collectPSD2(ctx, c, companyID, g); err != nil {
		return err
	}
	return s.complete(ctx, g)
}

// collectPSD2 reads the PSD2 products of a company with consents, only under the collection's
// grant and only those its scope names: without a grant they stay unread, unknown rather than
// empty, and the collection completes with the rest. A consent revoked or expired while the
// collection runs, as Samla's consent shows it (asked again before each product) or as the bank
// refuses it, stops the PSD2 part there; what was read before is kept and the collection ends
// partial.
func (s *session) collectPSD2(ctx context.Context, c *collection.Collection, companyID string, g *collected) error {
	if !s.psd2 || c.Product() != collection.ProductWealth {
		return nil
	}
	if s.w.cfg.Consents == nil {
		s.log.Debug("no consents configured; PSD2 products left unread")
		return nil
	}
	grant, ok, err := s.w.cfg.Consents.PSD2Grant(ctx, c)
	if errors.Is(err, ErrConsentNotUsable) {
		s.log.Info("the collection's consent ended before its PSD2 part; the PSD2 part is skipped", "error", err)
		g.refused = append(g.refused, refusedProducts(grant)...)
		return nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Nothing is wrong with the collection: a later sweep tries again.
		return &storeError{fmt.Errorf("read the collection's consent: %w", err)}
	}
	if !ok {
		s.log.Debug("no consent; PSD2 products left unread")
		return nil
	}
	products := PSD2Products(grant.Scope)
	for i, p := range products {
		if i > 0 {
			// A revocation in Samla stops the reads at once, even before the bank hears of it.
			if _, _, err := s.w.cfg.Consents.PSD2Grant(ctx, c); errors.Is(err, ErrConsentNotUsable) {
				s.log.Info("the collection's consent ended; the PSD2 part stops", "product", p, "error", err)
				g.refused = append(g.refused, products[i:]...)
				return nil
			} else if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			// Another error reading the consent leaves the question to the bank, which refuses
			// a consent that ended.
		}
		d, err := s.w.cfg.AccountInformation.FetchPSD2(ctx, companyID, grant, p)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrConsentNotUsable):
			s.log.Info("the bank refuses the consent; the PSD2 part stops", "product", p, "error", err)
			g.refused = append(g.refused, products[i:]...)
			return nil
		case errors.Is(err, ErrProductTimeout):
			s.log.Warn("data product timed out; the collection will be partial", "product", p)
			g.timedOut = append(g.timedOut, p)
			continue
		case err != nil:
			return s.companyFailed(ctx, fmt.Errorf("read %s: %w", p, err))
		}
		d.Product = p
		g.add(c.ID(), d)
		g.readPSD2(p, grant)
	}
	return nil
}

// refusedProducts are the PSD2 products a grant that can no longer be used leaves unread: those
// of its scope, or all of them when the grant says no scope.
func refusedProducts(grant PSD2Grant) []DataProduct {
	if len(grant.Scope) == 0 {
		return PSD2Products(consent.AllScopes())
	}
	return PSD2Products(grant.Scope)
}

// fetch reads one product, keeping it in g when the collection records it. A timeout of a
// recorded product is noted in g (the collection will be partial), not returned.
func (s *session) fetch(ctx context.Context, c *collection.Collection, companyID string, cs CompanySession, p DataProduct, g *collected) (ProductData, error) {
	g.fetched[p] = true
	d, err := s.w.cfg.Companies.FetchProduct(ctx, companyID, cs, p)
	switch {
	case errors.Is(err, ErrProductTimeout) && ctx.Err() == nil:
		if recordable(c.Product(), p) {
			s.log.Warn("data product timed out; the collection will be partial", "product", p)
			g.timedOut = append(g.timedOut, p)
		}
		return ProductData{}, nil
	case err != nil:
		return ProductData{}, fmt.Errorf("read %s: %w", p, err)
	}
	d.Product = p
	if recordable(c.Product(), p) {
		g.add(c.ID(), d)
	}
	return d, nil
}

// checkPerson applies the spec's AUTHENTICATION_MISMATCH rules before any data is collected:
// the personal number verified in the EID flow (rule a), else the one the company reports for
// the session or, when it reports none there, in its personal information (rule b); a
// difference ends the collection (rule c); without any, nothing can be verified (rule d).
// ended reports that the collection ended here.
func (s *session) checkPerson(ctx context.Context, c *collection.Collection, companyID string, cs CompanySession, g *collected) (bool, error) {
	requested := c.Person().PersonalNumber
	var verified string
	if cs.EIDCompletion != nil {
		verified = s.normalize(cs.EIDCompletion.PersonalNumber)
	}
	reported := s.normalize(cs.AuthenticatedPersonalNumber)
	if requested != "" && verified == "" && reported == "" && slices.Contains(cs.Products, ProductPersonalInformation) {
		d, err := s.fetch(ctx, c, companyID, cs, ProductPersonalInformation, g)
		if err != nil {
			return true, s.companyFailed(ctx, err)
		}
		if pi := d.PersonalInformation; pi != nil && pi.PersonalNumber != nil {
			reported = s.normalize(*pi.PersonalNumber)
		}
	}
	switch collection.CheckAuthenticatedPerson(requested, verified, reported) {
	case collection.PersonMismatch:
		source := "company"
		if verified != "" {
			source = "eid"
		}
		// Which numbers differ is personal data; the log says only where the other one came from.
		return true, s.finish(ctx, collection.StatusAuthenticationMismatch, fmt.Errorf("another person authenticated (%s)", source))
	case collection.PersonUnverifiable:
		s.log.Debug("the authenticated person cannot be verified")
	}
	return false, nil
}

// normalize brings a personal number to the 12 digits the collection stores; what does not
// parse is compared as it is (and so differs).
func (s *session) normalize(pn string) string {
	if pn == "" {
		return ""
	}
	if n, err := personnummer.Parse(pn, s.w.now()); err == nil {
		return n.String()
	}
	return pn
}

// complete records the data and the final status in one append, so that a collection is never
// final without its data nor left COLLECTING with data recorded.
func (s *session) complete(ctx context.Context, g *collected) error {
	final := collection.StatusCompleted
	switch {
	case len(g.timedOut) > 0 || len(g.refused) > 0:
		final = collection.StatusCompletedPartial
	case g.records() == 0:
		final = collection.StatusCompletedEmpty
	}
	c, err := s.mutate(ctx, true, func(c *collection.Collection) error {
		now := s.w.now()
		switch c.Product() {
		case collection.ProductInsurance:
			if len(g.insurances) > 0 {
				if err := c.RecordInsurances(g.insurances, g.holderNames, now); err != nil {
					return err
				}
			}
		case collection.ProductWealth:
			// Recorded even when nothing was found: the event names the PSD2 products read, so
			// that a reader tells those found empty from those never read (unknown).
			if err := c.RecordWealth(g.wealth, now); err != nil {
				return err
			}
			for _, doc := range g.documents {
				if err := c.RecordDocument(doc, now); err != nil {
					return err
				}
			}
		}
		// Recording data does not move the status: the collection is still COLLECTING here.
		return c.ChangeStatusWith(final, collection.StatusDetails{}, now)
	})
	if err != nil {
		return err
	}
	if len(g.timedOut) > 0 {
		s.log.Info("products left out after timeouts", "products", g.timedOut)
	}
	if len(g.refused) > 0 {
		s.log.Info("PSD2 products left out: the bank refused the consent", "products", g.refused)
	}
	s.ended(c.Status(), g.records())
	return nil
}

// drivePDF runs a PDF_UPLOAD collection: the company reads the uploaded letter while the
// collection is COLLECTING, then the parsed insurance (or pension) is recorded, or the
// company's verdict ends it FAILED_PDF_PARSE or FAILED_PDF_USER_INPUT. Nobody authenticates,
// so there is no person to check.
func (s *session) drivePDF(ctx context.Context, c *collection.Collection, companyID string) error {
	doc := uploadedPDF(c)
	if doc == nil {
		return s.finish(ctx, collection.StatusFailedPDFUserInput, errors.New("PDF_UPLOAD collection without an uploaded PDF"))
	}
	c, err := s.advance(ctx, c, collection.StatusCollecting)
	if err != nil {
		return err
	}
	cs, err := s.w.cfg.Companies.StartLogin(ctx, companyID, LoginRequest{
		PersonalNumber: c.Person().PersonalNumber, LoginMethod: c.LoginMethod(), Reference: c.ID(),
		IdempotencyKey: fmt.Sprintf("%s/%d", c.ID(), c.Version()),
		Document:       &Document{FileName: doc.Personal.FileName, ContentType: doc.ContentType, Content: doc.Personal.Content},
	})
	if err != nil {
		return s.companyFailed(ctx, err)
	}
	defer s.endCompanySession(ctx, companyID, &cs)
	for cs.State != LoginAuthenticated {
		switch {
		case cs.State == LoginFailed:
			return s.finish(ctx, cs.Outcome, fmt.Errorf("the company did not read the document (%s)", cs.FailureReason))
		case needsClient(cs.State) || cs.State == LoginAwaitingUser:
			return s.finish(ctx, collection.StatusFailed, fmt.Errorf("a PDF upload session asks for a login (%s)", cs.State))
		}
		// Still reading: the company answers when it is done.
		if err := retry.Sleep(ctx, s.w.cfg.PollInterval); err != nil {
			return err
		}
		if c, err = s.renewClaim(ctx, c); err != nil {
			return err
		}
		if s.pastDeadline(c) {
			return s.finish(ctx, collection.StatusFailed, errors.New("session deadline passed while the company read the document"))
		}
		next, err := s.w.cfg.Companies.PollLogin(ctx, companyID, cs)
		if err != nil {
			return s.companyFailed(ctx, err)
		}
		cs = next
	}
	return s.collect(ctx, c, companyID, cs, false)
}

// uploadedPDF is the letter the client uploaded, nil when there is none (or its content was
// erased).
func uploadedPDF(c *collection.Collection) *collection.Document {
	docs := c.Documents()
	for i := len(docs) - 1; i >= 0; i-- {
		d := docs[i]
		if d.Kind == collection.DocumentUploadedPDF && d.Personal != nil && len(d.Personal.Content) > 0 {
			return &d
		}
	}
	return nil
}
