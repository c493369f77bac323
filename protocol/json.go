package protocol

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a strict JSON reader that behaves like JavaScript's JSON.parse
// followed by zod's z.json(), which is what the reference does to a frame:
//
//   - the grammar is RFC 8259 exactly (JSON.parse allows nothing more: no BOM,
//     comments, trailing commas, single quotes, NaN or Infinity);
//   - a duplicated key keeps its last value;
//   - every value keeps its exact bytes, so a payload can be relayed without
//     being re-encoded;
//   - each value knows whether z.json() would accept it: JSON.parse turns an
//     out-of-range number such as 1e400 into Infinity and z.number() refuses
//     that, but only the numbers z.json() looks at count (the last value of a
//     duplicated key, and not the value of a "__proto__" key, which zod's
//     z.record skips).

type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// String names a kind the way a refusal reason does.
func (k kind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "boolean"
	case kindNumber:
		return "number"
	case kindString:
		return "string"
	case kindArray:
		return "array"
	default:
		return "object"
	}
}

// value is one parsed JSON value. Containers near the root (see buildDepth)
// keep their children; deeper ones keep only their bytes and verdict, since
// nothing in the schema looks inside them.
type value struct {
	kind kind
	raw  []byte // the value's exact bytes, a subslice of the input

	str string  // kindString within buildDepth: the decoded string
	num float64 // kindNumber: the value JSON.parse would produce

	members []member // kindObject within buildDepth, in source order
	elems   []*value // kindArray within buildDepth

	// bad is the first number literal that makes z.json() refuse this value
	// (nil when it would accept it).
	bad []byte
}

type member struct {
	key string
	val *value
}

// field returns the value JSON.parse would keep for key: the last one.
func (v *value) field(key string) *value {
	for i := len(v.members) - 1; i >= 0; i-- {
		if v.members[i].key == key {
			return v.members[i].val
		}
	}
	return nil
}

// buildDepth is how deep children are kept. The deepest thing the schema
// reads is the string "id" inside an item of "failed" inside the frame:
// root (0) → array (1) → object (2) → string (3).
const buildDepth = 3

// maxDepth bounds nesting so a huge adversarial input cannot exhaust the
// goroutine stack. A frame within MaxFrameBytes nests at most 32,768 deep
// (each level costs at least two bytes), so no frame that can reach a
// listener is refused by this bound.
const maxDepth = 1 << 17

var (
	errSyntax  = errors.New("not valid JSON")
	errUTF8    = errors.New("not valid UTF-8")
	errTooDeep = errors.New("nested too deeply")
)

// parseJSON reads data as exactly one JSON value with optional surrounding
// whitespace.
func parseJSON(data []byte) (*value, error) {
	// JSON.parse takes a string, and a WebSocket text frame must be UTF-8, so
	// the reference never sees invalid UTF-8; refuse it here rather than
	// guess what a decoder would have made of it.
	if !utf8.Valid(data) {
		return nil, errUTF8
	}
	p := parser{data: data}
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, errSyntax
	}
	return v, nil
}

type parser struct {
	data []byte
	pos  int
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (*value, error) {
	if p.pos >= len(p.data) {
		return nil, errSyntax
	}
	start := p.pos
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		end, escaped, err := scanString(p.data, p.pos)
		if err != nil {
			return nil, err
		}
		p.pos = end
		v := &value{kind: kindString, raw: p.data[start:end]}
		if depth <= buildDepth {
			v.str = decodeString(v.raw, escaped)
		}
		return v, nil
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true", kindBool)
	case c == 'f':
		return p.literal("false", kindBool)
	case c == 'n':
		return p.literal("null", kindNull)
	default:
		return nil, errSyntax
	}
}

func (p *parser) literal(word string, k kind) (*value, error) {
	end := p.pos + len(word)
	if end > len(p.data) || string(p.data[p.pos:end]) != word {
		return nil, errSyntax
	}
	v := &value{kind: k, raw: p.data[p.pos:end]}
	p.pos = end
	return v, nil
}

func (p *parser) number() (*value, error) {
	d, start := p.data, p.pos
	i := start
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = skipDigits(d, i)
	default:
		return nil, errSyntax
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := skipDigits(d, i)
		if j == i {
			return nil, errSyntax
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := skipDigits(d, i)
		if j == i {
			return nil, errSyntax
		}
		i = j
	}
	raw := d[start:i]
	p.pos = i
	// The grammar above is stricter than ParseFloat's, so the only error left
	// is ErrRange. Overflow gives ±Inf, as JSON.parse does; underflow gives
	// 0 (or the nearest subnormal), also as JSON.parse does, and 0 is finite.
	f, _ := strconv.ParseFloat(string(raw), 64)
	v := &value{kind: kindNumber, raw: raw, num: f}
	if math.IsInf(f, 0) {
		v.bad = raw
	}
	return v, nil
}

func skipDigits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

func (p *parser) array(depth int) (*value, error) {
	if depth >= maxDepth {
		return nil, errTooDeep
	}
	start := p.pos
	p.pos++ // [
	v := &value{kind: kindArray}
	build := depth < buildDepth
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		v.raw = p.data[start:p.pos]
		if build {
			v.elems = []*value{}
		}
		return v, nil
	}
	for {
		p.skipSpace()
		e, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		// z.array(z.json()) checks every element.
		if v.bad == nil {
			v.bad = e.bad
		}
		if build {
			v.elems = append(v.elems, e)
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, errSyntax
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			v.raw = p.data[start:p.pos]
			return v, nil
		default:
			return nil, errSyntax
		}
	}
}

func (p *parser) object(depth int) (*value, error) {
	if depth >= maxDepth {
		return nil, errTooDeep
	}
	start := p.pos
	p.pos++ // {
	v := &value{kind: kindObject}
	build := depth < buildDepth
	// Members whose value z.json() would refuse, if the key turns out to be
	// the one JSON.parse keeps. Rare, so the common case allocates nothing.
	type suspect struct {
		index int // into keys
		bad   []byte
	}
	var suspects []suspect
	var keys []keyRef // every key, in source order
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		v.raw = p.data[start:p.pos]
		return v, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, errSyntax
		}
		keyStart := p.pos
		keyEnd, escaped, err := scanString(p.data, p.pos)
		if err != nil {
			return nil, err
		}
		p.pos = keyEnd
		keyRaw := p.data[keyStart:keyEnd]
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, errSyntax
		}
		p.pos++
		p.skipSpace()
		e, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if build {
			v.members = append(v.members, member{key: decodeString(keyRaw, escaped), val: e})
		}
		if e.bad != nil {
			suspects = append(suspects, suspect{index: len(keys), bad: e.bad})
		}
		keys = append(keys, keyRef{raw: keyRaw, escaped: escaped})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, errSyntax
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			continue
		case '}':
			p.pos++
		default:
			return nil, errSyntax
		}
		break
	}
	v.raw = p.data[start:p.pos]
	if len(suspects) == 0 {
		return v, nil
	}
	// A suspect counts only if its key is not __proto__ (z.record skips that
	// key) and no later member repeats its key (JSON.parse keeps the last).
	last := make(map[string]int, len(keys))
	for i, k := range keys {
		last[decodeString(k.raw, k.escaped)] = i
	}
	for _, s := range suspects {
		k := keys[s.index]
		key := decodeString(k.raw, k.escaped)
		if key != "__proto__" && last[key] == s.index {
			v.bad = s.bad
			break
		}
	}
	return v, nil
}

type keyRef struct {
	raw     []byte
	escaped bool
}

// scanString checks the JSON string starting at data[start] (a quote) and
// returns the index just past its closing quote and whether it holds any
// escape. The caller has already checked that data is valid UTF-8, so only
// ASCII needs looking at.
func scanString(data []byte, start int) (end int, escaped bool, err error) {
	i := start + 1
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			return i + 1, escaped, nil
		case c < 0x20:
			// JSON.parse refuses raw control characters inside strings.
			return 0, false, errSyntax
		case c == '\\':
			escaped = true
			if i+1 >= len(data) {
				return 0, false, errSyntax
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) {
					return 0, false, errSyntax
				}
				for _, h := range data[i+2 : i+6] {
					if unhex(h) < 0 {
						return 0, false, errSyntax
					}
				}
				i += 6
			default:
				return 0, false, errSyntax
			}
		default:
			i++
		}
	}
	return 0, false, errSyntax
}

func unhex(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// decodeString returns the Go string for a scanned JSON string (quotes
// included in raw). JSON.parse accepts lone surrogate escapes such as
// "\ud800"; a Go string cannot hold one, so it becomes U+FFFD, as
// encoding/json does. No schema key or literal contains one, so the
// substitution never changes a verdict.
func decodeString(raw []byte, escaped bool) string {
	body := raw[1 : len(raw)-1]
	if !escaped {
		return string(body)
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch body[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(body[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if r < 0xDC00 && i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
					if r2 := hex4(body[i+2:]); 0xDC00 <= r2 && r2 <= 0xDFFF {
						out = utf8.AppendRune(out, utf16.DecodeRune(r, r2))
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, body[i+1])
		}
		i += 2
	}
	return string(out)
}

func hex4(b []byte) rune {
	return unhex(b[0])<<12 | unhex(b[1])<<8 | unhex(b[2])<<4 | unhex(b[3])
}

// appendString appends s as a JSON string the way JSON.stringify writes one:
// the two mandatory escapes, the short forms for \b \f \n \r \t, \u00xx for
// other control characters, and everything else as is. Invalid UTF-8 becomes
// U+FFFD so the output is always valid JSON.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, "\uFFFD"...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c < 0x20 {
				const hexdigits = "0123456789abcdef"
				b = append(b, '\\', 'u', '0', '0', hexdigits[c>>4], hexdigits[c&0xF])
			} else {
				b = append(b, c)
			}
		}
		i++
	}
	return append(b, '"')
}
