package protocol

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// The seed corpora live in testdata/fuzz/<FuzzName>/ so that plain `go test`
// replays every case ever found interesting; the f.Add calls below only cover
// the basics.

func FuzzParseJobFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello","token":"t"}`,
		`{"type":"state","payload":{"b":1,  "a":[1.50,2e3]}}`,
		`{"type":"target-applied","applied":["a"],"failed":[{"id":"b","reason":"c"}],"skewMs":1.5}`,
		`{"type":"abort","reason":"r","reason":"s"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRoundTrip(t, data, ParseJobFrame, func(fr JobFrame) []byte { return fr.Payload })
	})
}

func FuzzParseWorkerFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello-ack","migration":{"id":"m","side":"target"}}`,
		`{"type":"initial-state","migrationId":"m","payload":[1e-400]}`,
		`{"type":"abort","migrationId":"m","reason":"r"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRoundTrip(t, data, ParseWorkerFrame, nil)
	})
}

// checkRoundTrip: a frame parse accepts marshals, and the marshalling
// parses back to the same frame; a refusal is a *FrameError with a fit
// reason. With payload, the payload kept is a piece of the frame's bytes.
func checkRoundTrip[F interface{ Marshal() ([]byte, error) }](t *testing.T, data []byte, parse func([]byte) (F, error), payload func(F) []byte) {
	t.Helper()
	fr, err := parse(data)
	if err != nil {
		checkRefusal(t, data, err)
		return
	}
	b, err := fr.Marshal()
	if err != nil {
		t.Fatalf("accepted %q as %#v, which does not marshal: %v", data, fr, err)
	}
	back, err := parse(b)
	if err != nil {
		t.Fatalf("accepted %q, but its marshalling %q is refused: %v", data, b, err)
	}
	if !reflect.DeepEqual(back, fr) {
		t.Fatalf("accepted %q as\n%#v\nbut %q parses back as\n%#v", data, fr, b, back)
	}
	if payload != nil {
		if p := payload(fr); p != nil && !bytes.Contains(data, p) {
			t.Fatalf("payload %q is not a piece of the frame %q", p, data)
		}
	}
}

func checkRefusal(t *testing.T, data []byte, err error) {
	t.Helper()
	var fe *FrameError
	if !errors.As(err, &fe) {
		t.Fatalf("refusal of %q is %T, want *FrameError", data, err)
	}
	checkReason(t, fe.Reason)
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{
		"/instances/job1/a",
		"/instances/job%201/role%2Fx/?q=1",
		"/instances/%E0%A4%A/b",
		"/instances/a/b//",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		jobID, role, ok := ParsePath(path)
		if !ok {
			if jobID != "" || role != "" {
				t.Fatalf("ParsePath(%q) refused but returned %q, %q", path, jobID, role)
			}
			return
		}
		if jobID == "" || role == "" {
			t.Fatalf("ParsePath(%q) accepted an empty segment: %q, %q", path, jobID, role)
		}
		p := Path(jobID, role)
		j2, r2, ok := ParsePath(p)
		if !ok || j2 != jobID || r2 != role {
			t.Fatalf("ParsePath(%q) = %q, %q, but Path gives %q, which parses as %q, %q, %v", path, jobID, role, p, j2, r2, ok)
		}
		if p != Path(j2, r2) {
			t.Fatalf("Path is not stable for %q", p)
		}
	})
}
