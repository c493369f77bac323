package jobsocket

import (
	"reflect"
	"testing"

	"github.com/normsim/normsim/protocol"
)

// TestRedactTokens: a token is redacted from a frame record by the key
// the parser reads, however it is spelled (issue 34 item 7: a hello whose
// key was written "tok\u0065n" was stored with its token in clear).
func TestRedactTokens(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"type":"hello","token":"s3cret"}`, `{"type":"hello","token":"<redacted>"}`},
		{`{"type":"hello", "token" : "s3\"cret"}`, `{"type":"hello", "token" : "<redacted>"}`},
		{`{"type":"hello","Token":"s3cret"}`, `{"type":"hello","Token":"<redacted>"}`},
		{`{"type":"hello","token":"s3cret"`, `{"type":"hello","token":"<redacted>"`},                   // cut short
		{`{"type":"hello","token":"s3cr`, `{"type":"hello","token":"<redacted>"`},                      // cut inside the secret
		{`{"token":"a","token":"b"}`, `{"token":"<redacted>","token":"<redacted>"}`},                   // duplicated keys
		{`{"type":"state","payload":{"token":"keep"}}`, `{"type":"state","payload":{"token":"keep"}}`}, // a payload is the job's
		{`{"type":"state","payload":"\"token\":\"x\""}`, `{"type":"state","payload":"\"token\":\"x\""}`},
		{`{"type":"hello","token":null}`, `{"type":"hello","token":null}`},
		// A frame that is not valid JSON: a token written any way is the
		// job's secret (issue 34, round four, F5).
		{`not json "token": "x"`, `not json "token": "<redacted>"`},
		{`token=s3cret`, `token="<redacted>"`},
		{`token=s3cret&x=1`, `token="<redacted>"&x=1`},
		{`{'type':'hello','token':'s3cret'}`, `{'type':'hello','token':"<redacted>"}`},
		{`{type: hello, TOKEN: s3cret}`, `{type: hello, TOKEN: "<redacted>"}`},
		{`{"type":"state","payload":{"token":"x"}`, `{"type":"state","payload":{"token":"<redacted>"}`}, // broken: no payload of its own
		// A frame whose top level is no object: any depth.
		{`[{"type":"hello","token":"s3cret"}]`, `[{"type":"hello","token":"<redacted>"}]`},
		{`[[{"token":"s3cret"}]]`, `[[{"token":"<redacted>"}]]`},
		// Valid JSON: text that only mentions a token is the job's.
		{`{"type":"state","payload":"token=abc"}`, `{"type":"state","payload":"token=abc"}`},
		{`{"type":"state","payload":{"tokens":"keep","x":"token: y"}}`, `{"type":"state","payload":{"tokens":"keep","x":"token: y"}}`},
		// The key as the parser reads it, however it is spelled.
		{`{"type":"hello","tok\u0065n":"s3cret"}`, `{"type":"hello","tok\u0065n":"<redacted>"}`},
		{`{"type":"hello","\u0074\u006f\u006b\u0065\u006e":"s3cret"}`, `{"type":"hello","\u0074\u006f\u006b\u0065\u006e":"<redacted>"}`},
		{`{"type":"hello","to\"ken":"keep"}`, `{"type":"hello","to\"ken":"keep"}`},
		// Whatever the value is (issue 34: a token sent as an array or an
		// object was kept in clear); the rest of the frame stays.
		{`{"type":"hello","token":["s3cret"],"x":1}`, `{"type":"hello","token":"<redacted>","x":1}`},
		{`{"type":"hello","token":{"a":"s3]cr}et","b":[1,{"c":2}]},"x":1}`, `{"type":"hello","token":"<redacted>","x":1}`},
		{`{"type":"hello","token":12345}`, `{"type":"hello","token":"<redacted>"}`},
		{`{"type":"hello","token":["s3cr`, `{"type":"hello","token":"<redacted>"`}, // cut short inside
	} {
		if got := string(redactTokens([]byte(tt.in))); got != tt.want {
			t.Errorf("redactTokens(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// Attack round 16, A-F5: a target-applied's applied items and failed ids
// carried the token into the migration's result, judgement and timeline;
// only the failed reasons were redacted.
func TestTheTokenIsRedactedInEveryTextOfAFrame(t *testing.T) {
	f := protocol.JobFrame{Type: protocol.TypeTargetApplied, Reason: "r s3cret",
		Applied: []string{"auth s3cret", "video"},
		Failed:  []protocol.FailedApply{{ID: "id s3cret", Reason: "why s3cret"}}}
	redactFrameReasons(&f, "s3cret")
	want := protocol.JobFrame{Type: protocol.TypeTargetApplied, Reason: "r <redacted>",
		Applied: []string{"auth <redacted>", "video"},
		Failed:  []protocol.FailedApply{{ID: "id <redacted>", Reason: "why <redacted>"}}}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("redacted to %+v, want %+v", f, want)
	}
}
