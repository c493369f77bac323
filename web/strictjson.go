package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/normsim/normsim/sim"
)

// checkKeyCase refuses an object key that matches one of v's fields only
// when case is ignored: encoding/json folds case, but the API, like the job
// socket, is spelled exactly ("Template" is not "template").
func checkKeyCase(data []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	data = bytes.TrimSpace(data)
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return nil // not an object: the decoder reports it
		}
		fields := jsonFields(t)
		for k, raw := range obj {
			ft, ok := fields[k]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, k) {
						return sim.Errorf(sim.EInvalid, "unknown field %q in %s (did you mean %q? keys are case-sensitive)", k, path, name)
					}
				}
				continue // unknown outright: the decoder reports it
			}
			if err := checkKeyCase(raw, ft, join(path, k)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		return eachItem(data, t, path, checkKeyCase)
	}
	return nil
}

// jsonFields maps each exported field of struct type t that JSON reads to
// its type, by the name JSON reads it under.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

// eachItem runs check on each item of the JSON array data, of slice or
// array type t, with its path; data that is no array is the decoder's
// to report.
func eachItem(data []byte, t reflect.Type, path string, check func([]byte, reflect.Type, string) error) error {
	var items []json.RawMessage
	if json.Unmarshal(data, &items) != nil {
		return nil
	}
	for i, it := range items {
		if err := check(it, t.Elem(), path+"["+itoa(i)+"]"); err != nil {
			return err
		}
	}
	return nil
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func itoa(i int) string { return strconv.Itoa(i) }

// checkDuplicateKeys refuses an object that names a key twice, anywhere
// in data: encoding/json would keep the last silently, and a request is
// read strictly. Keys are compared as the parser reads them, escapes
// undone ("tok\u0065n" is "token"). Malformed JSON is left to the
// decoder to report.
func checkDuplicateKeys(data []byte, what string) error {
	// Each level knows where it sits in its parent; a path is spelt only
	// for an error (spelt at every level, a body nested 100,000 deep
	// would cost gigabytes).
	type level struct {
		parent *level
		at     string          // its key or index in the parent
		keys   map[string]bool // nil for an array
		key    string          // an object's key whose value comes next
		isKey  bool            // an object's next token is a key
		items  int             // an array's values so far
	}
	path := func(l *level) string {
		var parts []string
		for ; l != nil && l.parent != nil; l = l.parent {
			parts = append(parts, l.at)
		}
		slices.Reverse(parts)
		return strings.Join(parts, "")
	}
	var top *level
	open := func(keys map[string]bool) {
		l := &level{parent: top, keys: keys, isKey: keys != nil}
		if top != nil {
			if top.keys == nil {
				l.at = "[" + itoa(top.items) + "]"
			} else {
				l.at = "." + top.key
				if top.parent == nil {
					l.at = top.key
				}
			}
		}
		top = l
	}
	valueEnded := func() {
		switch {
		case top == nil:
		case top.keys == nil:
			top.items++
		default:
			top.isKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if top != nil && top.isKey {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					where := path(top)
					if where == "" {
						where = "the body"
					}
					return sim.Errorf(sim.EInvalid, "%s: key %q appears twice in %s; send each key once", what, k, where)
				}
				top.keys[k], top.key, top.isKey = true, k, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			open(map[string]bool{})
		case json.Delim('['):
			open(nil)
		case json.Delim('}'), json.Delim(']'):
			top = top.parent
			valueEnded()
		default:
			valueEnded()
		}
	}
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// fieldError finds the first value in data, in document order, that a
// type with its own UnmarshalJSON (a duration, say) refuses, and returns
// its refusal named by its path ("timeouts.stop: …", "faults[1].delay:
// …"): encoding/json hands such an error back without saying where it
// was. It returns nil when no such value refuses. The walk follows t, so
// it goes no deeper than t's fields do.
func fieldError(data []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		err := json.Unmarshal(data, reflect.New(t).Interface())
		var se *sim.Error
		if err != nil && errors.As(err, &se) && path != "" {
			return sim.Errorf(se.Code, "%s: %s", path, se.Message)
		}
		return err
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := jsonFields(t)
		dec := json.NewDecoder(bytes.NewReader(data))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return nil
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil
			}
			var raw json.RawMessage
			if dec.Decode(&raw) != nil {
				return nil
			}
			k, _ := tok.(string)
			if ft, ok := fields[k]; ok {
				if err := fieldError(raw, ft, join(path, k)); err != nil {
					return err
				}
			}
		}
	case reflect.Slice, reflect.Array:
		return eachItem(data, t, path, fieldError)
	}
	return nil
}
