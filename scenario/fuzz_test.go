package scenario

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseScenario checks that parsing never panics or hangs, that the
// result is either scenarios or problems, that every problem has a position
// inside the file, and that every scenario is complete enough to run.
// Seeds: the examples, testdata/wrong and testdata/broken; found cases live
// in testdata/fuzz/FuzzParseScenario.
func FuzzParseScenario(f *testing.F) {
	var seeds []string
	for _, name := range append(exampleFiles, misbehavingFiles...) {
		seeds = append(seeds, examplePath(name))
	}
	for _, dir := range []string{"broken", "wrong"} {
		m, _ := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
		seeds = append(seeds, m...)
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ss, err := Parse("fuzz.yaml", data)
		if (err == nil) == (len(ss) == 0) {
			t.Fatalf("scenarios %d with error %v", len(ss), err)
		}
		if err != nil {
			var ps Problems
			if !errors.As(err, &ps) || len(ps) == 0 {
				t.Fatalf("error %T %v, want Problems", err, err)
			}
			lines := len(splitLines(data)) + 2
			for _, p := range ps {
				if p.File != "fuzz.yaml" || p.Line < 1 || p.Line > lines || p.Column < 0 || p.Message == "" {
					t.Fatalf("problem without a good position: %+v (file has %d lines)", p, lines)
				}
			}
			return
		}
		for _, s := range ss {
			if s.Name == "" || s.Template == "" || s.Repeat < 1 || len(s.Steps) == 0 || len(s.Nodes) == 0 {
				t.Fatalf("incomplete scenario %+v", s)
			}
			jobs := map[string]bool{}
			for i, st := range s.Steps {
				n := 0
				for _, set := range []bool{st.Launch != nil, st.Wait != nil, st.Migrate != nil} {
					if set {
						n++
					}
				}
				if n != 1 || st.Name == "" || st.Pos.Line < 1 {
					t.Fatalf("step %d: %+v", i, st)
				}
				switch {
				case st.Launch != nil:
					if st.Launch.As == "" || jobs[st.Launch.As] || st.Launch.Node == "" {
						t.Fatalf("step %d: launch %+v", i, st.Launch)
					}
					jobs[st.Launch.As] = true
				case st.Wait != nil:
					if st.Wait.Sleep <= 0 && !jobs[st.Wait.Job] {
						t.Fatalf("step %d: wait for unknown job %+v", i, st.Wait)
					}
				case st.Migrate != nil:
					if st.Expect == nil || !jobs[st.Migrate.Job] {
						t.Fatalf("step %d: migrate %+v expect %+v", i, st.Migrate, st.Expect)
					}
					if st.Expect.Error == 0 && st.Expect.State == "" {
						t.Fatalf("step %d: expectation without state or error", i)
					}
					for _, fault := range st.Migrate.Faults {
						var obj map[string]any
						if json.Unmarshal(fault, &obj) != nil || obj["kind"] == "" {
							t.Fatalf("step %d: fault %s", i, fault)
						}
					}
					if _, err := json.Marshal(st.Migrate.Request()); err != nil {
						t.Fatalf("step %d: request does not marshal: %v", i, err)
					}
				}
			}
		}
	})
}
