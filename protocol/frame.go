package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Directions, as they appear in refusal reasons.
const (
	dirJobToWorker = "job→worker"
	dirWorkerToJob = "worker→job"
)

var jobFrameTypes = map[string]bool{
	TypeHello: true, TypeState: true, TypeStateRefused: true, TypeTargetReady: true,
	TypeSourceStoppedOutput: true, TypeTargetApplied: true, TypeAbort: true,
}

var workerFrameTypes = map[string]bool{
	TypeHelloAck: true, TypeGetState: true, TypeInitialState: true, TypeCutoverReady: true,
	TypeCutoverApply: true, TypeAbort: true,
}

// ParseJobFrame judges a text frame a job sent, as the worker does. It accepts
// exactly what the reference's parseJobToWorkerFrame accepts; every refusal
// is a *FrameError. Unknown members are dropped, a duplicated member keeps its
// last value, and Payload holds a copy of the payload's exact bytes.
func ParseJobFrame(data []byte) (JobFrame, error) {
	root, typ, err := parseEnvelope(data, jobFrameTypes, dirJobToWorker)
	if err != nil {
		return JobFrame{}, err
	}
	f := JobFrame{Type: typ}
	switch typ {
	case TypeHello:
		f.Token, err = requiredString(root, "token")
	case TypeState, TypeTargetReady, TypeSourceStoppedOutput:
		f.Payload, err = requiredPayload(root)
	case TypeStateRefused, TypeAbort:
		f.Reason, err = requiredString(root, "reason")
	case TypeTargetApplied:
		f.Applied, f.Failed, f.SkewMs, err = targetApplied(root)
	}
	if err != nil {
		return JobFrame{}, err
	}
	return f, nil
}

// ParseWorkerFrame judges a text frame a worker sent, as the job-side client
// does. It accepts exactly what the reference's parseWorkerToJobFrame
// accepts; every refusal is a *FrameError.
func ParseWorkerFrame(data []byte) (WorkerFrame, error) {
	root, typ, err := parseEnvelope(data, workerFrameTypes, dirWorkerToJob)
	if err != nil {
		return WorkerFrame{}, err
	}
	f := WorkerFrame{Type: typ}
	switch typ {
	case TypeHelloAck:
		f.Migration, err = migrationRef(root)
	case TypeGetState:
		f.MigrationID, err = requiredString(root, "migrationId")
	case TypeInitialState, TypeCutoverReady, TypeCutoverApply:
		if f.MigrationID, err = requiredString(root, "migrationId"); err == nil {
			f.Payload, err = requiredPayload(root)
		}
	case TypeAbort:
		if f.MigrationID, err = requiredString(root, "migrationId"); err == nil {
			f.Reason, err = requiredString(root, "reason")
		}
	}
	if err != nil {
		return WorkerFrame{}, err
	}
	return f, nil
}

// parseEnvelope reads the frame as JSON and checks what every frame needs: an
// object whose "type" names a frame of this direction.
func parseEnvelope(data []byte, types map[string]bool, dir string) (*value, string, error) {
	root, err := parseJSON(data)
	switch {
	case errors.Is(err, errUTF8):
		return nil, "", frameErr("frame is not valid UTF-8")
	case errors.Is(err, errTooDeep):
		return nil, "", frameErr("frame nests too deeply")
	case err != nil:
		return nil, "", frameErr("frame is not valid JSON")
	}
	if root.kind != kindObject {
		return nil, "", frameErr("invalid frame: expected object, got " + root.kind.String())
	}
	t := root.field("type")
	if t == nil {
		return nil, "", frameErr("invalid frame: type: missing")
	}
	if t.kind != kindString {
		return nil, "", frameErr("invalid frame: type: expected string, got " + t.kind.String())
	}
	if !types[t.str] {
		return nil, "", frameErr(fmt.Sprintf("invalid frame: unknown type %s for %s", quoteShort(t.str), dir))
	}
	return root, t.str, nil
}

func requiredString(obj *value, key string) (string, error) {
	return stringAt(obj.field(key), key)
}

func stringAt(v *value, path string) (string, error) {
	if v == nil {
		return "", frameErr("invalid frame: " + path + ": missing, expected string")
	}
	if v.kind != kindString {
		return "", frameErr("invalid frame: " + path + ": expected string, got " + v.kind.String())
	}
	return v.str, nil
}

func requiredPayload(obj *value) (json.RawMessage, error) {
	v := obj.field("payload")
	if v == nil {
		return nil, frameErr("invalid frame: payload: missing")
	}
	if v.bad != nil {
		return nil, frameErr("invalid frame: payload: number " + string(v.bad) + " is not finite")
	}
	// Copy: the caller may reuse the frame buffer, and the payload outlives it.
	return append(json.RawMessage(nil), v.raw...), nil
}

func targetApplied(root *value) (applied []string, failed []FailedApply, skew *float64, err error) {
	if v := root.field("applied"); v != nil {
		if v.kind != kindArray {
			return nil, nil, nil, frameErr("invalid frame: applied: expected array, got " + v.kind.String())
		}
		applied = make([]string, len(v.elems))
		for i, e := range v.elems {
			if applied[i], err = stringAt(e, "applied["+strconv.Itoa(i)+"]"); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	if v := root.field("failed"); v != nil {
		if v.kind != kindArray {
			return nil, nil, nil, frameErr("invalid frame: failed: expected array, got " + v.kind.String())
		}
		failed = make([]FailedApply, len(v.elems))
		for i, e := range v.elems {
			at := "failed[" + strconv.Itoa(i) + "]"
			if e.kind != kindObject {
				return nil, nil, nil, frameErr("invalid frame: " + at + ": expected object, got " + e.kind.String())
			}
			if failed[i].ID, err = stringAt(e.field("id"), at+".id"); err != nil {
				return nil, nil, nil, err
			}
			if failed[i].Reason, err = stringAt(e.field("reason"), at+".reason"); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	if v := root.field("skewMs"); v != nil {
		if v.kind != kindNumber {
			return nil, nil, nil, frameErr("invalid frame: skewMs: expected number, got " + v.kind.String())
		}
		if v.bad != nil {
			return nil, nil, nil, frameErr("invalid frame: skewMs: number " + string(v.bad) + " is not finite")
		}
		n := v.num
		skew = &n
	}
	return applied, failed, skew, nil
}

func migrationRef(root *value) (*MigrationRef, error) {
	v := root.field("migration")
	if v == nil {
		return nil, nil
	}
	if v.kind != kindObject {
		return nil, frameErr("invalid frame: migration: expected object, got " + v.kind.String())
	}
	id, err := stringAt(v.field("id"), "migration.id")
	if err != nil {
		return nil, err
	}
	side := v.field("side")
	if side == nil || side.kind != kindString || side.str != "target" {
		got := "missing"
		if side != nil {
			got = side.kind.String()
			if side.kind == kindString {
				got = quoteShort(side.str)
			}
		}
		return nil, frameErr(`invalid frame: migration.side: expected "target", got ` + got)
	}
	return &MigrationRef{ID: id, Side: side.str}, nil
}

// quoteShort quotes a value from the frame for a refusal reason, cut short
// first: the reason must fit a close frame whatever the frame contained.
func quoteShort(s string) string {
	return strconv.Quote(Truncate(s, 40))
}

// Marshal encodes the frame with exactly the members of its Type, "type"
// first, in the reference's field order. A nil Payload is written as null;
// any other Payload is copied verbatim and must be one JSON value whose
// numbers are all finite (what ParseJobFrame would accept), and SkewMs must be
// finite, so that the worker never refuses what Marshal produced. Optional
// target-applied members are omitted when nil. Strings are written as
// JSON.stringify writes them; invalid UTF-8 in a string becomes U+FFFD.
func (f JobFrame) Marshal() ([]byte, error) {
	b := appendType(make([]byte, 0, 64+len(f.Payload)), f.Type)
	var err error
	switch f.Type {
	case TypeHello:
		b = appendStringMember(b, "token", f.Token)
	case TypeState, TypeTargetReady, TypeSourceStoppedOutput:
		b, err = appendPayload(b, f.Payload)
	case TypeStateRefused, TypeAbort:
		b = appendStringMember(b, "reason", f.Reason)
	case TypeTargetApplied:
		if f.Applied != nil {
			b = append(b, `,"applied":[`...)
			for i, s := range f.Applied {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendString(b, s)
			}
			b = append(b, ']')
		}
		if f.Failed != nil {
			b = append(b, `,"failed":[`...)
			for i, x := range f.Failed {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"id":`...)
				b = appendString(b, x.ID)
				b = appendStringMember(b, "reason", x.Reason)
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		if f.SkewMs != nil {
			if math.IsInf(*f.SkewMs, 0) || math.IsNaN(*f.SkewMs) {
				return nil, fmt.Errorf("marshal %s frame: skewMs must be finite, got %v", f.Type, *f.SkewMs)
			}
			b = append(b, `,"skewMs":`...)
			b = appendNumber(b, *f.SkewMs)
		}
	default:
		return nil, fmt.Errorf("marshal job frame: unknown type %q for %s", f.Type, dirJobToWorker)
	}
	if err != nil {
		return nil, fmt.Errorf("marshal %s frame: %w", f.Type, err)
	}
	return append(b, '}'), nil
}

// Marshal encodes the frame with exactly the members of its Type, like
// JobFrame.Marshal. A hello-ack's Migration is omitted when nil and, when
// set, must have Side "target".
func (f WorkerFrame) Marshal() ([]byte, error) {
	b := appendType(make([]byte, 0, 96+len(f.Payload)), f.Type)
	var err error
	switch f.Type {
	case TypeHelloAck:
		if m := f.Migration; m != nil {
			if m.Side != "target" {
				return nil, fmt.Errorf("marshal %s frame: migration side must be \"target\", got %q", f.Type, m.Side)
			}
			b = append(b, `,"migration":{"id":`...)
			b = appendString(b, m.ID)
			b = appendStringMember(b, "side", m.Side)
			b = append(b, '}')
		}
	case TypeGetState:
		b = appendStringMember(b, "migrationId", f.MigrationID)
	case TypeInitialState, TypeCutoverReady, TypeCutoverApply:
		b = appendStringMember(b, "migrationId", f.MigrationID)
		b, err = appendPayload(b, f.Payload)
	case TypeAbort:
		b = appendStringMember(b, "migrationId", f.MigrationID)
		b = appendStringMember(b, "reason", f.Reason)
	default:
		return nil, fmt.Errorf("marshal worker frame: unknown type %q for %s", f.Type, dirWorkerToJob)
	}
	if err != nil {
		return nil, fmt.Errorf("marshal %s frame: %w", f.Type, err)
	}
	return append(b, '}'), nil
}

func appendType(b []byte, typ string) []byte {
	b = append(b, `{"type":`...)
	return appendString(b, typ)
}

func appendStringMember(b []byte, key, s string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendString(b, s)
}

func appendPayload(b []byte, p json.RawMessage) ([]byte, error) {
	b = append(b, `,"payload":`...)
	if len(p) == 0 {
		return append(b, "null"...), nil
	}
	if err := checkPayload(p); err != nil {
		return nil, err
	}
	return append(b, p...), nil
}

// checkPayload reports whether p is something a frame may carry as its
// payload: one JSON value, valid UTF-8, every number z.json() reads finite.
func checkPayload(p []byte) error {
	v, err := parseJSON(p)
	if err != nil {
		return fmt.Errorf("payload is %w", err)
	}
	if v.bad != nil {
		return fmt.Errorf("payload number %s is not finite", Truncate(string(v.bad), 40))
	}
	return nil
}

// appendNumber writes a finite f in the shortest form that reads back to the
// same float64: plain digits for magnitudes in [1e-7, 1e21), as
// JSON.stringify does, and exponent form outside that range.
func appendNumber(b []byte, f float64) []byte {
	if f == 0 {
		// JSON.stringify(-0) says "0", but JSON.parse("-0") is -0: keep the
		// sign so a frame survives Marshal and parse unchanged.
		if math.Signbit(f) {
			return append(b, '-', '0')
		}
		return append(b, '0')
	}
	if abs := math.Abs(f); abs >= 1e-7 && abs < 1e21 {
		return strconv.AppendFloat(b, f, 'f', -1, 64)
	}
	return strconv.AppendFloat(b, f, 'e', -1, 64)
}
