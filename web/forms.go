package web

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/normsim/normsim/sim"
)

// The dashboard's forms post to /ui/...: plain HTML form endpoints that
// redirect on success (POST/redirect/GET) and show the page again with the
// error explained when the simulator refuses.

// csrfField is the name of the forms' hidden CSRF token field.
const csrfField = "csrf"

// requireForm guards every /ui endpoint. checkOrigin already refuses a
// foreign Origin; a form of ours always carries one (browsers send Origin
// on every POST), so here a missing Origin is refused too, and the form
// must carry a valid CSRF token.
func (s *Server) requireForm(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r) // routing answers 405
			return
		}
		origin := r.Header.Get("Origin")
		if origin == "" {
			s.refuse(w, r, http.StatusForbidden, "ORIGIN_REFUSED",
				"this form was not sent by a page of this normsim: the request has no Origin header",
				"Use the dashboard's own buttons; scripts should call the JSON API under /api/v1 instead.")
			return
		}
		if !sameOrigin(origin, r.Host) {
			s.refuse(w, r, http.StatusForbidden, "ORIGIN_REFUSED", "origin "+origin+" may not change this normsim", "")
			return
		}
		if err := r.ParseForm(); err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				s.refuse(w, r, http.StatusRequestEntityTooLarge, sim.EInvalid, "the form is larger than "+strconv.FormatInt(mbe.Limit, 10)+" bytes", "")
				return
			}
			s.refuse(w, r, http.StatusBadRequest, sim.EInvalid, "the form could not be read: "+err.Error(), "")
			return
		}
		tok := r.PostForm.Get(csrfField)
		if tok == "" {
			s.refuse(w, r, http.StatusForbidden, "CSRF_REFUSED", "the form carries no CSRF token",
				"Reload the page and submit the form again.")
			return
		}
		if !s.csrf.Valid(tok) {
			s.refuse(w, r, http.StatusForbidden, "CSRF_REFUSED", "the form's CSRF token is invalid or expired",
				"normsim may have restarted since the page was loaded (tokens are signed per run); reload the page and submit again.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers a request the server will not serve: a page for a browser,
// the API's JSON error for anything under /api.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, code, msg, hint string) {
	if wantsHTML(r) {
		s.renderError(w, r, status, code, msg, hint)
		return
	}
	writeErrorStatus(w, status, code, msg)
}

// seeOther redirects after a successful form post.
func seeOther(w http.ResponseWriter, r *http.Request, to string) {
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// uiLaunch places a template from the overview's launch form.
func (s *Server) uiLaunch(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	lf := &launchForm{Template: f.Get("template"), Node: f.Get("node"), Runtime: f.Get("runtime"), Params: map[string]string{}}
	isPort := map[string]bool{}
	if t, err := s.svc.Catalog().Get(lf.Template); err == nil {
		for _, d := range t.AllocatedPorts {
			isPort[d.Param] = true
		}
	}
	for k, vs := range f {
		name, ok := strings.CutPrefix(k, "param.")
		if !ok || len(vs) == 0 {
			continue
		}
		// A blank field means "not given": the template's default applies.
		// A blank port field is kept: blank closes an allocated port even
		// when its default is auto, and the field shows that default, so
		// clearing it is how the operator closes the port.
		switch v := vs[len(vs)-1]; {
		case strings.TrimSpace(v) != "":
			lf.Params[name] = v
		case isPort[name]:
			lf.Params[name] = ""
		}
	}
	req := sim.LaunchRequest{Template: lf.Template, Node: lf.Node, Runtime: lf.Runtime, Params: lf.Params}
	if len(req.Params) == 0 {
		req.Params = nil
	}
	in, err := s.svc.Launch(r.Context(), req)
	if err != nil {
		s.logFormError("launch", err)
		lf.Err = err
		s.renderOverview(w, r, statusOf(sim.ErrorCode(err)), lf)
		return
	}
	seeOther(w, r, "/instances/"+url.PathEscape(in.ID))
}

// uiMigrate starts a migration from the instance page's migrate form.
func (s *Server) uiMigrate(w http.ResponseWriter, r *http.Request) {
	id := pathParam(r, "id")
	f := r.PostForm
	mf := &migrateForm{Strategy: f.Get("strategy"), To: f.Get("to"), Runtime: f.Get("runtime"), Timeouts: map[string]string{},
		Faults: strings.TrimSpace(f.Get("faults"))}
	req := sim.MigrateRequest{Strategy: mf.Strategy, To: mf.To, Runtime: mf.Runtime}
	if mf.Faults != "" {
		// The same fault list POST /api/v1/instances/{id}/migrate takes,
		// read as strictly as the API reads it.
		mf.Err = decodeStrict([]byte(mf.Faults), &req.Faults, "faults")
	}
	for _, ts := range req.Timeouts.Fields() {
		if mf.Err != nil {
			break
		}
		v := strings.TrimSpace(f.Get("timeout." + ts.Name))
		if v == "" {
			continue
		}
		mf.Timeouts[ts.Name] = v
		ms, err := strconv.ParseFloat(v, 64)
		if err != nil || ms < 0 || ms > 24*3600*1000 {
			mf.Err = sim.Errorf(sim.EInvalid, "timeouts.%s: must be a number of milliseconds from 0 to 86400000; got %q", ts.Name, v)
			break
		}
		*ts.Value = sim.Duration(time.Duration(ms * float64(time.Millisecond)))
	}
	if mf.Err == nil {
		m, err := s.svc.Migrate(r.Context(), id, req)
		if err == nil {
			seeOther(w, r, "/migrations/"+url.PathEscape(m.ID))
			return
		}
		s.logFormError("migrate", err)
		mf.Err = err
	}
	if sim.ErrorCode(mf.Err) == sim.ENotFound {
		if _, err := s.svc.Instance(r.Context(), id); err != nil {
			s.renderServiceError(w, r, err, "The instance may have been stopped and removed; the overview lists the current ones.")
			return
		}
	}
	s.renderInstance(w, r, statusOf(sim.ErrorCode(mf.Err)), id, mf)
}

// uiStop stops and removes an instance.
func (s *Server) uiStop(w http.ResponseWriter, r *http.Request) {
	id := pathParam(r, "id")
	// The page says when the instance it showed was stopped already: then
	// the button removes that record (a migration's stopped source), and
	// never the job that runs on elsewhere.
	remove := s.svc.Stop
	if r.PostFormValue("stopped") == "true" {
		remove = s.svc.RemoveStopped
	}
	if err := remove(r.Context(), id); err != nil {
		s.logFormError("stop", err)
		if sim.ErrorCode(err) == sim.ENotFound {
			s.renderServiceError(w, r, err, "It may already have been stopped; the overview lists the current instances.")
			return
		}
		s.renderInstance(w, r, statusOf(sim.ErrorCode(err)), id, &migrateForm{Err: err})
		return
	}
	seeOther(w, r, "/")
}

// logFormError logs a refused form: a user-facing refusal at debug level
// (the page shows it), an internal error as an error. Never the form's
// values.
func (s *Server) logFormError(action string, err error) {
	if sim.ErrorCode(err) == sim.EInternal {
		s.log.Error("dashboard "+action+" failed", "err", err)
		return
	}
	s.log.Debug("dashboard "+action+" refused", "code", sim.ErrorCode(err), "msg", sim.ErrorMessage(err))
}
