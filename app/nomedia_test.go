package app_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

// TestNoMedia: started with NoMedia (up --no-media), normsim opens no
// media port for a job, injects no NORMSIM_MEDIA_URL, refuses a launch
// that asks for normsim:media saying why, and its banner says so. Started
// without it, the same job gets its media URL.
func TestNoMedia(t *testing.T) {
	for _, noMedia := range []bool{false, true} {
		opts := testOptions(t)
		opts.Runtime = sim.RuntimeExternal
		opts.NoMedia = noMedia
		opts.Templates = append(opts.Templates, filepath.Join("..", "examples", "templates"))
		m, banner, stop := runUp(t, opts)

		var in sim.Instance
		if code := postJSON(t, m.URL()+"/api/v1/instances", `{"template":"counter","node":"a","runtime":"external"}`, &in); code != http.StatusCreated {
			t.Fatalf("noMedia=%v: launch counter: %d", noMedia, code)
		}
		var got string
		for _, env := range in.Env {
			got += env[sim.EnvMediaURL]
		}
		var apiErr struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		video := postJSON(t, m.URL()+"/api/v1/instances", `{"template":"video","node":"a","runtime":"external"}`, &apiErr)
		if noMedia {
			if got != "" {
				t.Errorf("--no-media: the job got %s=%s", sim.EnvMediaURL, got)
			}
			if video != http.StatusUnprocessableEntity || apiErr.Error.Code != string(sim.EParamsInvalid) || !strings.Contains(apiErr.Error.Message, "--no-media") {
				t.Errorf("--no-media: a launch asking for normsim:media got %d %+v, want 422 PARAMS_INVALID naming --no-media", video, apiErr)
			}
		} else {
			if !strings.HasPrefix(got, "udp://127.0.0.1:") {
				t.Errorf("the job got %s=%q, want its own udp port", sim.EnvMediaURL, got)
			}
			if video != http.StatusCreated {
				b, _ := json.Marshal(apiErr)
				t.Errorf("a launch asking for normsim:media got %d %s", video, b)
			}
		}
		// The banner is read once the run has ended: Ready comes before
		// the banner is all printed.
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		m.Close()
		if says := strings.Contains(banner.String(), "none (--no-media)"); says != noMedia {
			t.Errorf("noMedia=%v, and the banner says \"none (--no-media)\": %v\n%s", noMedia, says, banner.String())
		}
	}
}
