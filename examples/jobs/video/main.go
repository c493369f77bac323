// Command video is normsim's example video job: it sends a looped H.264 test
// clip as MPEG-TS over UDP (or RTP) in real time and hands over to its
// migration target at a GOP end, PTS and continuity counters continuing (see
// package videojob for the details and the env it reads).
package main

import "github.com/normsim/normsim/examples/jobs/internal/videojob"

func main() { videojob.Main("") }
