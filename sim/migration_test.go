package sim

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDurationsThatCannotBeWaitedAreRefused (issue 34, round three, F5): a
// number of milliseconds too large for a time.Duration wrapped negative
// and was read as unset (the default timeout, silently), and a timeout of
// years overflowed twice itself in the fault bounds. Both are refused,
// naming what is wrong.
func TestDurationsThatCannotBeWaitedAreRefused(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string // part of the error; "" for none
	}{
		{`{"state": 1e20}`, "longer than any wait"},
		{`{"state": 9223372036854775807}`, "longer than any wait"},
		{`{"state": "5000000000s"}`, "timeouts.state: 1388888h53m20s is longer than a phase may wait (24h0m0s)"},
		{`{"apply": 86400001}`, "timeouts.apply"},
		// Attack round 10a: well-formed, too long for a time.Duration.
		{`{"state": "9999999h"}`, "longer than any wait"},
		{`{"state": "2562048h"}`, "longer than any wait"},
		{`{"state": 1e400}`, "longer than any wait"},
		{`{"state": "soon"}`, `a string like "5s"`},
		{`{"state": "5 s"}`, `a string like "5s"`},
		{`{"state": 86400000, "apply": "24h"}`, ""},
		{`{"state": 1500}`, ""},
	} {
		var to Timeouts
		err := json.Unmarshal([]byte(tc.body), &to)
		if err == nil {
			err = to.Check()
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it taken", tc.body, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.body, err, tc.want)
		case tc.want != "":
			var e *Error
			if !errors.As(err, &e) || (e.Code != EInvalid && e.Code != EUnprocessable) {
				t.Errorf("%s: %v is not a client's error", tc.body, err)
			}
		}
	}
	var to Timeouts
	if err := ParseTimeouts([]string{"stop=25h"}, &to); err == nil || !strings.Contains(err.Error(), "longer than a phase may wait") {
		t.Errorf("--timeouts stop=25h: %v, want it refused", err)
	}
	if err := ParseTimeouts([]string{"stop=24h"}, &to); err != nil || to.Stop.D() != 24*time.Hour {
		t.Errorf("--timeouts stop=24h: %v (%s), want it taken", err, to.Stop.D())
	}
}

// A timeout shorter than a millisecond applied, and its record said 0 or
// left it out, which reads as the default (issue 34, round 12). It is
// written with its fraction, and read back the same.
func TestADurationUnderAMillisecondIsRecordedAsItIs(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{400 * time.Microsecond, `{"apply":0.4}`},
		{time.Microsecond, `{"apply":0.001}`},
		{1500 * time.Microsecond, `{"apply":1.5}`},
		{250 * time.Millisecond, `{"apply":250}`},
	} {
		b, err := json.Marshal(Timeouts{Apply: Duration(c.d)})
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%s marshals as %s, want %s", c.d, b, c.want)
		}
		var back Timeouts
		if err := json.Unmarshal(b, &back); err != nil || back.Apply.D() != c.d {
			t.Errorf("%s read back as %s (%v)", c.d, back.Apply.D(), err)
		}
	}
}
