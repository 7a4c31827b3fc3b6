package sandbox_test

import (
	"reflect"
	"testing"

	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/domain/company/companytest"
)

// TestTheTestCatalogIsTheSandboxs: the write and read sides' tests use companytest's catalog so
// that they import no connector; it must stay the sandbox's, company for company.
func TestTheTestCatalogIsTheSandboxs(t *testing.T) {
	want, got := sandbox.Catalog().All(), companytest.Catalog().All()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("companytest's catalog\n%+v\ndiffers from the sandbox's\n%+v", got, want)
	}
}
