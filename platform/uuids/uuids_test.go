package uuids_test

import (
	"testing"

	"github.com/samla/samla/platform/uuids"
)

func TestCanonical(t *testing.T) {
	const id = "0190f4a2-1111-7b3a-9a51-2f1e3d4c5b6a"
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{id, id, true},
		{"0190F4A2-1111-7B3A-9A51-2F1E3D4C5B6A", id, true},
		{"0190f4A2-1111-7b3A-9a51-2F1e3d4c5b6a", id, true},
		{"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000", true},
		{"{" + id + "}", "", false},
		{"urn:uuid:" + id, "", false},
		{"0190f4a211117b3a9a512f1e3d4c5b6a", "", false},
		{"0190f4a2-1111-7b3a-9a51-2f1e3d4c5b6", "", false},
		{"0190f4a2-1111-7b3a-9a51-2f1e3d4c5b6g", "", false},
		{"0190f4a2_1111-7b3a-9a51-2f1e3d4c5b6a", "", false},
		{" 0190f4a2-1111-7b3a-9a51-2f1e3d4c5b6", "", false},
		{"", "", false},
	} {
		got, ok := uuids.Canonical(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Canonical(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	if !uuids.IsCanonical(id) || uuids.IsCanonical("0190F4A2-1111-7B3A-9A51-2F1E3D4C5B6A") || uuids.IsCanonical("x") {
		t.Error("IsCanonical")
	}
}
