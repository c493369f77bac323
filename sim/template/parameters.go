package template

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/normsim/normsim/sim"
)

// Parameter types of parameters.yaml.
const (
	TypeString  = "string"
	TypeInt     = "int"
	TypeNumber  = "number"
	TypeBoolean = "boolean"
	TypeEnum    = "enum"
)

// ReservedPrefix is the env namespace of the infrastructure: no parameter,
// operator value or launcher env may use it.
const ReservedPrefix = "NORSK_"

// ValidateParameters judges a parameters.yaml and returns its parameters
// (an empty, non-nil slice when it lists none), or nil and every
// PARAMETERS_INVALID problem. An empty file (or one holding only comments)
// lists no parameters.
func ValidateParameters(data []byte) ([]sim.Parameter, []Problem) {
	c := &checker{code: sim.EParametersInvalid, file: "parameters.yaml"}
	// yaml.v3 refuses the worst alias bombs itself, with a message that
	// names no bound; the same bounds as compose.yml's apply, and say so.
	if err := checkYAMLBounds(data); err != nil {
		c.failf("", "%v", err)
		return nil, c.problems
	}
	raw, err := decodeYAML(data)
	if err != nil {
		c.failf("", "not valid YAML: %v", err)
		return nil, c.problems
	}
	if raw == nil {
		return []sim.Parameter{}, nil
	}
	root, ok := c.object("", raw)
	if !ok {
		return nil, c.problems
	}
	out := []sim.Parameter{}
	v, ok := root["parameters"]
	if !ok {
		return out, nil
	}
	l, ok := c.array("parameters", v)
	if !ok {
		return nil, c.problems
	}
	seen := map[string]int{}
	for i, e := range l {
		path := index("parameters", i)
		o, ok := c.object(path, e)
		if !ok {
			continue
		}
		p := sim.Parameter{Type: TypeString}
		if nv, ok := c.field(o, path, "name", true); ok {
			if name, ok := c.match(join(path, "name"), nv, paramNameRe); ok {
				switch j, dup := seen[name]; {
				case strings.HasPrefix(name, ReservedPrefix):
					c.failf(join(path, "name"), "must not be in the %s namespace (reserved for the infrastructure); got %q", ReservedPrefix, name)
				case dup:
					c.failf(join(path, "name"), "must be unique; %q is already declared by parameters[%d]", name, j)
				}
				seen[name] = i
				p.Name = name
			}
		}
		// The reference schema requires purpose (the launch form shows it
		// as the field's help), so a name alone is not a parameter.
		p.Purpose = c.reqString(o, path, "purpose")
		if tv, ok := o["type"]; ok {
			p.Type, _ = c.enum(join(path, "type"), tv, TypeString, TypeInt, TypeNumber, TypeBoolean, TypeEnum)
		}
		if dv, ok := o["default"]; ok {
			if s, isStr := dv.(string); isStr {
				p.Default = &s
			} else {
				// YAML reads `default: 5` as a number; the schema wants the
				// string, so say how to write it.
				hint := ""
				if _, isNum := dv.(number); isNum {
					hint = fmt.Sprintf(` (quote it: default: "%s")`, describe(dv))
				} else if b, isBool := dv.(bool); isBool {
					hint = fmt.Sprintf(` (quote it: default: "%t")`, b)
				}
				c.failf(join(path, "default"), "must be a string; got %s%s", describe(dv), hint)
			}
		}
		if b := c.optBool(o, path, "secret"); b != nil {
			p.Secret = *b
		}
		if b := c.optBool(o, path, "required"); b != nil {
			p.Required = *b
		}
		numeric := p.Type == TypeInt || p.Type == TypeNumber
		for _, key := range []string{"min", "max"} {
			mv, ok := o[key]
			if !ok {
				continue
			}
			f, ok := c.num(join(path, key), mv)
			if !ok {
				continue
			}
			if !numeric && p.Type != "" {
				c.failf(join(path, key), "is only allowed for type int or number; type is %s", p.Type)
				continue
			}
			if key == "min" {
				p.Min = &f
			} else {
				p.Max = &f
			}
		}
		if p.Min != nil && p.Max != nil && *p.Min > *p.Max {
			c.failf(join(path, "min"), "must be at most max (%s); got %s", fmtNum(*p.Max), fmtNum(*p.Min))
		} else if p.Min != nil && p.Max != nil && p.Type == TypeInt && math.Ceil(*p.Min) > math.Floor(*p.Max) {
			c.failf(join(path, "min"), "no whole number lies between min (%s) and max (%s), so no value of this int parameter is valid; widen them, or make it type number", fmtNum(*p.Min), fmtNum(*p.Max))
		}
		if vv, ok := o["values"]; ok {
			if vals, ok := c.strList(join(path, "values"), vv, false); ok {
				switch {
				case p.Type != TypeEnum && p.Type != "":
					c.failf(join(path, "values"), "is only allowed for type enum; type is %s", p.Type)
				case len(vals) == 0:
					c.failf(join(path, "values"), "must have at least one entry for type enum")
				default:
					p.Values = vals
					for j, v := range vals {
						switch {
						case strings.TrimSpace(v) == "":
							// A blank value at launch takes the default.
							c.failf(fmt.Sprintf("%s[%d]", join(path, "values"), j), "is blank, and a launch that gives a blank value gets the default, so it can never be chosen; remove it (a string parameter takes any value)")
						case slices.Index(vals, v) < j:
							c.failf(fmt.Sprintf("%s[%d]", join(path, "values"), j), "%q is listed already, at values[%d]; list each value once", v, slices.Index(vals, v))
						}
					}
				}
			}
		} else if p.Type == TypeEnum {
			c.failf(join(path, "values"), "is required for type enum")
		}
		out = append(out, p)
	}
	if len(c.problems) > 0 {
		return nil, c.problems
	}
	return out, nil
}

// checkDefaults holds each parameter's default to the parameter's own
// rules, as a launch that does not give the value applies it: a default
// of "5000" under max 10 validated ok and every such launch was refused.
// An allocated port's parameter is judged as a port at launch (its
// default is "auto" or a number there), so it is not judged here. An
// empty default is applied as it stands (an int's "" is refused), so it
// is judged like any other.
func checkDefaults(params []sim.Parameter, m *Manifest) []Problem {
	port := map[string]bool{}
	if m != nil {
		for _, d := range m.AllocatedPorts {
			port[d.Param] = true
		}
	}
	var out []Problem
	for i, p := range params {
		if port[p.Name] {
			out = append(out, portParameterProblems(i, p, m)...)
			continue
		}
		if p.Default == nil {
			continue
		}
		if msg := checkValue(p, *p.Default); msg != "" {
			path := fmt.Sprintf("parameters[%d].default", i)
			out = append(out, Problem{Code: sim.EParametersInvalid, File: parametersFile, Path: path,
				Message: fmt.Sprintf("%s: %s, so every launch that does not give %s is refused; fix the default, or drop it", path, msg, p.Name)})
		}
	}
	return out
}

// portParameterProblems judges a parameter that is also an allocated
// port's param. A launch judges its value as a port's whatever
// parameters.yaml says (blank closed, auto, a port number), so the entry
// may give the port only a purpose and a default that opens it (auto, a
// port number): anything else it says would be ignored or contradicted,
// and an entry without such a default only lists the port as an ordinary
// parameter of its type (round 13, B9).
func portParameterProblems(i int, p sim.Parameter, m *Manifest) []Problem {
	j := slices.IndexFunc(m.AllocatedPorts, func(d sim.AllocatedPortDecl) bool { return d.Param == p.Name })
	both := fmt.Sprintf("%s is also manifest.json's allocatedPorts[%d].param, a port whose value at launch is blank (closed), %q or a port number whatever parameters.yaml says", p.Name, j, PortAuto)
	fix := fmt.Sprintf("remove it from parameters.yaml, or keep only its purpose and a default of %q or a port number (the default that opens the port)", PortAuto)
	problem := func(key, why string) []Problem {
		path := fmt.Sprintf("parameters[%d]", i)
		if key != "" {
			path = join(path, key)
		}
		return []Problem{{Code: sim.EParametersInvalid, File: parametersFile, Path: path,
			Message: fmt.Sprintf("%s: %s; %s, so declaring it in both is ambiguous: %s", path, why, both, fix)}}
	}
	switch {
	case p.Type != TypeString && p.Type != TypeInt:
		return problem("type", fmt.Sprintf("is %s", p.Type))
	case p.Required:
		return problem("required", "is true, which a port does not honour (a launch that gives no value gets the default, or the port closed)")
	case p.Min != nil:
		return problem("min", "is not applied to a port")
	case p.Max != nil:
		return problem("max", "is not applied to a port")
	case p.Default == nil || strings.TrimSpace(*p.Default) == "":
		// A port is closed when not given anyway: the entry would only
		// list the port as an ordinary parameter.
		return problem("", "gives no default that opens the port, so it only lists the port as a "+p.Type+" parameter, which takes no "+p.Type+" value")
	}
	if v := strings.TrimSpace(*p.Default); v != PortAuto {
		if _, err := portNumber(p.Name, v); err != nil {
			return problem("default", fmt.Sprintf("%q is not %q or a port number 1..65535, so every launch that does not give %s is refused", *p.Default, PortAuto, p.Name))
		}
	}
	return nil
}
