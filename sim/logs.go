package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Log streams. StreamNormsim marks a line normsim wrote itself into an
// instance's log (how many lines it could not keep, and where).
const (
	StreamStdout  = "stdout"
	StreamStderr  = "stderr"
	StreamNormsim = "normsim"
)

// MaxLogLineBytes is the longest line kept whole; a longer one is cut there
// with a marker saying how much was cut. It is under the 16 KiB at which
// the Docker engine splits a line, so a split line is cut, not mangled.
const MaxLogLineBytes = 8 << 10

// LogLine is one line an instance's service printed, stamped with the time
// it arrived (the engine's time for a container, the moment normsim read it
// for a host process) on the same clock as the frames.
type LogLine struct {
	// Seq orders an instance's lines as they were kept; set by the store.
	Seq      int64     `json:"seq"`
	Instance string    `json:"instance"`
	Service  string    `json:"service"`
	Stream   string    `json:"stream"`
	At       time.Time `json:"at"`
	// Text is the line without its newline; bytes that are not UTF-8 and
	// control characters other than tab are escaped as \xNN.
	Text string `json:"text"`
}

// LogSink takes lines as a runtime captures them. Implementations must not
// block: a runtime calls it from the loop that reads the job's output.
type LogSink interface {
	CaptureLog(LogLine)
}

// LogSkipper is a LogSink that also counts lines it is never handed: a
// runtime that skips a backlog of output it cannot read in time (a job
// printing faster than normsim reads) says how many lines it skipped, and
// they are counted and marked as lines not kept (lost.overflowed). l names
// the instance, service, stream and time; its text is not used.
type LogSkipper interface {
	SkipLogs(l LogLine, n int64)
}

// LogQuery selects an instance's lines.
type LogQuery struct {
	Instance string
	// Since keeps lines that arrived at or after it; Until those before it.
	Since, Until time.Time
	// AfterSeq keeps lines after a cursor (a follower's last Seq).
	AfterSeq int64
	// Tail keeps only the last Tail lines of the selection; 0 keeps all,
	// a negative Tail none (a follow that wants only what comes next).
	Tail int
	// Limit keeps at most the first Limit lines; 0 keeps all.
	Limit int
}

// LogPage is what a LogQuery found, and what was not kept of the instance.
type LogPage struct {
	// Known is false when nothing was ever recorded for the instance.
	Known bool      `json:"known"`
	Lines []LogLine `json:"lines"`
	// Matched is how many lines the query selected before Tail kept the
	// last of them.
	Matched int64         `json:"matched"`
	Kept    LogRetention  `json:"kept"`
	Lost    LogLostCounts `json:"lost"`
}

// ParseSince reads a log query's since: an RFC 3339 time, or a duration
// back from now (as `docker compose logs --since 10m`).
func ParseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, Errorf(EInvalid, "since: want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration back from now (10m); got %q", v)
}

// LogRetention says what the store holds of an instance. Lines and Bytes
// count the job's own lines: normsim's notes among them (StreamNormsim,
// where lines were dropped) are shown but not counted, so Lines, Trimmed
// and Overflowed add up to what the job printed.
type LogRetention struct {
	Lines int64 `json:"lines"`
	Bytes int64 `json:"bytes"`
	// FirstSeq is the oldest line still kept.
	FirstSeq int64 `json:"firstSeq"`
}

// LogLostCounts count what normsim could not keep of an instance's output.
type LogLostCounts struct {
	// Trimmed lines (and their bytes) are the oldest, removed to keep the
	// instance within its bound.
	Trimmed      int64 `json:"trimmed"`
	TrimmedBytes int64 `json:"trimmedBytes"`
	// Overflowed lines came faster than the store could take them; each
	// run of them is marked by a StreamNormsim line where it happened.
	Overflowed int64 `json:"overflowed"`
	// Unreadable lines are in a damaged or edited store: each is a
	// StreamNormsim line where it was, saying so.
	Unreadable int64 `json:"unreadable,omitempty"`
}

// LogBook keeps captured output and reads it back (sim/logcap).
type LogBook interface {
	LogSink
	// Register records that the instance exists, so its (perhaps empty)
	// log is served after it is gone. It queues the record like a line
	// and never blocks: a launch does not wait for the store.
	Register(instance string)
	// Read returns the lines q selects, including every line captured
	// before the call.
	Read(ctx context.Context, q LogQuery) (*LogPage, error)
	// Changed is closed once lines captured after the call are stored.
	Changed() <-chan struct{}
	// Hold defers the book's store writes (never its capture) until
	// release is called, for at most MaxLogHold: a handover's cutover
	// then does not share the CPU with them.
	Hold() (release func())
}

// MaxLogHold bounds a Hold, so a cutover that never ends cannot stall the
// store writes for good.
const MaxLogHold = time.Second

// LogLimits bound what a LogStore keeps of an instance's output
// (whichever comes first), and of how many instances it keeps any.
type LogLimits struct {
	Lines     int64
	Bytes     int64
	Instances int
	// TotalBytes bounds the text of every instance's lines together: a
	// run of many chatty instances (normsim conform launches one per case)
	// keeps the newest lines, the oldest anyone's going first.
	TotalBytes int64
}

// DefaultLogLimits keep 20,000 lines or 4 MiB of text per instance, of the
// 500 instances that printed last, and 256 MiB of text in all.
var DefaultLogLimits = LogLimits{Lines: 20000, Bytes: 4 << 20, Instances: 500, TotalBytes: 256 << 20}

// LogStore is the part of the store that keeps log lines (sim/sqlite, sim/memstore).
type LogStore interface {
	// AppendLogs stores lines in order and keeps each instance within
	// its bound, trimming its oldest lines.
	AppendLogs(ctx context.Context, lines []LogLine) error
	// CountOverflow adds lines of an instance that could not be kept.
	CountOverflow(ctx context.Context, instance string, n int64) error
	// RegisterLogs records that the instances exist (see LogBook.Register).
	RegisterLogs(ctx context.Context, instances ...string) error
	ReadLogs(ctx context.Context, q LogQuery) (*LogPage, error)
}

// LogTally is what a batch of log lines adds to one instance's counts.
type LogTally struct {
	Instance     string
	Lines, Bytes int64
}

// TallyLogs counts a batch's lines by instance, in the order the
// instances first appear. The counts are the job's lines: normsim's own
// notes among them (where lines were dropped) are kept but not counted, so
// kept, trimmed and overflowed add up to what the job printed. Every store
// counts with it.
func TallyLogs(lines []LogLine) []LogTally {
	at := map[string]int{}
	var out []LogTally
	for _, l := range lines {
		i, ok := at[l.Instance]
		if !ok {
			i = len(out)
			at[l.Instance] = i
			out = append(out, LogTally{Instance: l.Instance})
		}
		if l.Stream != StreamNormsim {
			out[i].Lines++
			out[i].Bytes += int64(len(l.Text))
		}
	}
	return out
}

// LogText makes one line of output safe to keep and show: invalid UTF-8
// and control characters (but tab) become \xNN, a trailing \r goes, and a
// line over MaxLogLineBytes is cut with a marker saying by how much.
func LogText(b []byte) string {
	b = bytes.TrimSuffix(b, []byte("\r"))
	cut := 0
	if len(b) > MaxLogLineBytes {
		cut = len(b) - MaxLogLineBytes
		b = b[:MaxLogLineBytes]
		// Back off to the start of a rune the cut split.
		for j := len(b) - 1; j >= 0 && j >= len(b)-utf8.UTFMax; j-- {
			if utf8.RuneStart(b[j]) {
				if !utf8.FullRune(b[j:]) {
					cut += len(b) - j
					b = b[:j]
				}
				break
			}
		}
	}
	s := escapeLog(b)
	if cut > 0 {
		s += fmt.Sprintf(" …[normsim: line cut, %d more bytes]", cut)
	}
	return s
}

// LogCutText is LogText for a line of which only the first bytes were
// kept and n more were discarded before the newline came.
func LogCutText(b []byte, n int) string {
	s := escapeLog(bytes.TrimSuffix(b, []byte("\r")))
	if n > 0 {
		s += fmt.Sprintf(" …[normsim: line cut, %d more bytes]", n)
	}
	return s
}

func escapeLog(b []byte) string {
	clean := true
	for _, c := range b {
		if c < 0x20 && c != '\t' || c == 0x7f || c >= utf8.RuneSelf {
			clean = false
			break
		}
	}
	if clean {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size == 1, r < 0x20 && r != '\t', r == 0x7f:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
		case r >= 0x80 && r <= 0x9f:
			// C1 controls: a terminal that takes 8-bit controls reads
			// U+009B as CSI, as it reads ESC [.
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			sb.Write(b[:size])
		}
		b = b[size:]
	}
	return sb.String()
}

// LineSplitter splits a stream of output into lines, cutting a line over
// MaxLogLineBytes and discarding the rest of it (counted) until its end.
// A cut line still open when a Write ends is shown then, without waiting
// for an end that may be megabytes (or a job's life) away; how much more
// it had follows as a note when it ends.
type LineSplitter struct {
	partial []byte
	cut     int // bytes of the current line discarded
	// shown: the current line's first bytes were emitted already.
	shown bool
}

// Skip counts n bytes of the current line as cut without reading them: a
// reader that skips part of a stream says what of the line it skipped.
func (s *LineSplitter) Skip(n int64) { s.cut += int(n) }

// Write calls emit with each line p completes, already made safe.
func (s *LineSplitter) Write(p []byte, emit func(text string)) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := MaxLogLineBytes - len(s.partial); room > 0 {
			take := min(room, len(chunk))
			s.partial = append(s.partial, chunk[:take]...)
			s.cut += len(chunk) - take
		} else {
			s.cut += len(chunk)
		}
		if i < 0 {
			if s.cut > 0 && !s.shown {
				emit(LogText(s.partial) + " …[normsim: line cut; what follows until its end is counted, not kept]")
				s.shown = true
			}
			return
		}
		emit(s.take())
		p = p[i+1:]
	}
}

// Flush emits an unfinished last line, if there is one.
func (s *LineSplitter) Flush(emit func(text string)) {
	if len(s.partial) > 0 || s.cut > 0 {
		emit(s.take())
	}
}

func (s *LineSplitter) take() string {
	var t string
	switch {
	case s.shown:
		t = fmt.Sprintf("…[normsim: the line cut above ended %d bytes later]", s.cut)
	case s.cut > 0:
		t = LogCutText(s.partial, s.cut)
	default:
		t = LogText(s.partial)
	}
	s.partial, s.cut, s.shown = s.partial[:0], 0, false
	return t
}

// OpensTrimmed says whether p begins at the oldest line kept of an
// instance whose older lines were dropped: the first page a reader is
// shown then begins with TrimmedNote.
func (p *LogPage) OpensTrimmed() bool {
	return p.Lost.Trimmed > 0 && (len(p.Lines) == 0 || p.Lines[0].Seq == p.Kept.FirstSeq)
}

// TrimmedNote is the line a log print begins with when the oldest of the
// instance's lines were dropped to keep it within its bound.
func TrimmedNote(instance string, lost LogLostCounts) string {
	return fmt.Sprintf("normsim | %d earlier line(s) (%d bytes) of %s were dropped: normsim keeps the last lines of each instance (docs/logs.md)", lost.Trimmed, lost.TrimmedBytes, instance)
}

// FormatLogLine is a line as `docker compose logs` prints it,
// "service | text", with its arrival time after the bar when timestamps.
func FormatLogLine(l LogLine, timestamps bool) string {
	if timestamps {
		return l.Service + " | " + l.At.UTC().Format(time.RFC3339Nano) + " " + l.Text
	}
	return l.Service + " | " + l.Text
}

// MigrationLogs is what the two sides of a migration printed around it:
// the lines of its window (from LogLead before it started until LogTrail
// after it ended, or now), and for a migration that ended aborted or
// failed the last lines of each side, the evidence a failure report shows.
type MigrationLogs struct {
	From  time.Time          `json:"from"`
	Until time.Time          `json:"until"`
	Lines []MigrationLogLine `json:"lines"`
	// Omitted counts the window's lines past MaxMigrationLogLines per side.
	Omitted int `json:"omitted,omitempty"`
	// Tails are the last lines of each side, for a failed or aborted one
	// and for one whose judgement is fail.
	Tails []LogTail `json:"tails,omitempty"`
}

// MigrationLogLine is a line of one side (source or target).
type MigrationLogLine struct {
	Side string `json:"side"`
	LogLine
}

// LogTail is the last lines one side printed, and what of its output
// normsim could not keep.
type LogTail struct {
	Side     string        `json:"side"`
	Instance string        `json:"instance"`
	Lines    []LogLine     `json:"lines"`
	Lost     LogLostCounts `json:"lost"`
}

// Log window bounds of a migration's record.
const (
	// LogLead is how long before a migration's start its sides' lines
	// are shown: what a source printed just before being asked.
	LogLead = 2 * time.Second
	// LogTrail is how long after its end: a target's traceback.
	LogTrail = time.Second
	// MaxMigrationLogLines caps each side's lines in the window, keeping
	// the last ones.
	MaxMigrationLogLines = 2000
	// DefaultLogTail is how many last lines of each side a failure shows.
	DefaultLogTail = 50
)

// FormatLogTails renders the tails of a failed, aborted or fail-judged migration for a
// text report: a heading per side, then its lines with their times.
func FormatLogTails(tails []LogTail) string {
	var b strings.Builder
	for _, t := range tails {
		fmt.Fprintf(&b, "last %d log line(s) of the %s, %s:\n", len(t.Lines), t.Side, t.Instance)
		if n := t.Lost.Trimmed + t.Lost.Overflowed; n > 0 {
			fmt.Fprintf(&b, "  (normsim could not keep %d of its lines: %d trimmed as the oldest, %d it could not store fast enough)\n", n, t.Lost.Trimmed, t.Lost.Overflowed)
		}
		if len(t.Lines) == 0 {
			b.WriteString("  (it printed nothing)\n")
		}
		for _, l := range t.Lines {
			b.WriteString("  " + FormatLogLine(l, true) + "\n")
		}
	}
	return b.String()
}

// PayloadCut is how much of a frame's payload a text timeline shows.
const PayloadCut = 120

// PayloadSnippet is "  {payload…}" for an event that carries a frame with
// a payload, cut to PayloadCut characters; "" otherwise.
func PayloadSnippet(ev MigrationEvent) string {
	if ev.Frame == nil || len(ev.Frame.Payload) == 0 || string(ev.Frame.Payload) == "null" {
		return ""
	}
	return "  " + FrameSnippet(ev.Frame.Payload)
}

// TerminalSafe is s with what a terminal would act on (control
// characters, escape sequences) escaped, as log lines are.
func TerminalSafe(s string) string { return escapeLog([]byte(s)) }

// TerminalWriter writes to w what is written to it, each line's text made
// TerminalSafe (its line ends kept): for reports whose text comes from
// files and jobs the user did not write with a terminal in mind (a
// scenario's names, a job's close reason), where each print would
// otherwise have to remember to. A rune split across two writes is
// escaped byte by byte.
func TerminalWriter(w io.Writer) io.Writer { return terminalWriter{w} }

type terminalWriter struct{ w io.Writer }

func (t terminalWriter) Write(p []byte) (int, error) {
	var sb strings.Builder
	for rest := p; len(rest) > 0; {
		line, after, found := bytes.Cut(rest, []byte{'\n'})
		sb.WriteString(escapeLog(line))
		if found {
			sb.WriteByte('\n')
		}
		rest = after
	}
	if _, err := io.WriteString(t.w, sb.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// FrameSnippet is a frame's (or a payload's) text for a terminal: JSON
// compacted onto one line, what a terminal would act on escaped, cut to
// PayloadCut characters.
func FrameSnippet(text []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, text); err != nil {
		b.Reset()
		b.Write(text)
	}
	s := escapeLog(b.Bytes())
	if r := []rune(s); len(r) > PayloadCut {
		s = string(r[:PayloadCut]) + "…"
	}
	return s
}

// TimelineLine is one event of a migration's timeline as every text
// report prints it (normsim migrate --wait, normsim ci, normsim conform,
// normsimtest): its time since the migration started, phase, side,
// detail and payload.
func TimelineLine(m *Migration, ev MigrationEvent) string {
	at := float64(ev.At.Sub(m.StartedAt)) / float64(time.Millisecond)
	return fmt.Sprintf("  %11s  %-14s %-8s %s%s\n", FormatMs(at), ev.Phase, ev.Side, escapeLog([]byte(ev.Detail)), PayloadSnippet(ev))
}

// TimelineText is a migration's events, a TimelineLine each.
func TimelineText(m *Migration) string {
	var b strings.Builder
	for _, ev := range m.Events {
		b.WriteString(TimelineLine(m, ev))
	}
	return b.String()
}

// FormatTimeline renders a migration's events for a failure message
// (TimelineText), then the log tails a failed migration carries.
func FormatTimeline(m *Migration) string {
	var b strings.Builder
	b.WriteString(TimelineText(m))
	if m.Logs != nil {
		b.WriteString(FormatLogTails(m.Logs.Tails))
	}
	return b.String()
}
