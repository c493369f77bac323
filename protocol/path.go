package protocol

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

const pathPrefix = "/instances/"

// Path returns the socket path for an instance, "/instances/<jobID>/<role>",
// each segment encoded exactly as JavaScript's encodeURIComponent encodes it
// (url.PathEscape does not: it leaves sub-delimiters such as "$", "&" and ":"
// alone). role is the instance key, unique per migration target; jobID stays
// the same across a migration.
//
// encodeURIComponent throws on a lone surrogate; the Go counterpart, a string
// that is not valid UTF-8, has its stray bytes percent-encoded one by one, so
// the resulting path is one ParsePath refuses rather than one that names a
// different instance.
func Path(jobID, role string) string {
	var b strings.Builder
	b.Grow(len(pathPrefix) + 1 + 3*(len(jobID)+len(role)))
	b.WriteString(pathPrefix)
	encodeURIComponent(&b, jobID)
	b.WriteByte('/')
	encodeURIComponent(&b, role)
	return b.String()
}

// URL returns the full socket URL a job is given in EnvURL:
// "ws://host:port" followed by Path. host is used as is, as the reference
// does: an IPv6 literal must come with its brackets.
func URL(host string, port int, jobID, role string) string {
	return "ws://" + host + ":" + strconv.Itoa(port) + Path(jobID, role)
}

// ParsePath is the exact inverse of Path, and accepts exactly the paths the
// reference's parseJobSocketPath accepts: "/instances/" followed by two
// non-empty segments that contain no "/", "?" or "#", then at most one "/",
// then optionally a query string or fragment, which is ignored (but, like
// the reference's regular expression, may not contain a line terminator).
// Each segment must percent-decode as decodeURIComponent does: every "%" starts
// a two-hex-digit escape, and the escapes decode to valid UTF-8. Anything else
// is no path at all (ok is false).
//
// Pass the raw request target (http.Request.RequestURI or URL.EscapedPath),
// not URL.Path: Go has already decoded URL.Path, which turns an encoded "/"
// inside a segment into a segment boundary.
func ParsePath(path string) (jobID, role string, ok bool) {
	// The reference sees a JavaScript string, which cannot hold invalid
	// UTF-8; refuse it rather than pass stray bytes into an instance name.
	if !utf8.ValidString(path) {
		return "", "", false
	}
	rest, found := strings.CutPrefix(path, pathPrefix)
	if !found {
		return "", "", false
	}
	seg1, rest := cutSegment(rest)
	if seg1 == "" || !strings.HasPrefix(rest, "/") {
		return "", "", false
	}
	seg2, rest := cutSegment(rest[1:])
	if seg2 == "" {
		return "", "", false
	}
	rest = strings.TrimPrefix(rest, "/")
	if rest != "" {
		if rest[0] != '?' && rest[0] != '#' {
			return "", "", false
		}
		// The reference's ".*$" cannot cross a line terminator.
		if strings.ContainsAny(rest, "\n\r\u2028\u2029") {
			return "", "", false
		}
	}
	jobID, ok1 := decodeURIComponent(seg1)
	role, ok2 := decodeURIComponent(seg2)
	if !ok1 || !ok2 {
		return "", "", false
	}
	return jobID, role, true
}

// cutSegment splits s before its first "/", "?" or "#".
func cutSegment(s string) (seg, rest string) {
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

// uriUnreserved reports the characters encodeURIComponent leaves alone.
func uriUnreserved(c byte) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-_.!~*'()", c) >= 0
}

func encodeURIComponent(b *strings.Builder, s string) {
	const hexdigits = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if uriUnreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&0xF])
	}
}

// decodeURIComponent decodes every %XX escape (including reserved characters
// such as %2F, which decodeURI would leave encoded) and refuses a malformed
// escape or escapes that do not form valid UTF-8. s itself is valid UTF-8, so
// checking the decoded bytes as a whole is the same as the reference's check
// of each escaped sequence: an unescaped character can neither complete nor
// be completed by an escaped one.
func decodeURIComponent(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 {
		return s, true
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			out = append(out, c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, lo := unhex(s[i+1]), unhex(s[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		out = append(out, byte(hi<<4|lo))
		i += 2
	}
	if !utf8.Valid(out) {
		return "", false
	}
	return string(out), true
}
