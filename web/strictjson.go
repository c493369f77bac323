package web

import (
	"bytes"
	"encoding/json"
	"reflect"
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
		var items []json.RawMessage
		if json.Unmarshal(data, &items) != nil {
			return nil
		}
		for i, it := range items {
			if err := checkKeyCase(it, t.Elem(), path+"["+itoa(i)+"]"); err != nil {
				return err
			}
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
