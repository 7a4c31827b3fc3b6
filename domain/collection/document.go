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
	return Document{DocumentID: id, Kind: kind, ContentType: contentType, FileName: fileName,
		Size: len(content), SHA256: hex.EncodeToString(sum[:]), Personal: &DocumentContent{Content: content}}
}

func (d Document) validate() error {
	if d.DocumentID == "" || d.Kind == "" || d.ContentType == "" {
		return fmt.Errorf("document id, kind and content type are required: %w", domain.ErrInvalid)
	}
	if d.Personal == nil || len(d.Personal.Content) == 0 {
		return fmt.Errorf("document %s is empty: %w", d.DocumentID, domain.ErrInvalid)
	}
	if len(d.Personal.Content) > MaxPDFBytes {
		return fmt.Errorf("document %s is larger than %d bytes: %w", d.DocumentID, MaxPDFBytes, domain.ErrInvalid)
	}
	sum := sha256.Sum256(d.Personal.Content)
	if d.Size != len(d.Personal.Content) || d.SHA256 != hex.EncodeToString(sum[:]) {
		return fmt.Errorf("document %s size or digest does not match its content: %w", d.DocumentID, domain.ErrInvalid)
	}
	return nil
}

// LooksLikePDF is a cheap check of the magic number; parsing is the company's job.
func LooksLikePDF(content []byte) bool { return bytes.HasPrefix(content, []byte("%PDF-")) }
