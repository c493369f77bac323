package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/normsim/normsim/sim"
)

// The instance page: state, env, log tail and the migrate form.

type instancePage struct {
	pageBase
	In sim.Instance // token and env removed; see Env
	// NodeAddress is the instance's node's address (what its published
	// ports bind); NodeShared says other nodes share it.
	NodeAddress string
	NodeShared  bool
	External    bool
	Template    *sim.Template
	Declared    sim.Strategy
	// Strategies are the migrate buttons; Targets the target node choice.
	Strategies []strategyButton
	Targets    []targetOption
	Timeouts   []timeoutField
	// Faults is the migrate form's fault list as typed (JSON).
	Faults     string
	Runtimes   []string
	Runtime    string
	Notes      []string
	Error      string
	Code       string
	ErrorHelp  string
	Env        []envService
	DotEnv     string
	JSONEnv    string
	Params     []envVar
	Migrations []*sim.Migration
	// MigrationsErr says why the job's migrations could not be listed;
	// MigrationsUnreadable counts those the store holds but could not
	// read, left out of Migrations, and MigrationsDamage says why.
	MigrationsErr        string
	MigrationsUnreadable int
	MigrationsDamage     string
	// Frames are the last job-socket frames of the instance, oldest
	// first; FramesErr why they could not be read.
	Frames    []frameRow
	FramesErr string
	// FramesDropped says what of the instance's frame records normsim
	// let go of to stay within its bounds ("" when none).
	FramesDropped string
	// History is the instance's last changes, oldest first; HistoryErr
	// why they could not be read.
	History    []sim.DescribedEvent
	HistoryErr string
	// ReplacedBy is the migration that moved this instance's job on, and
	// MovedFrom the one that made this instance: the links between a
	// stopped source and its successor, both ways.
	ReplacedBy *sim.Migration
	MovedFrom  *sim.Migration
	Active     *sim.Migration
	Terminal   bool
	// Health is what the page says of the healthchecks: only a running
	// instance is healthy or not yet.
	Health string
	// Removed: the instance is gone, only its kept logs are shown.
	Removed bool
}

type strategyButton struct {
	Name     sim.Strategy
	Allowed  bool
	Declared bool
	Reason   string
	Summary  string
}

// frameRow is a job-socket frame as the instance page lists it.
type frameRow struct {
	At        time.Time
	Direction string
	Type      string
	Size      int
	Text      string
}

// pageFrames is how many of an instance's last frames (and changes) its
// page lists.
const pageFrames = 50

// historyOf reads an instance's last changes for its page.
func (s *Server) historyOf(ctx context.Context, id string) ([]sim.DescribedEvent, string) {
	evs, err := s.svc.InstanceEvents(ctx, id, pageFrames)
	if err != nil && !partial(err) {
		return nil, sim.ErrorMessage(err)
	}
	return sim.DescribeAll(evs), unreadableNote(err)
}

// partial says whether err is a list's records the store could not read,
// served without them.
func partial(err error) bool {
	_, ok := errors.AsType[*sim.UnreadableRecords](err)
	return ok
}

// unreadableNote says what a list left out, "" for nothing.
func unreadableNote(err error) string {
	if u, ok := errors.AsType[*sim.UnreadableRecords](err); ok {
		return fmt.Sprintf("%s could not be read and are left out: %s", sim.Plural(int64(u.Count), "record"), sim.ErrorMessage(u.First))
	}
	return ""
}

// framesOf reads an instance's last frames for its page.
func (s *Server) framesOf(ctx context.Context, id string) ([]frameRow, string) {
	frs, err := s.svc.Frames(ctx, id, pageFrames)
	if err != nil && !partial(err) {
		return nil, sim.ErrorMessage(err)
	}
	rows := make([]frameRow, len(frs))
	for i, f := range frs {
		rows[i] = frameRow{At: f.At, Direction: f.Direction, Type: f.Type, Size: f.Size, Text: sim.FrameSnippet([]byte(f.Data))}
	}
	return rows, unreadableNote(err)
}

type targetOption struct {
	Name, Label string
	Selected    bool
}

type timeoutField struct {
	Name, Label, Help, Value string
	Default                  int64
}

type envService struct {
	Service string
	Vars    []envVar
}

type envVar struct {
	Name, Value string
	Hidden      bool
}

// migrateForm is a submitted migrate form.
type migrateForm struct {
	Strategy, To, Runtime string
	Timeouts              map[string]string
	Faults                string
	Err                   error
}

var strategySummary = map[sim.Strategy]string{
	sim.Overlap:       "start the target, then stop the source; both may produce briefly",
	sim.StopThenStart: "prepare the target, stop the source, start the target; safe, leaves a gap",
	sim.Handover:      "hand over at an exact position through the job socket",
}

func (s *Server) instancePage(w http.ResponseWriter, r *http.Request) {
	s.renderInstance(w, r, http.StatusOK, pathParam(r, "id"), nil)
}

func (s *Server) renderInstance(w http.ResponseWriter, r *http.Request, status int, id string, mf *migrateForm) {
	ctx := r.Context()
	raw, err := s.svc.Instance(ctx, id)
	if sim.ErrorCode(err) == sim.ENotFound && s.logsKept(r, id) {
		p := instancePage{pageBase: s.base(r, "Instance "+id, "overview", "instance", "/instances/"+url.PathEscape(id))}
		p.Instance = id
		p.In = sim.Instance{ID: id, State: sim.InstanceStopped}
		p.Removed, p.Terminal = true, true
		p.Frames, p.FramesErr = s.framesOf(ctx, id)
		p.History, p.HistoryErr = s.historyOf(ctx, id)
		s.render(w, http.StatusOK, "instance", p)
		return
	}
	if err != nil {
		s.renderServiceError(w, r, err, "The instance may have been stopped and removed; the overview lists the current ones.")
		return
	}
	p := instancePage{pageBase: s.base(r, "Instance "+raw.ID, "overview", "instance", "/instances/"+url.PathEscape(raw.ID))}
	p.Instance = raw.ID
	p.In = safeInstance(raw)
	p.External = raw.Runtime == sim.RuntimeExternal
	p.Terminal = raw.State.Terminal()
	switch {
	case raw.State != sim.InstanceRunning:
		p.Health = "—"
	case raw.Healthy:
		p.Health = "yes"
	default:
		p.Health = "not yet"
	}
	p.Env = envView(raw)
	hideSecretParams(p.Env, raw, s.svc.Catalog())
	p.Params = paramsView(raw, s.svc.Catalog())
	if p.External {
		p.DotEnv, p.JSONEnv = pasteEnv(raw.Env)
	}
	if t, err := s.svc.Catalog().Get(raw.Template); err == nil {
		p.Template = t
	}
	declared := sim.DefaultStrategy
	if p.Template != nil {
		declared = sim.DeclaredStrategy(p.Template.Strategy)
	}
	p.Declared = declared
	for _, st := range sim.Strategies {
		b := strategyButton{Name: st, Declared: st == declared, Summary: strategySummary[st]}
		if err := sim.CheckStrategy(declared, st); err == nil {
			b.Allowed = true
		} else {
			b.Reason = strategyRefusal(declared, st)
		}
		p.Strategies = append(p.Strategies, b)
	}
	if mf == nil {
		mf = &migrateForm{}
	}
	nodes := s.svc.Nodes()
	var firstOther string
	for _, n := range nodes {
		if n.Name == raw.Node {
			p.NodeAddress, p.NodeShared = n.Address, n.SharedAddress
			continue
		}
		if firstOther == "" {
			firstOther = n.Name
		}
		label := n.Name + " — job socket " + n.SocketURL
		if !n.HasJobSocket() {
			label = n.Name + " — no job socket (handover impossible)"
		}
		if n.Address != "" {
			label += " · publishes on " + n.Address
		}
		p.Targets = append(p.Targets, targetOption{Name: n.Name, Label: label, Selected: mf.To == n.Name})
	}
	p.Runtime = mf.Runtime
	p.Faults = mf.Faults
	p.Runtimes = runtimeChoices(raw.Runtime, s.svc.Runtimes())
	defaults := s.svc.Timeouts()
	for _, ts := range defaults.Fields() {
		p.Timeouts = append(p.Timeouts, timeoutField{Name: ts.Name, Label: ts.Label, Help: ts.Help,
			Default: ts.Value.D().Milliseconds(), Value: mf.Timeouts[ts.Name]})
	}
	if raw.State != sim.InstanceRunning {
		p.Notes = append(p.Notes, fmt.Sprintf("This instance is %s; only a running instance can migrate.", raw.State))
	} else if !raw.Connected && slices.Contains(sim.AllowedStrategies(declared), sim.Handover) {
		p.Notes = append(p.Notes, "Not connected to its job socket yet: a handover needs the source connected.")
	}
	if firstOther == "" {
		p.Notes = append(p.Notes, "There is no other node to migrate to.")
	}
	if mf.Err != nil {
		p.Error, p.Code = sim.ErrorMessage(mf.Err), sim.ErrorCode(mf.Err)
		if strings.HasPrefix(p.Error, "strategy ") && strings.Contains(p.Error, "is not allowed") {
			p.ErrorHelp = "A migration may use the strategy the template declares or stopThenStart, never one the product did not promise: " +
				"overlap is not “safer” than handover, since a handover product never promised to tolerate a second writer."
		}
	}
	p.Frames, p.FramesErr = s.framesOf(ctx, raw.ID)
	if c, err := s.svc.FrameCounts(ctx, raw.ID); err == nil {
		p.FramesDropped = strings.Join(sim.FrameCountNotes(c), "; ")
	}
	p.History, p.HistoryErr = s.historyOf(ctx, raw.ID)
	migs, err := s.svc.MigrationPage(ctx, sim.MigrationFilter{JobID: raw.JobID, Limit: 20})
	if err != nil {
		p.MigrationsErr = sim.ErrorMessage(err)
	} else {
		p.Migrations, p.MigrationsUnreadable, p.MigrationsDamage = migs.Items, migs.Unreadable, migs.Damage
		for _, m := range migs.Items {
			if m.State == sim.MigrationRunning && (m.Source.Instance == raw.ID || m.Target.Instance == raw.ID) {
				p.Active = m
			}
			if m.State == sim.MigrationCompleted && m.Source.Instance == raw.ID && m.Target.Instance != "" && p.ReplacedBy == nil {
				p.ReplacedBy = m
			}
		}
	}
	if raw.MigrationID != "" {
		if m, err := s.svc.MigrationSummary(ctx, raw.MigrationID); err == nil && m.State == sim.MigrationCompleted && m.Source.Instance != "" {
			p.MovedFrom = m
		}
	}
	s.render(w, status, "instance", p)
}

// strategyRefusal says why a strategy button is disabled, in the words of
// the contract.
func strategyRefusal(declared, st sim.Strategy) string {
	if declared == sim.DefaultStrategy {
		// Declared or not: the catalog cannot tell, and the rule is the same.
		return fmt.Sprintf("Not allowed: the template promises only %s (the default when a manifest declares no strategy); %s needs the manifest to declare it.", sim.StopThenStart, st)
	}
	return fmt.Sprintf("Not allowed: the template declares %s, so a migration may use %s or %s; the product never promised %s.", declared, declared, sim.StopThenStart, st)
}

// safeInstance is an instance as a page may show it: never the token, and
// the env only through envView.
func safeInstance(in sim.Instance) sim.Instance {
	in.Token = ""
	in.Env = nil
	in.RuntimeRef = nil
	return in
}

// envView lists an instance's env per service. For anything but an external
// instance the NORSK_* values (the job-socket URL and token among them) and
// the values of secret parameters are hidden: the job has them, the page
// does not need them.
func envView(in sim.Instance) []envService {
	external := in.Runtime == sim.RuntimeExternal
	var out []envService
	for _, svc := range slices.Sorted(maps.Keys(in.Env)) {
		es := envService{Service: svc}
		vars := in.Env[svc]
		for _, k := range slices.Sorted(maps.Keys(vars)) {
			v := envVar{Name: k, Value: vars[k]}
			if !external && (strings.HasPrefix(k, "NORSK_") || (in.Token != "" && strings.Contains(v.Value, in.Token))) {
				v.Value, v.Hidden = "", true
			}
			es.Vars = append(es.Vars, v)
		}
		out = append(out, es)
	}
	return out
}

// paramsView lists the launch params; a secret parameter's value is hidden.
func paramsView(in sim.Instance, cat sim.Catalog) []envVar {
	secret := map[string]bool{}
	if t, err := cat.Get(in.Template); err == nil {
		for _, p := range t.Parameters {
			secret[p.Name] = p.Secret
		}
	}
	var out []envVar
	for _, k := range slices.Sorted(maps.Keys(in.Params)) {
		v := envVar{Name: k, Value: in.Params[k]}
		if secret[k] {
			v.Value, v.Hidden = "", true
		}
		out = append(out, v)
	}
	return out
}

// hideSecretParams hides, in the env of a non-external instance, any value
// that carries a secret parameter's value.
func hideSecretParams(env []envService, in sim.Instance, cat sim.Catalog) {
	if in.Runtime == sim.RuntimeExternal {
		return
	}
	t, err := cat.Get(in.Template)
	if err != nil {
		return
	}
	var secrets []string
	for _, p := range t.Parameters {
		if !p.Secret {
			continue
		}
		if v := in.Params[p.Name]; v != "" {
			secrets = append(secrets, v)
		} else if p.Default != nil && *p.Default != "" {
			secrets = append(secrets, *p.Default)
		}
	}
	for i := range env {
		for j := range env[i].Vars {
			for _, sv := range secrets {
				if strings.Contains(env[i].Vars[j].Value, sv) {
					env[i].Vars[j].Value, env[i].Vars[j].Hidden = "", true
				}
			}
		}
	}
}

// pasteEnv renders an external instance's env the two ways a debugger
// config takes it: .env lines and a JSON object (VS Code's "env").
func pasteEnv(env map[string]map[string]string) (dotenv, jsonEnv string) {
	var b strings.Builder
	merged := map[string]string{}
	multi := len(env) > 1
	for _, svc := range slices.Sorted(maps.Keys(env)) {
		if multi {
			fmt.Fprintf(&b, "# service %s\n", svc)
		}
		for _, k := range slices.Sorted(maps.Keys(env[svc])) {
			fmt.Fprintf(&b, "%s=%s\n", k, env[svc][k])
			merged[k] = env[svc][k]
		}
	}
	if multi {
		// One JSON object per service.
		j, _ := json.MarshalIndent(env, "", "  ")
		return b.String(), string(j)
	}
	j, _ := json.MarshalIndent(merged, "", "  ")
	return b.String(), string(j)
}

// logsKept reports whether normsim keeps logs of an instance it no longer
// holds: its page then shows them.
func (s *Server) logsKept(r *http.Request, id string) bool {
	known := false
	err := s.svc.Logs(r.Context(), id, sim.LogQuery{Tail: -1}, false, func(p *sim.LogPage) error {
		known = p.Known
		return nil
	})
	return err == nil && known
}
