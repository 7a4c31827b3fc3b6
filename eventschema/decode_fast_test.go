package eventschema

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// FuzzDecodeFast checks the fast decoding against the reference one (decodeStd) on arbitrary
// payloads of every type: whatever decodeFast accepts, decodeStd accepts too and decodes to the
// same value, so that Decode's results do not depend on which of them took a payload.
func FuzzDecodeFast(f *testing.F) {
	reg, err := NewRegistry()
	if err != nil {
		f.Fatal(err)
	}
	files, err := filepath.Glob("testdata/examples/*.json")
	if err != nil || len(files) == 0 {
		f.Fatalf("no stored examples: %v", err)
	}
	name := regexp.MustCompile(`^(.+)\.v(\d+)(\..+)?$`)
	for _, file := range files {
		m := name.FindStringSubmatch(strings.TrimSuffix(filepath.Base(file), ".json"))
		if m == nil {
			f.Fatalf("%s: name is not <type>.v<version>[.<variant>].json", file)
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		version, _ := strconv.Atoi(m[2])
		if up, err := reg.Upcast(m[1], version, raw); err == nil {
			raw = up
		}
		f.Add(m[1], raw)
		// Where encoding/json is lenient, or differs from Unmarshal: duplicate and differently
		// cased names, invalid UTF-8, escapes, nulls, trailing input, numbers for strings.
		s := string(raw)
		f.Add(m[1], []byte(strings.Replace(s, `{"`, `{"a":1,"`, 1)))
		f.Add(m[1], []byte(s+` {}`))
		f.Add(m[1], []byte(s+`x`))
		f.Add(m[1], []byte(strings.ToUpper(s)))
		f.Add(m[1], []byte(strings.ReplaceAll(s, `":"`, `":null,"x":"`)))
		f.Add(m[1], []byte(strings.ReplaceAll(s, `":"`, "\":\"\xff\\u00e9\\ud800")))
		f.Add(m[1], []byte(strings.ReplaceAll(s, `":"`, `":1e3,"y":"`)))
	}
	f.Add("collection.started", []byte(`{"collectionId":"a","collectionid":"b","COLLECTIONID":"c"}`))
	f.Add("collection.started", []byte(`{"startedAt":"2024-02-30T25:00:00+01:00"}`))
	f.Add("collection.started", []byte(`{"startedAt":"2024-01-01T00:00:00.123456789+05:30"}`))
	f.Add("collection.started", []byte(`null`))
	f.Add("collection.started", []byte(` {"collectionId":"a"} `))
	f.Fuzz(func(t *testing.T, typ string, payload []byte) {
		et, ok := reg.types[typ]
		if !ok || len(payload) > 64<<10 {
			return
		}
		fast, ok := et.decode.fast(payload)
		if !ok {
			return
		}
		std, err := et.decode.std(payload)
		if err != nil {
			t.Fatalf("%s %q: fast decodes %#v, std fails: %v", typ, payload, fast, err)
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("%s %q: fast decodes\n%#v\nstd\n%#v", typ, payload, fast, std)
		}
	})
}

// FuzzUnmarshalSealed checks unmarshalSealed against json.Unmarshal of a sealed form, which it
// stands for.
func FuzzUnmarshalSealed(f *testing.F) {
	for _, s := range []string{
		`{"sealed":{"v":1,"subject":"user-1","keyId":"k1","nonce":"AAECAwQFBgcICQoL","ciphertext":"3q2+7w=="}}`,
		`{"sealed":{"v":1,"subject":"user-1","keyId":"k1","compression":"deflate","nonce":"AAECAwQFBgcICQoL","ciphertext":"3q2+7w=="}}`,
		`{"sealed":{"V":1,"Subject":"a","subject":"b","keyid":"k","nonce":"AAEC\r\nAwQF","ciphertext":null}}`,
		`{"sealed":null}`,
		`{"sealed":{"v":1.5}}`,
		`{"sealed":{"nonce":"AAE"}}`,
		`{"sealed":{"subject":"\xff\u00e9\ud800"}} x`,
		`{"sealed":{},"sealed":{"v":2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stored []byte) {
		got := unmarshalSealed(stored)
		var env sealedEnvelope
		if err := json.Unmarshal(stored, &env); err != nil {
			env.Sealed = nil
		}
		if !reflect.DeepEqual(got, env.Sealed) {
			t.Fatalf("%q: unmarshalSealed = %#v, json.Unmarshal = %#v", stored, got, env.Sealed)
		}
	})
}
