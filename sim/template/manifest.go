package template

import (
	"bytes"
	"regexp"
	"slices"

	"github.com/normsim/normsim/sim"
)

// Manifest is a validated manifest.json (schema version 1). Optional fields
// are nil when absent; unknown keys were dropped.
type Manifest struct {
	ProductTemplateSchemaVersion int           `json:"productTemplateSchemaVersion"`
	ProductName                  string        `json:"productName"`
	ProductVersion               string        `json:"productVersion"`
	GeneratedAt                  string        `json:"generatedAt"`
	Target                       string        `json:"target"`
	Migration                    *Migration    `json:"migration,omitempty"`
	StudioAccessModes            []string      `json:"studioAccessModes,omitempty"`
	UI                           *UI           `json:"ui,omitempty"`
	Debug                        *Debug        `json:"debug,omitempty"`
	Proxy                        *Proxy        `json:"proxy,omitempty"`
	AllowWorkflowUploads         *bool         `json:"allowWorkflowUploads,omitempty"`
	IsStudio                     *bool         `json:"isStudio,omitempty"` // deprecated alias of allowWorkflowUploads
	SupportsCustomAssets         *bool         `json:"supportsCustomAssets,omitempty"`
	RequiresWorkingDirectory     *bool         `json:"requiresWorkingDirectory,omitempty"`
	Sideload                     *Sideload     `json:"sideload,omitempty"`
	Advanced                     *Advanced     `json:"advanced,omitempty"`
	Requirements                 *Requirements `json:"requirements,omitempty"`
	// AllocatedPorts is nil when the manifest declares none (absent or []).
	AllocatedPorts []sim.AllocatedPortDecl `json:"allocatedPorts,omitempty"`
}

// Strategy is the declared migration strategy: DefaultStrategy when the
// manifest declares none.
func (m *Manifest) Strategy() sim.Strategy {
	if m.Migration == nil {
		return sim.DeclaredStrategy("")
	}
	return sim.DeclaredStrategy(m.Migration.Strategy)
}

// CustomAssets reports supportsCustomAssets, which is true when absent.
func (m *Manifest) CustomAssets() bool {
	return m.SupportsCustomAssets == nil || *m.SupportsCustomAssets
}

// StudioAccessAllowed reports whether the launcher may set
// NORSK_STUDIO_ACCESS to mode: only when the manifest lists it.
func (m *Manifest) StudioAccessAllowed(mode string) bool {
	return mode != "" && slices.Contains(m.StudioAccessModes, mode)
}

// Migration is the manifest's migration declaration.
type Migration struct {
	Strategy sim.Strategy `json:"strategy"`
}

// UI is the manifest's runtime screen.
type UI struct {
	RuntimeScreenURL       string  `json:"runtimeScreenUrl"`
	RuntimeScreenLabel     *string `json:"runtimeScreenLabel,omitempty"`
	RuntimeScreenService   *string `json:"runtimeScreenService,omitempty"`
	RuntimeScreenReadyWhen *string `json:"runtimeScreenReadyWhen,omitempty"` // running | healthy | never
	RuntimeReadyPath       *string `json:"runtimeReadyPath,omitempty"`       // starts with "/"
}

// Debug is the manifest's debug switches.
type Debug struct {
	Studio     *bool `json:"studio,omitempty"`
	Visualiser *bool `json:"visualiser,omitempty"`
}

// Proxy is what the manager's proxy exposes for an instance.
type Proxy struct {
	Expose []string     `json:"expose"` // [] when absent
	Routes []ProxyRoute `json:"routes"` // [] when absent
}

// ProxyRoute is one proxy route.
type ProxyRoute struct {
	Segment   string `json:"segment"`
	Service   string `json:"service"`
	Port      *int   `json:"port,omitempty"`
	Websocket *bool  `json:"websocket,omitempty"`
	Auth      *bool  `json:"auth,omitempty"`
}

// Sideload is the CUDA sideload bundles a product needs.
type Sideload struct {
	GPUInference    *bool `json:"gpuInference,omitempty"`
	Models          *bool `json:"models,omitempty"`
	ModelsReasoning *bool `json:"modelsReasoning,omitempty"`
	LLMVenv         *bool `json:"llmVenv,omitempty"`
}

// Override is one advanced runner knob: the default value the runner holds.
type Override[T any] struct {
	Default *T `json:"default,omitempty"`
}

// Advanced is the manifest's per-instance runner knobs.
type Advanced struct {
	NetworkMode   *Override[string]   `json:"networkMode,omitempty"` // docker | hybrid
	ContainerUser *Override[string]   `json:"containerUser,omitempty"`
	PublicHost    *Override[string]   `json:"publicHost,omitempty"`
	ShmSize       *Override[string]   `json:"shmSize,omitempty"`
	HostPorts     *Override[[]string] `json:"hostPorts,omitempty"`
	SharedMemory  *Override[[]string] `json:"sharedMemory,omitempty"`
	OpenFileLimit *Override[int]      `json:"openFileLimit,omitempty"` // 1024…1048576
}

// Requirement is a placement requirement: mode fixed or default with a
// value, or mode required without one.
type Requirement[T any] struct {
	Mode  string `json:"mode"`
	Value *T     `json:"value,omitempty"`
}

// GPURequirement is the value of requirements.gpu.
type GPURequirement struct {
	Capacity *float64 `json:"capacity,omitempty"`
	Model    *string  `json:"model,omitempty"`
}

// Capability is one entry of requirements.capabilities.
type Capability struct {
	Name             string            `json:"name"`
	Count            *int              `json:"count,omitempty"`
	AttributeMatches map[string]string `json:"attributeMatches,omitempty"`
}

// Requirements is what a node must offer to run the product.
type Requirements struct {
	Capacity     *Requirement[float64]        `json:"capacity,omitempty"`
	Cores        *Requirement[int]            `json:"cores,omitempty"`
	GPU          *Requirement[GPURequirement] `json:"gpu,omitempty"`
	Capabilities *Requirement[[]Capability]   `json:"capabilities,omitempty"`
	HostPorts    *Requirement[[]string]       `json:"hostPorts,omitempty"`
	Accelerator  *Requirement[string]         `json:"accelerator,omitempty"` // none | nvidia | quadra
}

// Requirement modes.
const (
	ModeFixed    = "fixed"
	ModeDefault  = "default"
	ModeRequired = "required"
)

var (
	paramNameRe     = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	routeSegmentRe  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	hostPortRe      = regexp.MustCompile(`(?i)^[0-9]+/(tcp|udp)$`)
	reservedSegment = []string{"studio", "media", "visualiser", "uvis", "status", "metrics"}
)

// ValidateManifest judges a manifest.json the way the reference schema does
// and returns the manifest, or nil and every MANIFEST_INVALID problem.
func ValidateManifest(data []byte) (*Manifest, []Problem) {
	c := &checker{code: sim.EManifestInvalid, file: "manifest.json"}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		// JSON has no byte order mark (RFC 8259 8.1), and the decoder's
		// "invalid character 'ï'" names nothing a user can see.
		c.failf("", "not valid JSON: the file begins with a UTF-8 byte order mark (BOM), which JSON does not allow; save it as UTF-8 without BOM")
		return nil, c.problems
	}
	raw, err := decodeJSON(data)
	if err != nil {
		c.failf("", "not valid JSON: %v", err)
		return nil, c.problems
	}
	root, ok := c.object("", raw)
	if !ok {
		return nil, c.problems
	}
	m := checkManifest(c, root)
	if len(c.problems) > 0 {
		return nil, c.problems
	}
	return m, nil
}

func checkManifest(c *checker, root map[string]any) *Manifest {
	m := &Manifest{}
	if v, ok := c.field(root, "", "productTemplateSchemaVersion", true); ok {
		if n, isNum := v.(number); isNum && n.f == 1 {
			m.ProductTemplateSchemaVersion = 1
		} else {
			if _, isNum := v.(number); isNum {
				c.failf("productTemplateSchemaVersion", "must be 1; got %s", describe(v))
			} else {
				// "1" must be 1 reads as a contradiction: name the type.
				c.failf("productTemplateSchemaVersion", "must be the number 1, not a string or other type; got %s (write 1 without quotes)", describe(v))
			}
		}
	}
	m.ProductName = c.reqString(root, "", "productName")
	m.ProductVersion = c.reqString(root, "", "productVersion")
	m.GeneratedAt = c.reqString(root, "", "generatedAt")
	if v, ok := c.field(root, "", "target", true); ok {
		if s, isStr := v.(string); isStr && s == "docker-compose" {
			m.Target = s
		} else {
			c.failf("target", `must be "docker-compose"; got %s`, describe(v))
		}
	}

	if v, ok := root["migration"]; ok {
		if o, ok := c.object("migration", v); ok {
			if s, ok := c.field(o, "migration", "strategy", true); ok {
				if st, ok := c.enum("migration.strategy", s, "overlap", "stopThenStart", "handover"); ok {
					m.Migration = &Migration{Strategy: sim.Strategy(st)}
				}
			}
		}
	}
	if v, ok := root["studioAccessModes"]; ok {
		if l, ok := c.strList("studioAccessModes", v, true); ok && len(l) > 0 {
			m.StudioAccessModes = l // [] lists nothing, as absent does
		}
	}
	if v, ok := root["ui"]; ok {
		m.UI = checkUI(c, v)
	}
	if v, ok := root["debug"]; ok {
		if o, ok := c.object("debug", v); ok {
			m.Debug = &Debug{
				Studio:     c.optBool(o, "debug", "studio"),
				Visualiser: c.optBool(o, "debug", "visualiser"),
			}
		}
	}
	if v, ok := root["proxy"]; ok {
		m.Proxy = checkProxy(c, v)
	}
	m.AllowWorkflowUploads = c.optBool(root, "", "allowWorkflowUploads")
	m.IsStudio = c.optBool(root, "", "isStudio")
	m.SupportsCustomAssets = c.optBool(root, "", "supportsCustomAssets")
	m.RequiresWorkingDirectory = c.optBool(root, "", "requiresWorkingDirectory")
	if v, ok := root["sideload"]; ok {
		if o, ok := c.object("sideload", v); ok {
			m.Sideload = &Sideload{
				GPUInference:    c.optBool(o, "sideload", "gpuInference"),
				Models:          c.optBool(o, "sideload", "models"),
				ModelsReasoning: c.optBool(o, "sideload", "modelsReasoning"),
				LLMVenv:         c.optBool(o, "sideload", "llmVenv"),
			}
		}
	}
	if v, ok := root["advanced"]; ok {
		m.Advanced = checkAdvanced(c, v)
	}
	if v, ok := root["requirements"]; ok {
		m.Requirements = checkRequirements(c, v)
	}
	if v, ok := root["allocatedPorts"]; ok {
		if ports := checkAllocatedPorts(c, v); len(ports) > 0 {
			m.AllocatedPorts = ports // [] declares nothing, as absent does
		}
	}
	return m
}

func checkUI(c *checker, v any) *UI {
	o, ok := c.object("ui", v)
	if !ok {
		return nil
	}
	ui := &UI{
		RuntimeScreenURL:     c.reqString(o, "ui", "runtimeScreenUrl"),
		RuntimeScreenLabel:   c.optString(o, "ui", "runtimeScreenLabel"),
		RuntimeScreenService: c.optString(o, "ui", "runtimeScreenService"),
	}
	if v, ok := o["runtimeScreenReadyWhen"]; ok {
		if s, ok := c.enum("ui.runtimeScreenReadyWhen", v, "running", "healthy", "never"); ok {
			ui.RuntimeScreenReadyWhen = &s
		}
	}
	if p := c.optString(o, "ui", "runtimeReadyPath"); p != nil {
		if len(*p) == 0 || (*p)[0] != '/' {
			c.failf("ui.runtimeReadyPath", `must start with "/"; got %q`, *p)
		} else {
			ui.RuntimeReadyPath = p
		}
	}
	return ui
}

func checkProxy(c *checker, v any) *Proxy {
	o, ok := c.object("proxy", v)
	if !ok {
		return nil
	}
	p := &Proxy{Expose: []string{}, Routes: []ProxyRoute{}}
	if v, ok := o["expose"]; ok {
		if l, ok := c.strList("proxy.expose", v, false); ok {
			p.Expose = l
		}
	}
	if v, ok := o["routes"]; ok {
		if l, ok := c.array("proxy.routes", v); ok {
			for i, e := range l {
				path := index("proxy.routes", i)
				ro, ok := c.object(path, e)
				if !ok {
					continue
				}
				r := ProxyRoute{}
				if s, ok := c.field(ro, path, "segment", true); ok {
					if seg, ok := c.match(join(path, "segment"), s, routeSegmentRe); ok {
						if slices.Contains(reservedSegment, seg) {
							c.failf(join(path, "segment"), "must not be one of studio, media, visualiser, uvis, status, metrics (reserved); got %q", seg)
						}
						r.Segment = seg
					}
				}
				if s, ok := c.field(ro, path, "service", true); ok {
					if svc, ok := c.str(join(path, "service"), s); ok {
						if svc == "" {
							c.failf(join(path, "service"), "must not be empty")
						}
						r.Service = svc
					}
				}
				if pv, ok := ro["port"]; ok {
					if n, ok := c.integer(join(path, "port"), pv, 1, maxSafeInteger); ok {
						r.Port = &n
					}
				}
				r.Websocket = c.optBool(ro, path, "websocket")
				r.Auth = c.optBool(ro, path, "auth")
				p.Routes = append(p.Routes, r)
			}
		}
	}
	return p
}

func checkAdvanced(c *checker, v any) *Advanced {
	o, ok := c.object("advanced", v)
	if !ok {
		return nil
	}
	a := &Advanced{}
	// knob returns the knob's default value when the knob is present and an
	// object; present reports the knob itself.
	knob := func(key string) (dv any, hasDefault, present bool) {
		kv, ok := o[key]
		if !ok {
			return nil, false, false
		}
		ko, ok := c.object(join("advanced", key), kv)
		if !ok {
			return nil, false, false
		}
		dv, hasDefault = ko["default"]
		return dv, hasDefault, true
	}
	strKnob := func(key string, enum ...string) *Override[string] {
		dv, has, present := knob(key)
		if !present {
			return nil
		}
		ov := &Override[string]{}
		if has {
			path := join("advanced", key+".default")
			var s string
			var ok bool
			if len(enum) > 0 {
				s, ok = c.enum(path, dv, enum...)
			} else {
				s, ok = c.str(path, dv)
			}
			if ok {
				ov.Default = &s
			}
		}
		return ov
	}
	listKnob := func(key string) *Override[[]string] {
		dv, has, present := knob(key)
		if !present {
			return nil
		}
		ov := &Override[[]string]{}
		if has {
			if l, ok := c.strList(join("advanced", key+".default"), dv, false); ok {
				ov.Default = &l
			}
		}
		return ov
	}
	a.NetworkMode = strKnob("networkMode", "docker", "hybrid")
	a.ContainerUser = strKnob("containerUser")
	a.PublicHost = strKnob("publicHost")
	a.ShmSize = strKnob("shmSize")
	a.HostPorts = listKnob("hostPorts")
	a.SharedMemory = listKnob("sharedMemory")
	if dv, has, present := knob("openFileLimit"); present {
		a.OpenFileLimit = &Override[int]{}
		if has {
			if n, ok := c.integer("advanced.openFileLimit.default", dv, 1024, 1048576); ok {
				a.OpenFileLimit.Default = &n
			}
		}
	}
	return a
}

// checkRequirement checks the {mode, value} envelope of one requirement and,
// for fixed/default, hands the value to checkValue.
func checkRequirement[T any](c *checker, o map[string]any, key string, checkValue func(path string, v any) (T, bool)) *Requirement[T] {
	v, ok := o[key]
	if !ok {
		return nil
	}
	path := join("requirements", key)
	ro, ok := c.object(path, v)
	if !ok {
		return nil
	}
	mv, ok := c.field(ro, path, "mode", true)
	if !ok {
		return nil
	}
	mode, ok := c.enum(join(path, "mode"), mv, ModeFixed, ModeDefault, ModeRequired)
	if !ok {
		return nil
	}
	r := &Requirement[T]{Mode: mode}
	val, has := ro["value"]
	switch {
	case mode == ModeRequired && has:
		c.failf(join(path, "value"), "must be absent when mode is %q; got %s", mode, describe(val))
	case mode != ModeRequired && !has:
		c.failf(join(path, "value"), "is required when mode is %q", mode)
	case mode != ModeRequired:
		if t, ok := checkValue(join(path, "value"), val); ok {
			r.Value = &t
		}
	}
	return r
}

func checkRequirements(c *checker, v any) *Requirements {
	o, ok := c.object("requirements", v)
	if !ok {
		return nil
	}
	r := &Requirements{}
	r.Capacity = checkRequirement(c, o, "capacity", c.positive)
	r.Cores = checkRequirement(c, o, "cores", func(path string, v any) (int, bool) {
		return c.integer(path, v, 1, maxSafeInteger)
	})
	r.GPU = checkRequirement(c, o, "gpu", func(path string, v any) (GPURequirement, bool) {
		g := GPURequirement{}
		go_, ok := c.object(path, v)
		if !ok {
			return g, false
		}
		before := len(c.problems)
		if cv, ok := go_["capacity"]; ok {
			if f, ok := c.positive(join(path, "capacity"), cv); ok {
				g.Capacity = &f
			}
		}
		g.Model = c.optString(go_, path, "model")
		_, hasCap := go_["capacity"]
		_, hasModel := go_["model"]
		if !hasCap && !hasModel {
			c.failf(path, "must set at least one of capacity, model")
		}
		return g, len(c.problems) == before
	})
	r.Capabilities = checkRequirement(c, o, "capabilities", func(path string, v any) ([]Capability, bool) {
		l, ok := c.nonEmptyArray(path, v)
		if !ok {
			return nil, false
		}
		before := len(c.problems)
		out := make([]Capability, 0, len(l))
		for i, e := range l {
			ep := index(path, i)
			eo, ok := c.object(ep, e)
			if !ok {
				continue
			}
			cp := Capability{Name: c.reqString(eo, ep, "name")}
			if cv, ok := eo["count"]; ok {
				if n, ok := c.integer(join(ep, "count"), cv, 1, maxSafeInteger); ok {
					cp.Count = &n
				}
			}
			if av, ok := eo["attributeMatches"]; ok {
				if ao, ok := c.object(join(ep, "attributeMatches"), av); ok {
					for k, x := range ao {
						if s, ok := c.str(join(join(ep, "attributeMatches"), k), x); ok {
							if cp.AttributeMatches == nil {
								cp.AttributeMatches = map[string]string{}
							}
							cp.AttributeMatches[k] = s
						}
					}
				}
			}
			out = append(out, cp)
		}
		return out, len(c.problems) == before
	})
	r.HostPorts = checkRequirement(c, o, "hostPorts", func(path string, v any) ([]string, bool) {
		l, ok := c.nonEmptyArray(path, v)
		if !ok {
			return nil, false
		}
		before := len(c.problems)
		out := make([]string, 0, len(l))
		for i, e := range l {
			if s, ok := c.str(index(path, i), e); ok {
				if !hostPortRe.MatchString(s) {
					c.failf(index(path, i), "must be PORT/tcp or PORT/udp; got %q", s)
					continue
				}
				out = append(out, s)
			}
		}
		return out, len(c.problems) == before
	})
	// accelerator: {mode: fixed|default, value} or {mode: required}, where
	// a value next to required is dropped like any unknown key.
	if v, ok := o["accelerator"]; ok {
		path := "requirements.accelerator"
		if ao, ok := c.object(path, v); ok {
			if mv, ok := c.field(ao, path, "mode", true); ok {
				if mode, ok := c.enum(path+".mode", mv, ModeFixed, ModeDefault, ModeRequired); ok {
					r.Accelerator = &Requirement[string]{Mode: mode}
					if mode != ModeRequired {
						if val, ok := c.field(ao, path, "value", true); ok {
							if s, ok := c.enum(path+".value", val, "none", "nvidia", "quadra"); ok {
								r.Accelerator.Value = &s
							}
						}
					}
				}
			}
		}
	}
	return r
}

func checkAllocatedPorts(c *checker, v any) []sim.AllocatedPortDecl {
	l, ok := c.array("allocatedPorts", v)
	if !ok {
		return nil
	}
	out := make([]sim.AllocatedPortDecl, 0, len(l))
	seen := map[string]int{}
	for i, e := range l {
		path := index("allocatedPorts", i)
		o, ok := c.object(path, e)
		if !ok {
			continue
		}
		d := sim.AllocatedPortDecl{}
		if pv, ok := c.field(o, path, "param", true); ok {
			if p, ok := c.match(join(path, "param"), pv, paramNameRe); ok {
				// Not a zod rule: two declarations of one param would
				// collide in NORSK_ALLOCATED_PORTS and in interpolation.
				if j, dup := seen[p]; dup {
					c.failf(join(path, "param"), "must be unique; %q is already declared by allocatedPorts[%d]", p, j)
				}
				if reserved(p) {
					// A launch refuses every NORSK_ value from an
					// operator, so the port could never be opened.
					c.failf(join(path, "param"), "must not be in the %s namespace (reserved for the infrastructure, and refused from an operator, so no launch could open the port); got %q: rename it", ReservedPrefix, p)
				}
				seen[p] = i
				d.Param = p
			}
		}
		if pv, ok := c.field(o, path, "protocol", true); ok {
			d.Protocol, _ = c.enum(join(path, "protocol"), pv, "tcp", "udp")
		}
		if pv, ok := c.field(o, path, "preferred", true); ok {
			d.Preferred, _ = c.integer(join(path, "preferred"), pv, 1, 65535)
		}
		if s := c.optString(o, path, "service"); s != nil {
			d.Service = *s
		}
		if s := c.optString(o, path, "label"); s != nil {
			d.Label = *s
		}
		out = append(out, d)
	}
	return out
}
