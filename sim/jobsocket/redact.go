package jobsocket

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/normsim/normsim/protocol"
)

// redactTokens returns a frame as the frame records keep it: the value
// of every top-level "token" key (any case: a job that misspells
// the key still sent its secret; any spelling: "tok\u0065n" is the key
// the parser reads as token) replaced by "<redacted>". It scans rather
// than parses, so a frame that is not valid JSON, or is cut short, is
// redacted too. A frame whose top level is not an object (a hello sent in
// an array) has its token keys redacted at any depth, and one that is not
// valid JSON also every value written after a token key in any other way
// (token=…, 'token': …), a payload's included: the job meant a secret
// there, and a broken frame has no payload of its own to keep. Frames
// without such a key are returned as they are.
func redactTokens(data []byte) []byte {
	if !bytes.Contains(bytes.ToLower(data), []byte(`token`)) && !bytes.Contains(data, []byte(`\`)) {
		return data
	}
	out := redactTokenKeys(data, !topLevelObject(data))
	if !json.Valid(data) {
		out = redactLoose(out)
	}
	return out
}

// redactReason returns a close reason the job wrote as the events keep
// it: its instance's token, wherever it stands in the text, and the value
// after any token key (token=…, {"token": …}) replaced by "<redacted>".
// A job that echoes its token while it closes has sent its secret as
// surely as in a frame.
func redactReason(reason, token string) string {
	if token != "" && strings.Contains(reason, token) {
		reason = strings.ReplaceAll(reason, token, "<redacted>")
	}
	if !strings.Contains(strings.ToLower(reason), "token") {
		return reason
	}
	return string(redactLoose([]byte(reason)))
}

// redactFrameReasons redacts the text a job wrote in a frame (an abort's
// reason, a state refusal's, a target's applied and failed items, their
// ids and reasons) as a close reason is: it goes on to the migration's
// record, its result, judgement and timeline and the other side's abort,
// which must not carry the job's secret either.
func redactFrameReasons(f *protocol.JobFrame, token string) {
	f.Reason = redactReason(f.Reason, token)
	for i := range f.Applied {
		f.Applied[i] = redactReason(f.Applied[i], token)
	}
	for i := range f.Failed {
		f.Failed[i].ID = redactReason(f.Failed[i].ID, token)
		f.Failed[i].Reason = redactReason(f.Failed[i].Reason, token)
	}
}

// topLevelObject reports whether data's first value is an object.
func topLevelObject(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n\ufeff")
	return len(t) > 0 && t[0] == '{'
}

// looseTokenKey finds a token key written any way a job might, a value
// after it: quoted or not, then ':' or '='.
var looseTokenKey = regexp.MustCompile(`(?i)["']?\btoken\b["']?\s*[:=]\s*`)

// redactLoose redacts the value after every loose token key: a quoted
// string to its closing quote, an array or object whole, or a bare word
// up to a separator.
func redactLoose(data []byte) []byte {
	var out []byte
	last := 0
	for _, m := range looseTokenKey.FindAllIndex(data, -1) {
		j := m[1]
		if j < last || j >= len(data) || bytes.HasPrefix(data[j:], []byte("null")) {
			continue
		}
		var end int
		switch data[j] {
		case '"', '[', '{':
			end = valueEnd(data, j)
		case '\'':
			end = len(data)
			if k := bytes.IndexByte(data[j+1:], '\''); k >= 0 {
				end = j + 1 + k + 1
			}
		default:
			end = j
			for end < len(data) && !bytes.ContainsRune([]byte(",;&}]) \t\r\n"), rune(data[end])) {
				end++
			}
		}
		if bytes.Equal(data[j:end], []byte(`"<redacted>"`)) {
			continue
		}
		out = append(out, data[last:j]...)
		out = append(out, `"<redacted>"`...)
		last = end
	}
	if out == nil {
		return data
	}
	return append(out, data[last:]...)
}

// redactTokenKeys redacts the value of each "token" key of the top-level
// object, or at any depth with anyDepth.
func redactTokenKeys(data []byte, anyDepth bool) []byte {
	var out []byte
	depth, last := 0, 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			end := stringEnd(data, i)
			if (depth == 1 || anyDepth && depth > 1) && isTokenKey(data[i:min(end+1, len(data))]) {
				// Skip to the value: spaces, a colon, spaces.
				j := end + 1
				for j < len(data) && (data[j] == ' ' || data[j] == '\t' || data[j] == '\n' || data[j] == '\r' || data[j] == ':') {
					j++
				}
				if j < len(data) && !bytes.HasPrefix(data[j:], []byte("null")) {
					// Whatever the value is: a token sent as an array or
					// an object is refused by the parser, but still sent.
					out = append(out, data[last:j]...)
					out = append(out, `"<redacted>"`...)
					last = valueEnd(data, j)
					i = last - 1
					continue
				}
			}
			i = end
		}
	}
	if out == nil {
		return data
	}
	return append(out, data[last:]...)
}

// valueEnd is the index just past the JSON value that begins at
// data[start] (a string, an array or object with everything in it, or a
// scalar), or len(data) when it is cut short.
func valueEnd(data []byte, start int) int {
	switch data[start] {
	case '"':
		return min(stringEnd(data, start)+1, len(data))
	case '[', '{':
		depth := 0
		for i := start; i < len(data); i++ {
			switch data[i] {
			case '[', '{':
				depth++
			case ']', '}':
				if depth--; depth == 0 {
					return i + 1
				}
			case '"':
				i = stringEnd(data, i)
			}
		}
		return len(data)
	}
	i := start
	for i < len(data) && !bytes.ContainsRune([]byte(",}] \t\r\n"), rune(data[i])) {
		i++
	}
	return max(i, start+1)
}

// stringEnd is the index of the quote closing the JSON string that opens
// at data[start], or len(data) when it is never closed.
func stringEnd(data []byte, start int) int {
	for i := start + 1; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(data)
}

// isTokenKey says whether the quoted JSON string q is the key "token" in
// any case, its escapes decoded as the frame parser decodes them.
func isTokenKey(q []byte) bool {
	if !bytes.Contains(q, []byte(`\`)) {
		return len(q) >= 2 && strings.EqualFold(string(q[1:len(q)-1]), "token")
	}
	var key string
	if err := json.Unmarshal(q, &key); err != nil {
		return false
	}
	return strings.EqualFold(key, "token")
}
