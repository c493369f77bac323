package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// The manifest and parameters.yaml are checked as generic values, the way
// zod checks the output of JSON.parse / YAML.parse: objects are
// map[string]any, arrays []any, numbers number, plus string, bool and nil.
// Decoding into structs instead would lose the difference between absent and
// null, and Go's decoders are case-insensitive about keys.

// number is a JSON or YAML number: its value as a double (±Inf when it
// overflows, as in JavaScript) and its source text for messages.
type number struct {
	f    float64
	text string
}

// maxSafeInteger is Number.MAX_SAFE_INTEGER: zod's .int() refuses anything
// beyond it.
const maxSafeInteger = 1<<53 - 1

// decodeJSON parses data as exactly one JSON value.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, jsonPosition(data, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		line, col := lineCol(data, dec.InputOffset()-1) // at the token read
		return nil, fmt.Errorf("line %d, column %d: unexpected data after the top-level value", line, col)
	}
	return fromJSON(v), nil
}

// jsonPosition says where in data a decoding error is, as an editor shows
// it (line and column, from 1): encoding/json gives only a byte offset.
func jsonPosition(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := lineCol(data, se.Offset-1) // Offset is just past the bad character
		return fmt.Errorf("line %d, column %d: %v", line, col, err)
	case errors.As(err, &te):
		line, col := lineCol(data, te.Offset)
		return fmt.Errorf("line %d, column %d: %v", line, col, err)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		line, col := lineCol(data, int64(len(data)))
		return fmt.Errorf("line %d, column %d: the file ends before the JSON does (a missing } or ])", line, col)
	}
	return err
}

// lineCol turns a byte offset into a line and a column (in characters),
// both from 1.
func lineCol(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return line, col
}

func fromJSON(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = fromJSON(e)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = fromJSON(e)
		}
		return t
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil { // out of range: JSON.parse gives ±Infinity
			f = math.Inf(1)
			if strings.HasPrefix(string(t), "-") {
				f = math.Inf(-1)
			}
		}
		return number{f: f, text: string(t)}
	default:
		return v
	}
}

// decodeYAML parses data as at most one YAML document with YAML 1.2 core
// schema scalars (timestamps stay strings, "<<" is an ordinary key), which
// is how the reference's YAML.parse reads it. An empty document is nil.
func decodeYAML(data []byte) (any, error) {
	// Decoding into any first refuses what yaml.v3 refuses (duplicate keys
	// among them); the node walk then keeps the scalars' source form.
	var probe any
	if err := yaml.Unmarshal(data, &probe); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, errors.New("must hold a single YAML document")
	}
	return fromYAML(&doc, 0)
}

func fromYAML(n *yaml.Node, depth int) (any, error) {
	if depth > 512 {
		return nil, errors.New("nested too deeply")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return fromYAML(n.Content[0], depth+1)
	case yaml.AliasNode:
		return fromYAML(n.Alias, depth+1)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, err := fromYAML(n.Content[i], depth+1)
			if err != nil {
				return nil, err
			}
			v, err := fromYAML(n.Content[i+1], depth+1)
			if err != nil {
				return nil, err
			}
			m[keyString(k)] = v
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := fromYAML(c, depth+1)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, err
			}
			return b, nil
		case "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return nil, err
			}
			switch t := v.(type) {
			case int:
				return number{f: float64(t), text: n.Value}, nil
			case int64:
				return number{f: float64(t), text: n.Value}, nil
			case uint64:
				return number{f: float64(t), text: n.Value}, nil
			case float64:
				return number{f: t, text: n.Value}, nil
			}
			return n.Value, nil
		default:
			return n.Value, nil
		}
	}
	return nil, fmt.Errorf("unsupported YAML node kind %d", n.Kind)
}

// keyString is how JavaScript turns a non-string YAML key into a property
// name.
func keyString(k any) string {
	switch t := k.(type) {
	case string:
		return t
	case number:
		return t.text
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(t)
	default:
		return fmt.Sprint(t)
	}
}

// describe renders a value for "got ..." in a message.
func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(t)
	case bool:
		return strconv.FormatBool(t)
	case number:
		return t.text
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	default:
		return fmt.Sprintf("%v", t)
	}
}

// checker collects the problems of one file.
type checker struct {
	code     string
	file     string
	problems []Problem
}

func (c *checker) failf(path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	prefix := path
	if prefix == "" {
		prefix = c.file
	}
	c.problems = append(c.problems, Problem{
		Code:    c.code,
		File:    c.file,
		Path:    path,
		Message: prefix + ": " + msg,
	})
}

func join(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

func index(base string, i int) string { return base + "[" + strconv.Itoa(i) + "]" }

// field returns m[key] and whether the key is present; a missing required
// key is reported.
func (c *checker) field(m map[string]any, base, key string, required bool) (any, bool) {
	v, ok := m[key]
	if !ok && required {
		c.failf(join(base, key), "is required")
	}
	return v, ok
}

func (c *checker) object(path string, v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		c.failf(path, "must be an object; got %s", describe(v))
	}
	return m, ok
}

func (c *checker) array(path string, v any) ([]any, bool) {
	l, ok := v.([]any)
	if !ok {
		c.failf(path, "must be an array; got %s", describe(v))
	}
	return l, ok
}

// nonEmptyArray is array for a list that must have an entry.
func (c *checker) nonEmptyArray(path string, v any) ([]any, bool) {
	l, ok := c.array(path, v)
	if ok && len(l) == 0 {
		c.failf(path, "must have at least one entry")
		return nil, false
	}
	return l, ok
}

func (c *checker) str(path string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		c.failf(path, "must be a string; got %s", describe(v))
	}
	return s, ok
}

func (c *checker) boolean(path string, v any) (bool, bool) {
	b, ok := v.(bool)
	if !ok {
		c.failf(path, "must be a boolean; got %s", describe(v))
	}
	return b, ok
}

// num checks a finite number.
func (c *checker) num(path string, v any) (float64, bool) {
	n, ok := v.(number)
	if !ok {
		c.failf(path, "must be a number; got %s", describe(v))
		return 0, false
	}
	if math.IsInf(n.f, 0) || math.IsNaN(n.f) {
		c.failf(path, "must be a finite number; got %s", n.text)
		return 0, false
	}
	return n.f, true
}

// integer checks a whole, safe number within [lo, hi].
func (c *checker) integer(path string, v any, lo, hi float64) (int, bool) {
	f, ok := c.num(path, v)
	if !ok {
		return 0, false
	}
	if f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
		c.failf(path, "must be an integer; got %s", v.(number).text)
		return 0, false
	}
	if f < lo || f > hi {
		switch {
		case hi == maxSafeInteger && lo == 1:
			c.failf(path, "must be a positive integer; got %s", v.(number).text)
		case hi == maxSafeInteger:
			c.failf(path, "must be at least %s; got %s", fmtNum(lo), v.(number).text)
		default:
			c.failf(path, "must be between %s and %s; got %s", fmtNum(lo), fmtNum(hi), v.(number).text)
		}
		return 0, false
	}
	return int(f), true
}

// positive checks a finite number > 0.
func (c *checker) positive(path string, v any) (float64, bool) {
	f, ok := c.num(path, v)
	if !ok {
		return 0, false
	}
	if f <= 0 {
		c.failf(path, "must be a positive number; got %s", v.(number).text)
		return 0, false
	}
	return f, true
}

func (c *checker) enum(path string, v any, allowed ...string) (string, bool) {
	s, ok := v.(string)
	if ok {
		for _, a := range allowed {
			if s == a {
				return s, true
			}
		}
	}
	c.failf(path, "must be one of %s; got %s", strings.Join(allowed, ", "), describe(v))
	return "", false
}

func (c *checker) match(path string, v any, re *regexp.Regexp) (string, bool) {
	s, ok := c.str(path, v)
	if !ok {
		return "", false
	}
	if !re.MatchString(s) {
		c.failf(path, "must match %s; got %q", re.String(), s)
		return "", false
	}
	return s, true
}

// strList checks an array of strings; nonEmptyItems refuses "" items.
func (c *checker) strList(path string, v any, nonEmptyItems bool) ([]string, bool) {
	l, ok := c.array(path, v)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(l))
	good := true
	for i, e := range l {
		s, ok := c.str(index(path, i), e)
		if !ok {
			good = false
			continue
		}
		if nonEmptyItems && s == "" {
			c.failf(index(path, i), "must not be empty")
			good = false
			continue
		}
		out = append(out, s)
	}
	return out, good
}

// Optional-field helpers: absent → nil, present → checked.

func (c *checker) optString(m map[string]any, base, key string) *string {
	v, ok := m[key]
	if !ok {
		return nil
	}
	s, ok := c.str(join(base, key), v)
	if !ok {
		return nil
	}
	return &s
}

func (c *checker) optBool(m map[string]any, base, key string) *bool {
	v, ok := m[key]
	if !ok {
		return nil
	}
	b, ok := c.boolean(join(base, key), v)
	if !ok {
		return nil
	}
	return &b
}

func (c *checker) reqString(m map[string]any, base, key string) string {
	v, ok := c.field(m, base, key, true)
	if !ok {
		return ""
	}
	s, _ := c.str(join(base, key), v)
	return s
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
