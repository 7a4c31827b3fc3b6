package eventhistory

import (
	"encoding/json"
	"testing"
)

func TestStripPersonal(t *testing.T) {
	tests := []struct {
		in, want string
		err      bool
	}{
		{in: `{"a":1,"personal":{"personalNumber":"199001010017"}}`, want: `{"a":1}`},
		{in: `{"a": 12345678901234567890, "b": {"personal": "nested stays"}}`, want: `{"a":12345678901234567890,"b":{"personal":"nested stays"}}`},
		{in: `{"personal":null}`, want: `{}`},
		{in: `{}`, want: `{}`},
		{in: `null`, err: true},
		{in: `[]`, err: true},
		{in: `"x"`, err: true},
		{in: `{`, err: true},
	}
	for _, tc := range tests {
		got, err := StripPersonal(json.RawMessage(tc.in))
		if tc.err {
			if err == nil {
				t.Errorf("StripPersonal(%s) = %s, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("StripPersonal(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}
