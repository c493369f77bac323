package protocol

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func f64(f float64) *float64 { return &f }

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestParseJobFrame(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want JobFrame
		// refused is a substring of the refusal reason; empty means accepted.
		refused string
	}{
		// hello
		{name: "hello", in: `{"type":"hello","token":"t0k"}`, want: JobFrame{Type: TypeHello, Token: "t0k"}},
		{name: "hello empty token", in: `{"type":"hello","token":""}`, want: JobFrame{Type: TypeHello, Token: ""}},
		{name: "hello whitespace around", in: " \t\r\n{\"type\":\"hello\",\"token\":\"x\"}\n\t ", want: JobFrame{Type: TypeHello, Token: "x"}},
		{name: "hello token first", in: `{"token":"x","type":"hello"}`, want: JobFrame{Type: TypeHello, Token: "x"}},
		{name: "hello escaped key and value", in: `{"t\u0079pe":"hel\u006co","tok\u0065n":"a\"b\\c\/d\n\u00e9\ud83d\ude00"}`, want: JobFrame{Type: TypeHello, Token: "a\"b\\c/d\né😀"}},
		{name: "hello lone surrogate escape", in: `{"type":"hello","token":"\ud800"}`, want: JobFrame{Type: TypeHello, Token: "\uFFFD"}},
		{name: "hello raw non-ASCII", in: `{"type":"hello","token":"nøkkel ✓"}`, want: JobFrame{Type: TypeHello, Token: "nøkkel ✓"}},
		{name: "hello unknown keys dropped", in: `{"type":"hello","token":"x","extra":{"deep":[1e400,-1e400]},"Token":5}`, want: JobFrame{Type: TypeHello, Token: "x"}},
		{name: "hello duplicate token last wins", in: `{"type":"hello","token":5,"token":"late"}`, want: JobFrame{Type: TypeHello, Token: "late"}},
		{name: "hello duplicate token last wins refusal", in: `{"type":"hello","token":"early","token":null}`, refused: "token: expected string, got null"},
		{name: "hello duplicate type last wins", in: `{"type":"state","type":"hello","token":"x"}`, want: JobFrame{Type: TypeHello, Token: "x"}},
		{name: "hello missing token", in: `{"type":"hello"}`, refused: "token: missing"},
		{name: "hello null token", in: `{"type":"hello","token":null}`, refused: "token: expected string, got null"},
		{name: "hello number token", in: `{"type":"hello","token":42}`, refused: "token: expected string, got number"},
		{name: "hello case-sensitive key", in: `{"type":"hello","Token":"x"}`, refused: "token: missing"},
		{name: "hello case-sensitive type", in: `{"type":"Hello","token":"x"}`, refused: `unknown type "Hello" for job→worker`},
		{name: "hello case-sensitive type key", in: `{"Type":"hello","token":"x"}`, refused: "type: missing"},

		// state
		{name: "state object payload", in: `{"type":"state","payload":{"b":1,  "a":[1.50,2e3]}}`, want: JobFrame{Type: TypeState, Payload: raw(`{"b":1,  "a":[1.50,2e3]}`)}},
		{name: "state null payload", in: `{"type":"state","payload":null}`, want: JobFrame{Type: TypeState, Payload: raw(`null`)}},
		{name: "state scalar payloads", in: `{"type":"state","payload":"s"}`, want: JobFrame{Type: TypeState, Payload: raw(`"s"`)}},
		{name: "state number payload", in: `{"type":"state","payload":-0.5e-3}`, want: JobFrame{Type: TypeState, Payload: raw(`-0.5e-3`)}},
		{name: "state bool payload", in: `{"type":"state","payload" : false }`, want: JobFrame{Type: TypeState, Payload: raw(`false`)}},
		{name: "state payload underflow is zero", in: `{"type":"state","payload":[1e-400,-1e-400]}`, want: JobFrame{Type: TypeState, Payload: raw(`[1e-400,-1e-400]`)}},
		{name: "state payload largest double", in: `{"type":"state","payload":1.7976931348623157e308}`, want: JobFrame{Type: TypeState, Payload: raw(`1.7976931348623157e308`)}},
		{name: "state payload just past largest double", in: `{"type":"state","payload":1.7976931348623159e308}`, refused: "payload: number 1.7976931348623159e308 is not finite"},
		{name: "state payload 1e400", in: `{"type":"state","payload":1e400}`, refused: "payload: number 1e400 is not finite"},
		{name: "state payload -1e400 nested", in: `{"type":"state","payload":{"a":[{"b":-1e400}]}}`, refused: "payload: number -1e400 is not finite"},
		{name: "state payload duplicate key later finite", in: `{"type":"state","payload":{"a":1e400,"a":1}}`, want: JobFrame{Type: TypeState, Payload: raw(`{"a":1e400,"a":1}`)}},
		{name: "state payload duplicate key later infinite", in: `{"type":"state","payload":{"a":1,"a":1e400}}`, refused: "1e400"},
		{name: "state payload __proto__ skipped by zod", in: `{"type":"state","payload":{"__proto__":1e400}}`, want: JobFrame{Type: TypeState, Payload: raw(`{"__proto__":1e400}`)}},
		{name: "state payload escaped __proto__ skipped", in: `{"type":"state","payload":{"\u005f_proto__":{"x":1e400}}}`, want: JobFrame{Type: TypeState, Payload: raw(`{"\u005f_proto__":{"x":1e400}}`)}},
		{name: "state payload __proto__ lookalike checked", in: `{"type":"state","payload":{"__proto_":1e400}}`, refused: "1e400"},
		{name: "state payload duplicated last wins", in: `{"type":"state","payload":1e400,"payload":[1]}`, want: JobFrame{Type: TypeState, Payload: raw(`[1]`)}},
		{name: "state payload duplicated last refused", in: `{"type":"state","payload":[1],"payload":1e400}`, refused: "1e400"},
		{name: "state missing payload", in: `{"type":"state"}`, refused: "payload: missing"},
		{name: "state Payload key", in: `{"type":"state","Payload":1}`, refused: "payload: missing"},

		// state-refused, target-ready, source-stopped-output
		{name: "state-refused", in: `{"type":"state-refused","reason":"busy"}`, want: JobFrame{Type: TypeStateRefused, Reason: "busy"}},
		{name: "state-refused missing reason", in: `{"type":"state-refused"}`, refused: "reason: missing"},
		{name: "state-refused array reason", in: `{"type":"state-refused","reason":["busy"]}`, refused: "reason: expected string, got array"},
		{name: "target-ready", in: `{"type":"target-ready","payload":{"at":12}}`, want: JobFrame{Type: TypeTargetReady, Payload: raw(`{"at":12}`)}},
		{name: "target-ready missing payload", in: `{"type":"target-ready","reason":"x"}`, refused: "payload: missing"},
		{name: "source-stopped-output", in: `{"type":"source-stopped-output","payload":[1,2,3]}`, want: JobFrame{Type: TypeSourceStoppedOutput, Payload: raw(`[1,2,3]`)}},
		{name: "source-stopped-output infinite", in: `{"type":"source-stopped-output","payload":[1,2,1E+999]}`, refused: "1E+999"},

		// target-applied
		{name: "target-applied bare", in: `{"type":"target-applied"}`, want: JobFrame{Type: TypeTargetApplied}},
		{name: "target-applied full", in: `{"type":"target-applied","applied":["a","b"],"failed":[{"id":"c","reason":"r","extra":1e400}],"skewMs":-1.25}`,
			want: JobFrame{Type: TypeTargetApplied, Applied: []string{"a", "b"}, Failed: []FailedApply{{ID: "c", Reason: "r"}}, SkewMs: f64(-1.25)}},
		{name: "target-applied empty lists", in: `{"type":"target-applied","applied":[],"failed":[]}`, want: JobFrame{Type: TypeTargetApplied, Applied: []string{}, Failed: []FailedApply{}}},
		{name: "target-applied skew zero", in: `{"type":"target-applied","skewMs":0}`, want: JobFrame{Type: TypeTargetApplied, SkewMs: f64(0)}},
		{name: "target-applied skew underflow", in: `{"type":"target-applied","skewMs":1e-400}`, want: JobFrame{Type: TypeTargetApplied, SkewMs: f64(0)}},
		{name: "target-applied null skew", in: `{"type":"target-applied","skewMs":null}`, refused: "skewMs: expected number, got null"},
		{name: "target-applied string skew", in: `{"type":"target-applied","skewMs":"1"}`, refused: "skewMs: expected number, got string"},
		{name: "target-applied infinite skew", in: `{"type":"target-applied","skewMs":1e400}`, refused: "skewMs: number 1e400 is not finite"},
		{name: "target-applied null applied", in: `{"type":"target-applied","applied":null}`, refused: "applied: expected array, got null"},
		{name: "target-applied object applied", in: `{"type":"target-applied","applied":{"0":"a"}}`, refused: "applied: expected array, got object"},
		{name: "target-applied applied item number", in: `{"type":"target-applied","applied":["a",1]}`, refused: "applied[1]: expected string, got number"},
		{name: "target-applied null failed", in: `{"type":"target-applied","failed":null}`, refused: "failed: expected array, got null"},
		{name: "target-applied failed item string", in: `{"type":"target-applied","failed":["x"]}`, refused: "failed[0]: expected object, got string"},
		{name: "target-applied failed item array", in: `{"type":"target-applied","failed":[[]]}`, refused: "failed[0]: expected object, got array"},
		{name: "target-applied failed missing id", in: `{"type":"target-applied","failed":[{"reason":"r"}]}`, refused: "failed[0].id: missing"},
		{name: "target-applied failed ID key", in: `{"type":"target-applied","failed":[{"ID":"c","reason":"r"}]}`, refused: "failed[0].id: missing"},
		{name: "target-applied failed null reason", in: `{"type":"target-applied","failed":[{"id":"c","reason":null}]}`, refused: "failed[0].reason: expected string, got null"},
		{name: "target-applied failed duplicate id last wins", in: `{"type":"target-applied","failed":[{"id":1,"id":"c","reason":"r"}]}`, want: JobFrame{Type: TypeTargetApplied, Failed: []FailedApply{{ID: "c", Reason: "r"}}}},
		{name: "target-applied duplicate applied last wins", in: `{"type":"target-applied","applied":null,"applied":["z"]}`, want: JobFrame{Type: TypeTargetApplied, Applied: []string{"z"}}},

		// abort
		{name: "abort", in: `{"type":"abort","reason":"operator"}`, want: JobFrame{Type: TypeAbort, Reason: "operator"}},
		{name: "abort needs no migrationId", in: `{"type":"abort","reason":"r","migrationId":7}`, want: JobFrame{Type: TypeAbort, Reason: "r"}},
		{name: "abort missing reason", in: `{"type":"abort","migrationId":"m"}`, refused: "reason: missing"},

		// wrong direction
		{name: "worker type hello-ack", in: `{"type":"hello-ack"}`, refused: `unknown type "hello-ack" for job→worker`},
		{name: "worker type get-state", in: `{"type":"get-state","migrationId":"m"}`, refused: `unknown type "get-state"`},
		{name: "worker type cutover-apply", in: `{"type":"cutover-apply","migrationId":"m","payload":1}`, refused: `unknown type "cutover-apply"`},
		{name: "unknown type", in: `{"type":"foo"}`, refused: `invalid frame: unknown type "foo" for job→worker`},
		{name: "type number", in: `{"type":1,"token":"x"}`, refused: "type: expected string, got number"},
		{name: "type null", in: `{"type":null}`, refused: "type: expected string, got null"},
		{name: "type missing", in: `{"token":"x"}`, refused: "type: missing"},

		// not an object
		{name: "array", in: `[{"type":"hello","token":"x"}]`, refused: "expected object, got array"},
		{name: "null", in: `null`, refused: "expected object, got null"},
		{name: "string", in: `"hello"`, refused: "expected object, got string"},
		{name: "number", in: `1`, refused: "expected object, got number"},

		// not JSON
		{name: "empty", in: ``, refused: "frame is not valid JSON"},
		{name: "only whitespace", in: "  \n", refused: "frame is not valid JSON"},
		{name: "BOM", in: "\uFEFF{\"type\":\"hello\",\"token\":\"x\"}", refused: "frame is not valid JSON"},
		{name: "trailing garbage", in: `{"type":"hello","token":"x"}x`, refused: "frame is not valid JSON"},
		{name: "two values", in: `{"type":"hello","token":"x"} {}`, refused: "frame is not valid JSON"},
		{name: "trailing comma object", in: `{"type":"hello","token":"x",}`, refused: "frame is not valid JSON"},
		{name: "trailing comma array", in: `{"type":"state","payload":[1,]}`, refused: "frame is not valid JSON"},
		{name: "single quotes", in: `{'type':'hello','token':'x'}`, refused: "frame is not valid JSON"},
		{name: "NaN", in: `{"type":"state","payload":NaN}`, refused: "frame is not valid JSON"},
		{name: "Infinity literal", in: `{"type":"state","payload":Infinity}`, refused: "frame is not valid JSON"},
		{name: "comment", in: `{"type":"hello",/*c*/"token":"x"}`, refused: "frame is not valid JSON"},
		{name: "line comment", in: "{\"type\":\"hello\",\"token\":\"x\"}//c", refused: "frame is not valid JSON"},
		{name: "leading zero", in: `{"type":"state","payload":01}`, refused: "frame is not valid JSON"},
		{name: "plus sign", in: `{"type":"state","payload":+1}`, refused: "frame is not valid JSON"},
		{name: "bare dot", in: `{"type":"state","payload":1.}`, refused: "frame is not valid JSON"},
		{name: "leading dot", in: `{"type":"state","payload":.5}`, refused: "frame is not valid JSON"},
		{name: "hex", in: `{"type":"state","payload":0x10}`, refused: "frame is not valid JSON"},
		{name: "empty exponent", in: `{"type":"state","payload":1e}`, refused: "frame is not valid JSON"},
		{name: "raw newline in string", in: "{\"type\":\"hello\",\"token\":\"a\nb\"}", refused: "frame is not valid JSON"},
		{name: "raw tab in string", in: "{\"type\":\"hello\",\"token\":\"a\tb\"}", refused: "frame is not valid JSON"},
		{name: "bad escape", in: `{"type":"hello","token":"\x41"}`, refused: "frame is not valid JSON"},
		{name: "short unicode escape", in: `{"type":"hello","token":"\u12"}`, refused: "frame is not valid JSON"},
		{name: "unterminated", in: `{"type":"hello","token":"x`, refused: "frame is not valid JSON"},
		{name: "vertical tab whitespace", in: "\v{\"type\":\"hello\",\"token\":\"x\"}", refused: "frame is not valid JSON"},
		{name: "nbsp whitespace", in: "\u00a0{\"type\":\"hello\",\"token\":\"x\"}", refused: "frame is not valid JSON"},
		{name: "capital literal", in: `{"type":"state","payload":True}`, refused: "frame is not valid JSON"},
		{name: "invalid UTF-8", in: "{\"type\":\"hello\",\"token\":\"\xff\"}", refused: "frame is not valid UTF-8"},
		{name: "UTF-8 surrogate", in: "{\"type\":\"hello\",\"token\":\"\xed\xa0\x80\"}", refused: "frame is not valid UTF-8"},
		{name: "invalid UTF-8 in unknown key", in: "{\"type\":\"hello\",\"token\":\"x\",\"\xc3\":1}", refused: "frame is not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseJobFrame([]byte(tt.in))
			checkParse(t, tt.in, got, tt.want, err, tt.refused)
		})
	}
}

func TestParseWorkerFrame(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    WorkerFrame
		refused string
	}{
		{name: "hello-ack bare", in: `{"type":"hello-ack"}`, want: WorkerFrame{Type: TypeHelloAck}},
		{name: "hello-ack target", in: `{"type":"hello-ack","migration":{"id":"m1","side":"target"}}`, want: WorkerFrame{Type: TypeHelloAck, Migration: &MigrationRef{ID: "m1", Side: "target"}}},
		{name: "hello-ack migration extra keys", in: `{"type":"hello-ack","migration":{"side":"target","id":"m1","n":1e400}}`, want: WorkerFrame{Type: TypeHelloAck, Migration: &MigrationRef{ID: "m1", Side: "target"}}},
		{name: "hello-ack migration duplicate side", in: `{"type":"hello-ack","migration":{"id":"m","side":"source","side":"target"}}`, want: WorkerFrame{Type: TypeHelloAck, Migration: &MigrationRef{ID: "m", Side: "target"}}},
		{name: "hello-ack escaped side", in: `{"type":"hello-ack","migration":{"id":"m","side":"t\u0061rget"}}`, want: WorkerFrame{Type: TypeHelloAck, Migration: &MigrationRef{ID: "m", Side: "target"}}},
		{name: "hello-ack null migration", in: `{"type":"hello-ack","migration":null}`, refused: "migration: expected object, got null"},
		{name: "hello-ack array migration", in: `{"type":"hello-ack","migration":[]}`, refused: "migration: expected object, got array"},
		{name: "hello-ack source side", in: `{"type":"hello-ack","migration":{"id":"m","side":"source"}}`, refused: `migration.side: expected "target", got "source"`},
		{name: "hello-ack Target side", in: `{"type":"hello-ack","migration":{"id":"m","side":"Target"}}`, refused: `migration.side`},
		{name: "hello-ack missing side", in: `{"type":"hello-ack","migration":{"id":"m"}}`, refused: `migration.side: expected "target", got missing`},
		{name: "hello-ack missing id", in: `{"type":"hello-ack","migration":{"side":"target"}}`, refused: "migration.id: missing"},
		{name: "hello-ack number id", in: `{"type":"hello-ack","migration":{"id":1,"side":"target"}}`, refused: "migration.id: expected string, got number"},
		{name: "hello-ack Migration key ignored", in: `{"type":"hello-ack","Migration":{"id":1}}`, want: WorkerFrame{Type: TypeHelloAck}},

		{name: "get-state", in: `{"type":"get-state","migrationId":"m1"}`, want: WorkerFrame{Type: TypeGetState, MigrationID: "m1"}},
		{name: "get-state missing id", in: `{"type":"get-state"}`, refused: "migrationId: missing"},
		{name: "get-state migrationID key", in: `{"type":"get-state","migrationID":"m1"}`, refused: "migrationId: missing"},
		{name: "get-state null id", in: `{"type":"get-state","migrationId":null}`, refused: "migrationId: expected string, got null"},

		{name: "initial-state", in: `{"type":"initial-state","migrationId":"m","payload":{"pos":[1, 2]}}`, want: WorkerFrame{Type: TypeInitialState, MigrationID: "m", Payload: raw(`{"pos":[1, 2]}`)}},
		{name: "initial-state null payload", in: `{"type":"initial-state","migrationId":"m","payload":null}`, want: WorkerFrame{Type: TypeInitialState, MigrationID: "m", Payload: raw(`null`)}},
		{name: "initial-state missing payload", in: `{"type":"initial-state","migrationId":"m"}`, refused: "payload: missing"},
		{name: "initial-state missing id", in: `{"type":"initial-state","payload":1}`, refused: "migrationId: missing"},
		{name: "initial-state infinite payload", in: `{"type":"initial-state","migrationId":"m","payload":{"x":-1e400}}`, refused: "-1e400"},
		{name: "cutover-ready", in: `{"type":"cutover-ready","migrationId":"m","payload":"ready"}`, want: WorkerFrame{Type: TypeCutoverReady, MigrationID: "m", Payload: raw(`"ready"`)}},
		{name: "cutover-apply", in: `{"type":"cutover-apply","migrationId":"m","payload":{"pts":90000}}`, want: WorkerFrame{Type: TypeCutoverApply, MigrationID: "m", Payload: raw(`{"pts":90000}`)}},
		{name: "cutover-apply unknown key infinite", in: `{"type":"cutover-apply","migrationId":"m","payload":0,"junk":1e999}`, want: WorkerFrame{Type: TypeCutoverApply, MigrationID: "m", Payload: raw(`0`)}},

		{name: "abort", in: `{"type":"abort","migrationId":"m","reason":"timeout"}`, want: WorkerFrame{Type: TypeAbort, MigrationID: "m", Reason: "timeout"}},
		{name: "abort missing migrationId", in: `{"type":"abort","reason":"timeout"}`, refused: "migrationId: missing"},
		{name: "abort missing reason", in: `{"type":"abort","migrationId":"m"}`, refused: "reason: missing"},

		{name: "job type hello", in: `{"type":"hello","token":"x"}`, refused: `unknown type "hello" for worker→job`},
		{name: "job type state", in: `{"type":"state","payload":1}`, refused: `unknown type "state" for worker→job`},
		{name: "job type target-applied", in: `{"type":"target-applied"}`, refused: `unknown type "target-applied"`},
		{name: "array", in: `[]`, refused: "expected object, got array"},
		{name: "empty", in: ``, refused: "frame is not valid JSON"},
		{name: "BOM", in: "\uFEFF{\"type\":\"hello-ack\"}", refused: "frame is not valid JSON"},
		{name: "trailing garbage", in: `{"type":"hello-ack"}]`, refused: "frame is not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseWorkerFrame([]byte(tt.in))
			checkParse(t, tt.in, got, tt.want, err, tt.refused)
		})
	}
}

func checkParse[F any](t *testing.T, in string, got, want F, err error, refused string) {
	t.Helper()
	if refused != "" {
		if err == nil {
			t.Fatalf("parse(%q) accepted as %+v, want refusal containing %q", in, got, refused)
		}
		var fe *FrameError
		if !errors.As(err, &fe) {
			t.Fatalf("parse(%q) error %T %v, want *FrameError", in, err, err)
		}
		if !strings.Contains(fe.Reason, refused) {
			t.Errorf("parse(%q) reason %q, want it to contain %q", in, fe.Reason, refused)
		}
		checkReason(t, fe.Reason)
		var zero F
		if !reflect.DeepEqual(got, zero) {
			t.Errorf("parse(%q) refused but returned %+v, want the zero frame", in, got)
		}
		return
	}
	if err != nil {
		t.Fatalf("parse(%q) refused: %v", in, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parse(%q)\n got %#v\nwant %#v", in, got, want)
	}
}

// checkReason checks what a listener relies on to use a reason as a close
// reason.
func checkReason(t *testing.T, reason string) {
	t.Helper()
	if len(reason) > maxReasonBytes || !utf8.ValidString(reason) || reason == "" {
		t.Errorf("reason %q (%d bytes) is not a usable close reason", reason, len(reason))
	}
}

func TestRefusalReasonIsShort(t *testing.T) {
	long := strings.Repeat("é", 500)
	inputs := []string{
		`{"type":"` + long + `"}`,
		`{"type":"state","payload":1` + strings.Repeat("0", 500) + `}`,
		`{"type":"target-applied","skewMs":-` + strings.Repeat("9", 400) + `}`,
		`{"type":"hello-ack","migration":{"id":"m","side":"` + long + `"}}`,
	}
	for _, in := range inputs {
		_, err1 := ParseJobFrame([]byte(in))
		_, err2 := ParseWorkerFrame([]byte(in))
		for _, err := range []error{err1, err2} {
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("parse(%.40q...) = %v, want a *FrameError", in, err)
			}
			checkReason(t, fe.Reason)
		}
	}
}

func TestParseDoesNotAliasInput(t *testing.T) {
	buf := []byte(`{"type":"state","payload":[1,2]}`)
	f, err := ParseJobFrame(buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = ' '
	}
	if string(f.Payload) != `[1,2]` {
		t.Fatalf("payload changed with the input buffer: %q", f.Payload)
	}
}

func TestDeepNesting(t *testing.T) {
	// Deep nesting inside a frame-sized payload is fine, as in JSON.parse.
	depth := MaxFrameBytes/2 - 40
	payload := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	in := `{"type":"state","payload":` + payload + `}`
	if len(in) > MaxFrameBytes {
		t.Fatalf("test frame is %d bytes, over the cap", len(in))
	}
	f, err := ParseJobFrame([]byte(in))
	if err != nil {
		t.Fatalf("deep frame refused: %v", err)
	}
	if string(f.Payload) != payload {
		t.Fatal("deep payload not kept")
	}
	// Past maxDepth the parser refuses rather than exhausting the stack.
	huge := strings.Repeat("[", maxDepth+1)
	_, err = ParseJobFrame([]byte(huge))
	var fe *FrameError
	if !errors.As(err, &fe) || fe.Reason != "frame nests too deeply" {
		t.Fatalf("huge nesting: %v", err)
	}
}

func TestJobFrameMarshal(t *testing.T) {
	tests := []struct {
		name string
		in   JobFrame
		want string
	}{
		{"hello", JobFrame{Type: TypeHello, Token: "t", Reason: "ignored", Payload: raw(`1`)}, `{"type":"hello","token":"t"}`},
		{"hello escapes", JobFrame{Type: TypeHello, Token: "a\"\\\n\x01\u2028é/"}, `{"type":"hello","token":"a\"\\\n\u0001` + "\u2028é/" + `"}`},
		{"hello invalid UTF-8", JobFrame{Type: TypeHello, Token: "a\xffb"}, `{"type":"hello","token":"a` + "\uFFFD" + `b"}`},
		{"state nil payload", JobFrame{Type: TypeState}, `{"type":"state","payload":null}`},
		{"state empty payload", JobFrame{Type: TypeState, Payload: raw(``)}, `{"type":"state","payload":null}`},
		{"state payload verbatim", JobFrame{Type: TypeState, Payload: raw(`{"b":1,  "a":[1.50,2e3]}`)}, `{"type":"state","payload":{"b":1,  "a":[1.50,2e3]}}`},
		{"state-refused", JobFrame{Type: TypeStateRefused, Reason: "busy"}, `{"type":"state-refused","reason":"busy"}`},
		{"target-ready", JobFrame{Type: TypeTargetReady, Payload: raw(`"x"`)}, `{"type":"target-ready","payload":"x"}`},
		{"source-stopped-output", JobFrame{Type: TypeSourceStoppedOutput, Payload: raw(`7`)}, `{"type":"source-stopped-output","payload":7}`},
		{"target-applied bare", JobFrame{Type: TypeTargetApplied}, `{"type":"target-applied"}`},
		{"target-applied empty", JobFrame{Type: TypeTargetApplied, Applied: []string{}, Failed: []FailedApply{}}, `{"type":"target-applied","applied":[],"failed":[]}`},
		{"target-applied full", JobFrame{Type: TypeTargetApplied, Applied: []string{"a", "b"}, Failed: []FailedApply{{"c", "r"}, {"d", "s"}}, SkewMs: f64(2.5)},
			`{"type":"target-applied","applied":["a","b"],"failed":[{"id":"c","reason":"r"},{"id":"d","reason":"s"}],"skewMs":2.5}`},
		{"target-applied big skew", JobFrame{Type: TypeTargetApplied, SkewMs: f64(1e300)}, `{"type":"target-applied","skewMs":1e+300}`},
		{"target-applied negative zero", JobFrame{Type: TypeTargetApplied, SkewMs: f64(negZero())}, `{"type":"target-applied","skewMs":-0}`},
		{"abort", JobFrame{Type: TypeAbort, Reason: "r"}, `{"type":"abort","reason":"r"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("Marshal\n got %s\nwant %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Fatalf("Marshal produced invalid JSON %s", got)
			}
		})
	}
}

func negZero() float64 {
	z := 0.0
	return -z
}

func TestWorkerFrameMarshal(t *testing.T) {
	tests := []struct {
		name string
		in   WorkerFrame
		want string
	}{
		{"hello-ack", WorkerFrame{Type: TypeHelloAck, MigrationID: "ignored"}, `{"type":"hello-ack"}`},
		{"hello-ack target", WorkerFrame{Type: TypeHelloAck, Migration: &MigrationRef{ID: "m", Side: "target"}}, `{"type":"hello-ack","migration":{"id":"m","side":"target"}}`},
		{"get-state", WorkerFrame{Type: TypeGetState, MigrationID: "m", Payload: raw(`1`)}, `{"type":"get-state","migrationId":"m"}`},
		{"initial-state", WorkerFrame{Type: TypeInitialState, MigrationID: "m", Payload: raw(` [ 1 ] `)}, `{"type":"initial-state","migrationId":"m","payload": [ 1 ] }`},
		{"cutover-ready nil", WorkerFrame{Type: TypeCutoverReady, MigrationID: "m"}, `{"type":"cutover-ready","migrationId":"m","payload":null}`},
		{"cutover-apply", WorkerFrame{Type: TypeCutoverApply, MigrationID: "m", Payload: raw(`{"a":1}`)}, `{"type":"cutover-apply","migrationId":"m","payload":{"a":1}}`},
		{"abort", WorkerFrame{Type: TypeAbort, MigrationID: "m", Reason: "r"}, `{"type":"abort","migrationId":"m","reason":"r"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("Marshal\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestMarshalRefuses(t *testing.T) {
	jobs := []struct {
		name string
		in   JobFrame
		want string
	}{
		{"unknown type", JobFrame{Type: "hello-ack"}, `unknown type "hello-ack"`},
		{"empty type", JobFrame{}, `unknown type ""`},
		{"payload not JSON", JobFrame{Type: TypeState, Payload: raw(`{a}`)}, "payload is not valid JSON"},
		{"payload two values", JobFrame{Type: TypeState, Payload: raw(`1 2`)}, "payload is not valid JSON"},
		{"payload infinite", JobFrame{Type: TypeTargetReady, Payload: raw(`[1e400]`)}, "payload number 1e400 is not finite"},
		{"payload invalid UTF-8", JobFrame{Type: TypeSourceStoppedOutput, Payload: raw("\"\xff\"")}, "payload is not valid UTF-8"},
		{"skew infinite", JobFrame{Type: TypeTargetApplied, SkewMs: f64(inf())}, "skewMs must be finite"},
		{"skew NaN", JobFrame{Type: TypeTargetApplied, SkewMs: f64(nan())}, "skewMs must be finite"},
	}
	for _, tt := range jobs {
		t.Run("job "+tt.name, func(t *testing.T) {
			b, err := tt.in.Marshal()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Marshal = %s, %v; want error containing %q", b, err, tt.want)
			}
		})
	}
	workers := []struct {
		name string
		in   WorkerFrame
		want string
	}{
		{"unknown type", WorkerFrame{Type: TypeHello}, `unknown type "hello"`},
		{"source side", WorkerFrame{Type: TypeHelloAck, Migration: &MigrationRef{ID: "m", Side: "source"}}, `side must be "target"`},
		{"payload infinite", WorkerFrame{Type: TypeCutoverApply, Payload: raw(`-1e999`)}, "not finite"},
	}
	for _, tt := range workers {
		t.Run("worker "+tt.name, func(t *testing.T) {
			b, err := tt.in.Marshal()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Marshal = %s, %v; want error containing %q", b, err, tt.want)
			}
		})
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	jobs := []JobFrame{
		{Type: TypeHello, Token: "tøken \"quoted\" \u0000 \u2029"},
		{Type: TypeState, Payload: raw(`{"b":1,  "a":[1.50,2e3]}`)},
		{Type: TypeState, Payload: raw(`null`)},
		{Type: TypeStateRefused, Reason: "no\tthanks"},
		{Type: TypeTargetReady, Payload: raw(`"\ud800 kept as written"`)},
		{Type: TypeSourceStoppedOutput, Payload: raw(`{"pts":123456789012345678901234567890}`)},
		{Type: TypeTargetApplied},
		{Type: TypeTargetApplied, Applied: []string{}, Failed: []FailedApply{}},
		{Type: TypeTargetApplied, Applied: []string{"x"}, Failed: []FailedApply{{ID: "y", Reason: "z"}}, SkewMs: f64(-3.75e-9)},
		{Type: TypeTargetApplied, SkewMs: f64(1.7976931348623157e308)},
		{Type: TypeTargetApplied, SkewMs: f64(5e-324)},
		{Type: TypeAbort, Reason: ""},
	}
	for _, f := range jobs {
		marshalParsesBack(t, f, ParseJobFrame)
	}
	workers := []WorkerFrame{
		{Type: TypeHelloAck},
		{Type: TypeHelloAck, Migration: &MigrationRef{ID: "m-1", Side: "target"}},
		{Type: TypeGetState, MigrationID: "m"},
		{Type: TypeInitialState, MigrationID: "m", Payload: raw(`{"b":1,  "a":[1.50,2e3]}`)},
		{Type: TypeCutoverReady, MigrationID: "m", Payload: raw(`[]`)},
		{Type: TypeCutoverApply, MigrationID: "m", Payload: raw(`{"__proto__":1e400}`)},
		{Type: TypeAbort, MigrationID: "m", Reason: "timed out"},
	}
	for _, f := range workers {
		marshalParsesBack(t, f, ParseWorkerFrame)
	}
}

// marshalParsesBack checks that f marshals and parses back to f.
func marshalParsesBack[F interface{ Marshal() ([]byte, error) }](t *testing.T, f F, parse func([]byte) (F, error)) {
	t.Helper()
	b, err := f.Marshal()
	if err != nil {
		t.Fatalf("Marshal(%+v): %v", f, err)
	}
	got, err := parse(b)
	if err != nil {
		t.Fatalf("parse(%s): %v", b, err)
	}
	if !reflect.DeepEqual(got, f) {
		t.Errorf("round trip of %s\n got %#v\nwant %#v", b, got, f)
	}
}

func inf() float64 { return math.Inf(1) }
func nan() float64 { return math.NaN() }
