// Command video-rtp-new-ssrc is the video example job made to misbehave on purpose: it sends RTP (payload type 33), and the target starts a new RTP session (new SSRC, sequence number and timestamp) instead of continuing the source's.
// It exists so normsim's media seam checks have a real defect to find.
package main

import "github.com/normsim/normsim/examples/jobs/internal/videojob"

func main() { videojob.Main("rtp-new-ssrc") }
