package collection

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/samla/samla/domain"
)

// MaxPDFBytes bounds an uploaded or collected document (10 MiB decoded, as API.md says).
const MaxPDFBytes = 10 << 20

// NewDocument describes content of a kind, computing its size and digest.
func NewDocument(id, kind, contentType, fileName string, content []byte) Document {
	sum := sha256.Sum256(content)
	return Document{DocumentID: id, Kind: kind, ContentType: contentType, Size: len(content),
		Personal: &DocumentContent{FileName: fileName, SHA256: hex.EncodeToString(sum[:]), Content: content}}
}

// validate checks the document's description against its content; field names the document in
// the *domain.FieldError it returns.
func (d Document) validate(field string) error {
	invalid := func(reason string) error { return &domain.FieldError{Field: field, Reason: reason} }
	switch {
	case d.DocumentID == "" || d.Kind == "" || d.ContentType == "":
		return invalid("must have an id, a kind and a content type")
	case d.Personal == nil || len(d.Personal.Content) == 0:
		return invalid("must not be empty")
	case len(d.Personal.Content) > MaxPDFBytes:
		return invalid(fmt.Sprintf("must have at most %d bytes", MaxPDFBytes))
	}
	sum := sha256.Sum256(d.Personal.Content)
	if d.Size != len(d.Personal.Content) || d.Personal.SHA256 != hex.EncodeToString(sum[:]) {
		return invalid("must have the size and digest of its content")
	}
	return nil
}

// LooksLikePDF is a cheap check of the magic number; parsing is the company's job.
func LooksLikePDF(content []byte) bool { return bytes.HasPrefix(content, []byte("%PDF-")) }
