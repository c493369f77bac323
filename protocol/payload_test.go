package protocol

import (
	"encoding/json"
	"testing"
)

func TestEncodePayload(t *testing.T) {
	tests := []struct {
		in   json.RawMessage
		want string
	}{
		{nil, "null"},
		{json.RawMessage{}, "null"},
		{raw(`null`), "null"},
		{raw(`{"b":1,  "a":[1.50,2e3]}`), `{"b":1,  "a":[1.50,2e3]}`},
		{raw(`"s"`), `"s"`},
	}
	for _, tt := range tests {
		got := EncodePayload(tt.in)
		if string(got) != tt.want {
			t.Errorf("EncodePayload(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if len(tt.in) > 0 && &got[0] == &tt.in[0] {
			t.Errorf("EncodePayload(%q) aliases its input", tt.in)
		}
	}
}

func TestDecodePayload(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"nil", nil, "null"},
		{"empty", []byte{}, "null"},
		{"null", []byte("null"), "null"},
		{"object kept byte for byte", []byte(`{"b":1,  "a":[1.50,2e3]}`), `{"b":1,  "a":[1.50,2e3]}`},
		{"whitespace kept", []byte(" 1 "), " 1 "},
		{"string", []byte(`"x"`), `"x"`},
		{"not JSON", []byte(`hello world`), `"hello world"`},
		{"only whitespace is not JSON", []byte("  "), `"  "`},
		{"not JSON with quotes and controls", []byte("a\"b\\c\n\x01"), `"a\"b\\c\n\u0001"`},
		{"truncated JSON", []byte(`{"a":`), `"{\"a\":"`},
		{"BOM dropped before JSON", []byte("\xEF\xBB\xBF{\"a\":1}"), `{"a":1}`},
		{"BOM dropped before text", []byte("\xEF\xBB\xBFabc"), `"abc"`},
		{"only one BOM dropped", []byte("\xEF\xBB\xBF\xEF\xBB\xBF1"), "\"\uFEFF1\""},
		{"invalid UTF-8 in text", []byte("a\xffb"), "\"a\uFFFDb\""},
		{"invalid UTF-8 inside JSON string", []byte("\"a\xffb\""), "\"a\uFFFDb\""},
		// WHATWG: a truncated sequence is one replacement, not one per byte.
		{"truncated 3-byte sequence", []byte("a\xE2\x82b"), "\"a\uFFFDb\""},
		{"two bad bytes", []byte("\xff\xfe"), "\"\uFFFD\uFFFD\""},
		{"surrogate bytes", []byte("\xED\xA0\x80"), "\"\uFFFD\uFFFD\uFFFD\""},
		{"overlong", []byte("\xC0\xAF"), "\"\uFFFD\uFFFD\""},
		{"truncated at end", []byte("x\xF0\x9F\x98"), "\"x\uFFFD\""},
		{"infinity becomes null", []byte(`{"a":1e400,"b":[-1e400,2],"c":"1e400"}`), `{"a":null,"b":[null,2],"c":"1e400"}`},
		{"infinity under __proto__ becomes null", []byte(`{"__proto__":1e400}`), `{"__proto__":null}`},
		{"underflow kept", []byte(`1e-400`), `1e-400`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecodePayload(tt.in)
			if string(got) != tt.want {
				t.Fatalf("DecodePayload(%q) = %q, want %q", tt.in, got, tt.want)
			}
			// Whatever comes back must be something a frame can carry.
			if err := checkPayload(got); err != nil {
				t.Fatalf("DecodePayload(%q) = %q, which a frame cannot carry: %v", tt.in, got, err)
			}
		})
	}
}

func TestPayloadCodecRoundTrip(t *testing.T) {
	for _, p := range []string{`null`, `{"b":1,  "a":[1.50,2e3]}`, `"\ud800"`, `[]`, `-0`} {
		if got := DecodePayload(EncodePayload(raw(p))); string(got) != p {
			t.Errorf("DecodePayload(EncodePayload(%q)) = %q", p, got)
		}
	}
	if got := DecodePayload(EncodePayload(nil)); string(got) != "null" {
		t.Errorf("nil payload round-trips to %q, want null", got)
	}
}
