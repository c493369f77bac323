package protocol

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestAgainstJavaScriptReference judges thousands of generated frames and
// paths both here and in Node (testdata/reference_oracle.js), where
// JSON.parse, the reference's path RegExp, decodeURIComponent and
// encodeURIComponent are the real thing, and fails on any disagreement. It
// needs node on PATH and skips without it.
func TestAgainstJavaScriptReference(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not on PATH: skipping the differential check against JavaScript")
	}
	if testing.Short() {
		t.Skip("differential check skipped in -short mode")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var in bytes.Buffer
	n := 0
	emit := func(kind string, input []byte, verdict any) {
		line, err := json.Marshal(map[string]any{
			"kind":  kind,
			"input": base64.StdEncoding.EncodeToString(input),
			"go":    verdict,
		})
		if err != nil {
			t.Fatal(err)
		}
		in.Write(line)
		in.WriteByte('\n')
		n++
	}
	for range 6000 {
		data := genFrame(rng)
		fj, errJ := ParseJobFrame(data)
		emit("job", data, jobVerdict(fj, errJ))
		fw, errW := ParseWorkerFrame(data)
		emit("worker", data, workerVerdict(fw, errW))
	}
	for range 4000 {
		p := genPath(rng)
		if !isJSString(p) {
			continue
		}
		j, r, ok := ParsePath(p)
		emit("path", []byte(p), map[string]any{"ok": ok, "jobId": j, "role": r})
	}
	for range 1000 {
		j, r := genName(rng), genName(rng)
		pair, _ := json.Marshal([]string{j, r})
		emit("encode", pair, map[string]any{"path": Path(j, r)})
	}

	cmd := exec.Command(node, "testdata/reference_oracle.js")
	cmd.Stdin = &in
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node oracle: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	mismatches := 0
	done := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "checked ") {
			done = line == fmt.Sprintf("checked %d", n)
			continue
		}
		mismatches++
		if mismatches <= 20 {
			t.Errorf("disagrees with JavaScript: %s", line)
		}
	}
	if mismatches > 20 {
		t.Errorf("... %d disagreements in all", mismatches)
	}
	if !done {
		t.Fatalf("oracle did not check all %d cases:\n%s", n, out)
	}
}

// isJSString reports whether p can be a JavaScript string (valid UTF-8);
// ParsePath's refusal of anything else is tested on its own.
func isJSString(p string) bool { return strings.ToValidUTF8(p, "\x00\x00") == p }

func jobVerdict(f JobFrame, err error) map[string]any {
	if err != nil {
		return map[string]any{"ok": false}
	}
	return map[string]any{"ok": true, "frame": map[string]any{
		"type": f.Type, "token": f.Token, "reason": f.Reason, "payload": string(f.Payload),
		"applied": f.Applied, "failed": f.Failed, "skewMs": f.SkewMs,
	}}
}

func workerVerdict(f WorkerFrame, err error) map[string]any {
	if err != nil {
		return map[string]any{"ok": false}
	}
	return map[string]any{"ok": true, "frame": map[string]any{
		"type": f.Type, "migrationId": f.MigrationID, "reason": f.Reason, "payload": string(f.Payload),
		"migration": f.Migration,
	}}
}

// genFrame builds a frame that is mostly valid for one of the two directions
// (so that acceptance is exercised as much as refusal), with values and
// damage chosen to hit the rules that trip parsers.
func genFrame(rng *rand.Rand) []byte {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	scalar := func() string {
		return pick(`"s"`, `""`, `"\ud800"`, `"\ud83d\ude00"`, `"a\"b\\n"`, `"nøkkel"`, `0`, `-0`, `1.5`, `2e3`,
			`1e400`, `-1e400`, `1e-400`, `1.7976931348623157e308`, `1.7976931348623159e308`, `true`, `false`, `null`,
			`"target"`, `"source"`, `"Target"`, `[]`, `{}`)
	}
	str := func() string {
		if rng.IntN(6) == 0 {
			return scalar()
		}
		return pick(`"m1"`, `""`, `"\ud800x"`, `"t\u0061rget"`, `"target"`, `"ø"`, `"a\nb"`)
	}
	var payload func(depth int) string
	payload = func(depth int) string {
		switch k := rng.IntN(10); {
		case k < 5 || depth > 3:
			return scalar()
		case k < 7:
			parts := make([]string, rng.IntN(4))
			for i := range parts {
				parts[i] = payload(depth + 1)
			}
			return "[" + strings.Join(parts, ",") + "]"
		default:
			parts := make([]string, rng.IntN(4))
			for i := range parts {
				parts[i] = pick(`"a"`, `"b"`, `"__proto__"`, `"\u005f_proto__"`, `"__proto_"`, `"constructor"`) + ":" + payload(depth+1)
			}
			if len(parts) > 0 && rng.IntN(3) == 0 {
				parts = append(parts, parts[0])
			}
			rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
			return "{" + strings.Join(parts, ",") + "}"
		}
	}
	list := func(item func() string) string {
		if rng.IntN(8) == 0 {
			return scalar()
		}
		parts := make([]string, rng.IntN(3))
		for i := range parts {
			parts[i] = item()
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	object := func(fields ...string) string {
		if rng.IntN(8) == 0 {
			return scalar()
		}
		var parts []string
		for _, f := range fields {
			if rng.IntN(8) > 0 {
				v := str()
				if f == "side" && rng.IntN(2) == 0 {
					v = `"target"`
				}
				parts = append(parts, `"`+f+`":`+v)
			}
		}
		if rng.IntN(3) == 0 {
			parts = append(parts, pick(`"ID":1`, `"x":1e400`, `"side":"source"`, `"id":null`))
		}
		rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		return "{" + strings.Join(parts, ",") + "}"
	}
	fields := map[string]func() string{
		"token": str, "reason": str, "migrationId": str,
		"payload": func() string { return payload(0) },
		"applied": func() string { return list(str) },
		"failed":  func() string { return list(func() string { return object("id", "reason") }) },
		"skewMs":  func() string { return pick(`1.5`, `0`, `-1e-400`, `1e400`, `null`, `"1"`, `-2e10`) },
		"migration": func() string {
			return object("id", "side")
		},
	}
	schemas := map[string][]string{
		"hello": {"token"}, "state": {"payload"}, "state-refused": {"reason"}, "target-ready": {"payload"},
		"source-stopped-output": {"payload"}, "target-applied": {"applied", "failed", "skewMs"},
		"abort": {"migrationId", "reason"}, "hello-ack": {"migration"}, "get-state": {"migrationId"},
		"initial-state": {"migrationId", "payload"}, "cutover-ready": {"migrationId", "payload"},
		"cutover-apply": {"migrationId", "payload"},
	}
	typ := pick("hello", "state", "state-refused", "target-ready", "source-stopped-output", "target-applied",
		"abort", "hello-ack", "get-state", "initial-state", "cutover-ready", "cutover-apply")
	var members []string
	switch rng.IntN(12) {
	case 0:
		members = append(members, `"type":`+pick(`"Hello"`, `"foo"`, `1`, `null`, `["hello"]`, `"__proto__"`, `"toString"`))
	case 1:
		// no type
	case 2:
		members = append(members, `"t\u0079pe":"`+typ+`"`)
	default:
		members = append(members, `"type":"`+typ+`"`)
	}
	for _, f := range schemas[typ] {
		if rng.IntN(10) > 0 {
			members = append(members, `"`+f+`":`+fields[f]())
		}
	}
	for range rng.IntN(3) {
		k := pick("token", "payload", "reason", "applied", "failed", "skewMs", "migration", "migrationId",
			"Token", "Payload", "migrationID", "__proto__", "extra", "constructor", "type")
		v := scalar()
		if gen, ok := fields[k]; ok && rng.IntN(2) == 0 {
			v = gen()
		}
		members = append(members, `"`+k+`":`+v)
	}
	if rng.IntN(3) == 0 && len(members) > 0 {
		members = append(members, members[rng.IntN(len(members))]) // duplicate
	}
	rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	ws := func() string { return pick("", "", "", "", " ", "\n\t", "\r", "\v", "\u00a0") }
	s := ws() + "{" + strings.Join(members, ","+ws()) + "}" + ws()
	switch rng.IntN(16) {
	case 0:
		s = "[" + s + "]"
	case 1:
		s = "\uFEFF" + s
	case 2:
		s += pick("x", "}", " {}", "//")
	case 3:
		s = strings.Replace(s, "}", ",}", 1)
	case 4:
		i := rng.IntN(len(s))
		s = s[:i] + s[i+1:]
	case 5:
		const junk = "\"\\{}[],:0e-+\xff\x01"
		i := rng.IntN(len(s))
		s = s[:i] + string(junk[rng.IntN(len(junk))]) + s[i:]
	}
	return []byte(s)
}

func genPath(rng *rand.Rand) string {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	seg := func() string {
		var b strings.Builder
		for range rng.IntN(3) + rng.IntN(2) {
			b.WriteString(pick("a", "job", "a", "job-1", "%41", "key~2", "%", "%2F", "%2f", "%20", "%C3%B8", "%C3", "%E0%A4%A", "%ED%A0%80",
				"%F0%9F%98%80", "%zz", "ø", "+", " ", "%00", ".", "\n", "%c3%B8", "%C0%AF", "%F4%90%80%80"))
		}
		return b.String()
	}
	prefix := pick("/instances/", "/instances/", "/instances/", "/instances", "instances/", "//instances/", "/Instances/")
	tail := pick("", "", "/", "//", "?x", "#y", "/?q=1&r=/s", "?a\nb", "#\r", "?\u2028", "/c", "?", "/#")
	parts := []string{seg()}
	for range rng.IntN(3) + rng.IntN(2) {
		parts = append(parts, seg())
	}
	return prefix + strings.Join(parts, "/") + tail
}

func genName(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(6) {
		switch rng.IntN(4) {
		case 0:
			b.WriteByte(byte(rng.IntN(0x80)))
		case 1:
			b.WriteRune(rune(0x80 + rng.IntN(0x800)))
		case 2:
			b.WriteRune([]rune("😀ø€\u2028\uFFFF")[rng.IntN(5)])
		default:
			const punct = "-_.!~*'()$&+,:;=?@#[]%/ "
			b.WriteByte(punct[rng.IntN(len(punct))])
		}
	}
	return b.String()
}
