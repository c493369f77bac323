package template

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// leastNodes is a lower bound of the YAML nodes content holds, read from
// its text without parsing it. The parser builds every node of a file
// before the bounds can be judged: an 8 MiB flow list of 4 million
// entries took 13 s and 1.4 GB to be refused as "more than 10000 nodes".
// A file whose text alone proves it past the bound is refused before that.
//
// It counts only what is certainly a distinct node: a block sequence
// entry ("- " where a value begins), a block mapping key (the first ": "
// of a line: a plain scalar cannot hold one), a flow collection ("[" or
// "{" where a value begins, after an anchor or tag if any) and each ","
// in one. Quoted scalars, comments, block scalars' text and the lines
// that may continue a plain scalar are skipped; anything it does not
// follow counts as nothing, so the bound is never too high.
func leastNodes(content []byte) int64 {
	content = asUTF8(content)
	var n int64
	flow := 0                        // flow collections open
	var quote byte                   // ' or " inside a quoted scalar, which may span lines
	inBlock, blockIndent := false, 0 // in a block scalar's text: lines more indented than this
	// A plain scalar left open at a line's end may go on in the lines
	// below: those more indented than the line holding its key or entry,
	// or any line when it is a document of its own.
	open, openIndent, openTop := false, 0, false
	for len(content) > 0 {
		line := content
		if end, next := lineBreak(content); end >= 0 {
			line, content = content[:end], content[next:]
		} else {
			content = nil
		}
		rest := bytes.TrimLeft(line, " ")
		indent := len(line) - len(rest)
		if inBlock {
			marker := bytes.HasPrefix(line, []byte("---")) || bytes.HasPrefix(line, []byte("..."))
			if !marker && (len(bytes.TrimSpace(line)) == 0 || indent > blockIndent) {
				continue // the block scalar's text
			}
			inBlock = false
		}
		if quote == 0 && flow == 0 {
			if len(bytes.TrimSpace(rest)) == 0 || rest[0] == '#' {
				continue
			}
			if open && (openTop || indent > openIndent) {
				continue // may be the plain scalar going on
			}
			open = false
		}
		valueStart := quote == 0 // a value may begin here
		structural := false      // the line has a key or an entry
		plain := false           // the last thing read is a plain scalar
		comment := false
		for i := 0; i < len(rest); i++ {
			c := rest[i]
			if quote == '\'' {
				if c == '\'' {
					if i+1 < len(rest) && rest[i+1] == '\'' {
						i++ // '' is a quote inside
					} else {
						quote, valueStart = 0, false
					}
				}
				continue
			}
			if quote == '"' {
				if c == '\\' {
					i++
				} else if c == '"' {
					quote, valueStart = 0, false
				}
				continue
			}
			spaceBefore := i == 0 || rest[i-1] == ' ' || rest[i-1] == '\t'
			spaceAfter := i+1 == len(rest) || rest[i+1] == ' ' || rest[i+1] == '\t'
			switch {
			case c == '#' && spaceBefore:
				comment = true
				i = len(rest) // a comment, to the end of the line
			case c == ' ' || c == '\t':
			case valueStart && (c == '&' || c == '!'):
				// An anchor or a tag comes before the value it names.
				for i+1 < len(rest) && rest[i+1] != ' ' && rest[i+1] != '\t' {
					i++
				}
			case valueStart && (c == '\'' || c == '"'):
				quote, plain = c, false
			case valueStart && (c == '[' || c == '{'):
				flow++
				n++
				plain = false
			case flow > 0 && c == ',':
				n++
				valueStart, plain = true, false
			case flow > 0 && (c == ']' || c == '}'):
				flow--
				valueStart, plain = false, false
			case flow > 0 && c == ':' && (spaceAfter || bytes.IndexByte([]byte(",[]{}"), rest[i+1]) >= 0):
				valueStart, plain = true, false
			case flow == 0 && c == '-' && valueStart && spaceAfter:
				n++ // a block sequence entry
				structural, plain = true, false
			case flow == 0 && c == ':' && spaceAfter:
				if !structural {
					n++ // the line's key
				}
				structural, valueStart, plain = true, true, false
			case flow == 0 && c == '?' && valueStart && spaceAfter:
				structural, plain = true, false
			case flow == 0 && valueStart && (c == '|' || c == '>') && blockHeader(rest[i+1:]):
				// Its text is more indented than its key or entry; a
				// document's own may start at the margin.
				inBlock, blockIndent = true, indent
				if !structural {
					blockIndent = -1
				}
				i = len(rest)
			default:
				valueStart, plain = false, true
			}
		}
		if quote == 0 && flow == 0 && !inBlock && plain && !comment {
			open, openIndent, openTop = true, indent, !structural
		}
	}
	return n
}

// blockHeader reports whether rest, what follows a "|" or ">", ends a
// block scalar's header: indicators, then nothing or a comment.
func blockHeader(rest []byte) bool {
	rest = bytes.TrimLeft(rest, "0123456789+-")
	rest = bytes.TrimLeft(rest, " \t")
	return len(rest) == 0 || rest[0] == '#'
}

// lineBreak finds the first line break in content, of every kind the
// YAML parser ends a line at: "\n", "\r\n", a lone "\r", and NEL, LS and
// PS (U+0085, U+2028, U+2029). It says where the line ends and the next
// begins (-1, -1: none). A file written with the others looks like one
// line to a count that only splits at "\n", and an 8 MiB bomb in that form
// was parsed whole (1.5 GB) before it was refused.
func lineBreak(content []byte) (end, next int) {
	for i := 0; i < len(content); i++ {
		switch c := content[i]; {
		case c == '\n':
			return i, i + 1
		case c == '\r':
			if i+1 < len(content) && content[i+1] == '\n' {
				return i, i + 2
			}
			return i, i + 1
		case c == 0xC2 && i+1 < len(content) && content[i+1] == 0x85:
			return i, i + 2
		case c == 0xE2 && i+2 < len(content) && content[i+1] == 0x80 && (content[i+2] == 0xA8 || content[i+2] == 0xA9):
			return i, i + 3
		}
	}
	return -1, -1
}

// asUTF8 is content as UTF-8: the YAML parser reads UTF-16 too, when it
// begins with its byte-order mark.
func asUTF8(content []byte) []byte {
	if len(content) < 2 {
		return content
	}
	unit := func(b []byte) rune { return rune(b[0]) | rune(b[1])<<8 }
	switch {
	case content[0] == 0xFF && content[1] == 0xFE:
	case content[0] == 0xFE && content[1] == 0xFF:
		unit = func(b []byte) rune { return rune(b[1]) | rune(b[0])<<8 }
	default:
		return content
	}
	out := make([]byte, 0, len(content)/2)
	for b := content[2:]; len(b) >= 2; b = b[2:] {
		r := unit(b)
		if utf16.IsSurrogate(r) && len(b) >= 4 {
			r = utf16.DecodeRune(r, unit(b[2:]))
			b = b[2:]
		}
		out = utf8.AppendRune(out, r)
	}
	return out
}
