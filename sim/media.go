package sim

import (
	"context"
	"time"
)

// EnvMediaURL carries a job's media address to each of its instances:
// udp://HOST:PORT, the same for every instance of the job, as a real
// output URL is the same for a source and its target.
const EnvMediaURL = "NORMSIM_MEDIA_URL"

// MediaURLParam is the parameter value normsim replaces with the job's
// media URL (as the instance's runtime reaches it), so a template's own
// output parameter can point at normsim's receiver without editing the
// template: --param OUTPUT_URL=normsim:media.
const MediaURLParam = "normsim:media"

// MediaDatagram is one datagram a job sent to its media address, as the
// receiver got it: when, from which address, and the bytes.
type MediaDatagram struct {
	At   time.Time
	From string
	Data []byte
}

// Media formats, told apart per datagram by their content.
const (
	MediaMPEGTS  = "mpegts"   // MPEG-TS packets straight in UDP
	MediaRTPMP2T = "rtp/mp2t" // RTP, payload type 33: MPEG-TS packets
	MediaRTPH264 = "rtp/h264" // RTP, dynamic payload type: H.264 (RFC 6184)
	MediaUnknown = ""         // none of the above: counted as unreadable
)

// MediaReport is the seam of a job's media output across a migration, as
// a receiver would judge it: presentation time per elementary stream, the
// target's join (keyframe, tables), counters and clocks, and the side at
// fault from the same moments as the JSON seam.
type MediaReport struct {
	// Verdict is seamless, gap, overlap, glitch, no-output or unknown
	// (the Verdict* constants): seamless only when no defect was found.
	Verdict string `json:"verdict"`
	// Format is the stream's format (Media* constants); the source's and
	// the target's when they differ ("mpegts → rtp/mp2t").
	Format string `json:"format"`
	// SwitchAt is when the receiver got the target's first datagram.
	SwitchAt *time.Time `json:"switchAt,omitempty"`
	// SourceDatagrams and TargetDatagrams count what each side sent in
	// the window judged.
	SourceDatagrams int64 `json:"sourceDatagrams"`
	TargetDatagrams int64 `json:"targetDatagrams"`
	// Streams are the elementary streams (TS PIDs, or RTP SSRCs) and each
	// one's seam.
	Streams []MediaStream `json:"streams"`
	// KeyframeAtJoin: whether the target's first video frame was a
	// random-access point; PictureMissingMs, when it was not, how long
	// the picture is missing until the target's first keyframe (or to
	// the end of what was received), and when the target's PAT or PMT
	// came after its first frame, how long a receiver that joins at the
	// target shows no picture (until the first keyframe after both
	// tables): the longer of the two.
	KeyframeAtJoin   *bool    `json:"keyframeAtJoin,omitempty"`
	PictureMissingMs *float64 `json:"pictureMissingMs,omitempty"`
	// GapMs / OverlapMs and FramesMissing / FramesRepeated are the video
	// stream's presentation-time seam (the first stream's, when there is
	// no video).
	GapMs          *float64 `json:"gapMs,omitempty"`
	OverlapMs      *float64 `json:"overlapMs,omitempty"`
	FramesMissing  int64    `json:"framesMissing"`
	FramesRepeated int64    `json:"framesRepeated"`
	// SourceAfterStop counts the source's datagrams after its
	// source-stopped-output (beyond InFlight), TargetBeforeApply the
	// target's before cutover-apply was sent.
	SourceAfterStop   int64 `json:"sourceAfterStop,omitempty"`
	TargetBeforeApply int64 `json:"targetBeforeApply,omitempty"`
	// Defects are what a receiver would see go wrong, each named by the
	// check (and the TR 101 290 item, where there is one).
	Defects []MediaDefect `json:"defects,omitempty"`
	AtFault string        `json:"atFault,omitempty"`
	// Frames are the frames around the switch, for drawing: at most a
	// few seconds either side.
	Frames []MediaFrame `json:"frames,omitempty"`
	// Unreadable counts the datagrams in the window that were neither
	// MPEG-TS nor RTP; they are not part of the verdict.
	Unreadable int64 `json:"unreadable,omitempty"`
	// NotRead counts RTP packets normsim does not read though a receiver
	// set up for them would: H.264's interleaved mode (packetization-mode
	// 2). With any, the pictures are not judged (verdict unknown).
	NotRead int64 `json:"notRead,omitempty"`
	// Ignored counts RTP packets of NAL unit types RFC 6184 leaves
	// undefined (0, 30, 31), which a receiver ignores, as normsim does.
	Ignored int64 `json:"ignored,omitempty"`
	// Trimmed counts the datagrams of the window the receiver had let go
	// of to stay within its memory bound: judged without them.
	Trimmed int64 `json:"trimmed,omitempty"`
	// Lost counts the datagrams of the window that never reached normsim's
	// receiver (the kernel dropped them, or a read failed): normsim's
	// loss, not the job's, so a seam with any is not blamed on the job.
	Lost   int64  `json:"lost,omitempty"`
	Detail string `json:"detail"`
}

// MediaStream is one elementary stream's seam.
type MediaStream struct {
	// PID (MPEG-TS) or SSRC (RTP) names the stream; Kind is video,
	// audio or data; Codec what the PMT or payload type says ("H.264").
	PID   *uint16 `json:"pid,omitempty"`
	SSRC  *uint32 `json:"ssrc,omitempty"`
	Kind  string  `json:"kind"`
	Codec string  `json:"codec"`
	// LastSourcePTS and FirstTargetPTS are in 90 kHz ticks;
	// FrameTicks the stream's frame (or audio access unit) duration.
	LastSourcePTS  *int64   `json:"lastSourcePts,omitempty"`
	FirstTargetPTS *int64   `json:"firstTargetPts,omitempty"`
	FrameTicks     int64    `json:"frameTicks,omitempty"`
	GapMs          *float64 `json:"gapMs,omitempty"`
	OverlapMs      *float64 `json:"overlapMs,omitempty"`
	FramesMissing  int64    `json:"framesMissing"`
	FramesRepeated int64    `json:"framesRepeated"`
	// Params are the codec parameters each side sent (H.264 SPS: profile,
	// level, resolution; an MPEG-1/2 sequence header; an audio frame's
	// header: profile, sample rate, channels), when known.
	SourceParams string `json:"sourceParams,omitempty"`
	TargetParams string `json:"targetParams,omitempty"`
	Verdict      string `json:"verdict"`
	Detail       string `json:"detail"`
}

// The checks a media defect names (MediaDefect.Check): what a scenario's
// mediaDefects expectation may ask for. Where TR 101 290 names an error,
// the check is named as it does.
const (
	MediaCheckFormat        = "format change"
	MediaCheckStreamMissing = "stream missing"
	MediaCheckCodecParams   = "codec parameters"
	MediaCheckPTS           = "PTS continuity"
	MediaCheckKeyframe      = "keyframe at join"
	MediaCheckSync          = "Sync_byte_error"
	MediaCheckUnreadable    = "TS packet unreadable"
	MediaCheckCC            = "Continuity_count_error"
	MediaCheckPCR           = "PCR_discontinuity_indicator_error"
	MediaCheckPAT           = "PAT_error"
	MediaCheckPMT           = "PMT_error"
	MediaCheckPIDs          = "PIDs/stream types changed"
	MediaCheckPID           = "PID_error"
	MediaCheckRTPSeq        = "RTP sequence"
	MediaCheckRTPTimestamp  = "RTP timestamp"
	MediaCheckRTPFragments  = "RTP H.264 fragments"
	MediaCheckSSRC          = "SSRC change"
	MediaCheckArrival       = "arrival time"
	// MediaCheckPTSError: a side sent no PTS for longer than 0.7 s.
	MediaCheckPTSError = "PTS_error"
	// MediaCheckTransport: packets marked errored (transport_error_indicator).
	MediaCheckTransport = "Transport_error"
)

// MediaChecks are the media checks, in the order a receiver meets them.
var MediaChecks = []string{
	MediaCheckFormat, MediaCheckSync, MediaCheckTransport, MediaCheckUnreadable, MediaCheckPAT, MediaCheckPMT, MediaCheckPID, MediaCheckPIDs,
	MediaCheckStreamMissing, MediaCheckCC, MediaCheckPCR, MediaCheckKeyframe, MediaCheckCodecParams, MediaCheckPTS, MediaCheckPTSError,
	MediaCheckRTPSeq, MediaCheckRTPTimestamp, MediaCheckRTPFragments, MediaCheckSSRC, MediaCheckArrival,
}

// MediaDefect is one thing a receiver would see go wrong at the seam.
type MediaDefect struct {
	// Check is what was checked ("PTS continuity", "keyframe at join",
	// "Continuity_count_error", …); Standard the TR 101 290 item or RFC
	// that defines it, when there is one ("TR 101 290 1.4").
	Check    string `json:"check"`
	Standard string `json:"standard,omitempty"`
	Stream   string `json:"stream,omitempty"`
	AtFault  string `json:"atFault,omitempty"`
	Detail   string `json:"detail"`
}

// MediaFrame is one frame (access unit) the receiver got near the seam.
type MediaFrame struct {
	Side   string    `json:"side"` // source or target
	At     time.Time `json:"at"`
	Stream string    `json:"stream"`
	PTS    int64     `json:"pts"`
	Key    bool      `json:"key,omitempty"`
}

// MediaReceiver receives each job's media on a UDP port of its own, as a
// real downstream receiver would: it keeps what arrived, when and from
// which address, and judges nothing itself (sim/sink implements it).
type MediaReceiver interface {
	// Open starts receiving the job's media on port (a free one when 0)
	// and returns the port; for a job already open, its port.
	Open(jobID string, port int) (int, error)
	// Media is what arrived for the job at or after since, in arrival
	// order, when each sender address was first heard, and how many
	// datagrams it had to let go of before their time (MediaTrimmed).
	Media(jobID string, since time.Time) MediaWindow
	// Watch is poked whenever a datagram of the job arrives, until stop.
	Watch(jobID string) (poked <-chan struct{}, stop func())
	// Close stops receiving the job's media and forgets it.
	Close(jobID string)
}

// MediaWindow is what a MediaReceiver holds of a job since a moment.
type MediaWindow struct {
	Datagrams []MediaDatagram
	// FirstHeard is when each sender address was first heard: which
	// instance a sender is, is told from it.
	FirstHeard map[string]time.Time
	// Trimmed counts the datagrams since the moment that the receiver let
	// go of to stay within its memory bound, so what is judged is not
	// all that arrived.
	Trimmed int64
	// Lost counts the datagrams that never reached the receiver since the
	// moment: the kernel dropped them (its socket buffer was full) or a
	// read failed. Noticed with the next datagram read, so a loss is
	// counted at about when it happened.
	Lost int64
}

// MediaJudge judges media seams and gives back what a receiver got as a
// file a player opens (sim/media implements it).
type MediaJudge interface {
	// Analyze judges the seam between the source's and the target's
	// datagrams (each in arrival order) at a handover's moments (zero
	// for overlap and stopThenStart).
	Analyze(source, target []MediaDatagram, at SeamMoments) *MediaReport
	// Capture is the datagrams as one MPEG-TS file, cut to whole frames:
	// from the first keyframe (what a player tuning in decodes), or,
	// asJoined, from the first datagram (what a receiver that joined
	// there got, whatever it was). leftOut counts the datagrams cut to
	// that whole which the file still does not hold: of no known format,
	// or RTP packets that gave no NAL unit a player reads.
	Capture(dgs []MediaDatagram, asJoined bool) (ts []byte, leftOut int, err error)
	// CaptureRTP is the datagrams that are RTP packets, as they came,
	// each framed by its 2-byte length (RFC 4571); nil when none is.
	CaptureRTP(dgs []MediaDatagram) []byte
	// Readable says whether a datagram is media Analyze reads (MPEG-TS
	// or RTP), not junk another program sent to the job's port.
	Readable(data []byte) bool
}

// SeamCapture is the media a receiver got around a migration's switch,
// as an MPEG-TS file, kept with the migration.
type SeamCapture struct {
	MigrationID string    `json:"migrationId"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	Datagrams   int       `json:"datagrams"`
	TS          []byte    `json:"-"`
	// TargetTS is the target's datagrams alone, from its first: what a
	// receiver that joined at the switch got.
	TargetTS []byte `json:"-"`
	// RTP is the RTP packets around the switch as they came (SSRC,
	// sequence numbers and timestamps as sent, which the TS leaves out),
	// each framed by its 2-byte length (RFC 4571); nil when the job sent
	// no RTP.
	RTP []byte `json:"-"`
}

// SeamCaptures keeps seam captures beside the migrations they belong to.
type SeamCaptures interface {
	SaveSeamCapture(ctx context.Context, c SeamCapture) error
	// SeamCapture is the migration's capture; ENotFound when none.
	SeamCapture(ctx context.Context, migrationID string) (*SeamCapture, error)
}
