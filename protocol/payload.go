package protocol

import (
	"encoding/json"
	"unicode/utf8"
)

// This file is the payload codec for a gRPC-style wire (manager ↔ worker),
// where a payload rides a bytes field as the UTF-8 of its JSON.

var jsonNull = []byte("null")

// EncodePayload returns the bytes a payload travels as: nil or empty (a job
// that sent nothing) becomes "null" so the bytes are always JSON; anything
// else is returned unchanged (as a copy), because payloads are relayed
// byte for byte and never re-encoded.
func EncodePayload(payload json.RawMessage) []byte {
	if len(payload) == 0 {
		return append([]byte(nil), jsonNull...)
	}
	return append([]byte(nil), payload...)
}

// DecodePayload is the inverse of EncodePayload, and always returns a payload
// a frame can carry (see JobFrame.Marshal):
//   - nil or empty bytes (the field unset) read as null;
//   - bytes that are JSON come back unchanged;
//   - bytes that are not JSON come back as a JSON string holding them as
//     text, so a foreign manager's opaque payload still reaches the job.
//
// Like the reference, which decodes with TextDecoder and then JSON.parse, a
// leading UTF-8 byte order mark is dropped and invalid UTF-8 is replaced with
// U+FFFD the way TextDecoder replaces it. A number too large for a float64
// (1e400) is JSON to JSON.parse, which makes it Infinity, and the reference
// then sends it to the job through JSON.stringify, which writes null; so such
// a number comes back as null.
func DecodePayload(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage(append([]byte(nil), jsonNull...))
	}
	text := decodeUTF8Text(b)
	v, err := parseJSON(text)
	if err != nil {
		return appendString(nil, string(text))
	}
	if v.bad == nil && !hasInfinity(v) {
		return append(json.RawMessage(nil), text...)
	}
	return nullInfinities(text)
}

// hasInfinity reports whether any number in v overflows a float64, including
// the ones z.json() ignores (which v.bad does not report): JSON.stringify
// rewrites them all.
func hasInfinity(v *value) bool {
	p := parser{data: v.raw}
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			end, _, _ := scanString(p.data, p.pos)
			p.pos = end
		case c == '-' || ('0' <= c && c <= '9'):
			n, _ := p.number()
			if n.bad != nil {
				return true
			}
		default:
			p.pos++
		}
	}
	return false
}

// nullInfinities returns text (valid JSON) with every number literal that
// overflows a float64 replaced by null.
func nullInfinities(text []byte) json.RawMessage {
	out := make([]byte, 0, len(text))
	p := parser{data: text}
	for p.pos < len(p.data) {
		start := p.pos
		c := p.data[p.pos]
		switch {
		case c == '"':
			end, _, _ := scanString(p.data, p.pos)
			p.pos = end
			out = append(out, p.data[start:end]...)
		case c == '-' || ('0' <= c && c <= '9'):
			n, _ := p.number()
			if n.bad != nil {
				out = append(out, jsonNull...)
			} else {
				out = append(out, n.raw...)
			}
		default:
			out = append(out, c)
			p.pos++
		}
	}
	return out
}

// decodeUTF8Text does what TextDecoder("utf-8").decode does to bytes: drop one
// leading byte order mark and replace each maximal invalid subsequence with
// U+FFFD (the WHATWG Encoding Standard's UTF-8 decoder, which is not the same
// as Go's one-replacement-per-bad-byte range loop).
func decodeUTF8Text(b []byte) []byte {
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		b = b[3:]
	}
	if utf8.Valid(b) {
		return b
	}
	const replacement = "\uFFFD"
	out := make([]byte, 0, len(b)+8)
	var (
		needed, seen int
		lower, upper byte = 0x80, 0xBF
		start        int  // index of the sequence's lead byte
	)
	for i := 0; i < len(b); i++ {
		c := b[i]
		if needed == 0 {
			switch {
			case c <= 0x7F:
				out = append(out, c)
			case 0xC2 <= c && c <= 0xDF:
				needed, start = 1, i
			case 0xE0 <= c && c <= 0xEF:
				if c == 0xE0 {
					lower = 0xA0
				} else if c == 0xED {
					upper = 0x9F
				}
				needed, start = 2, i
			case 0xF0 <= c && c <= 0xF4:
				if c == 0xF0 {
					lower = 0x90
				} else if c == 0xF4 {
					upper = 0x8F
				}
				needed, start = 3, i
			default:
				out = append(out, replacement...)
			}
			continue
		}
		if c < lower || c > upper {
			// The sequence so far is one maximal invalid subpart; c starts
			// afresh.
			needed, seen, lower, upper = 0, 0, 0x80, 0xBF
			out = append(out, replacement...)
			i--
			continue
		}
		lower, upper = 0x80, 0xBF
		seen++
		if seen == needed {
			out = append(out, b[start:i+1]...)
			needed, seen = 0, 0
		}
	}
	if needed != 0 {
		out = append(out, replacement...)
	}
	return out
}
