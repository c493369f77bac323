// Command video-mid-gop is the video example job made to misbehave on purpose: the source stops right after a keyframe (its author took the IDR for the end of the GOP), and the target starts at the frame it was handed, a P-frame, so the join has no keyframe.
// It exists so normsim's media seam checks have a real defect to find.
package main

import "github.com/normsim/normsim/examples/jobs/internal/videojob"

func main() { videojob.Main("mid-gop") }
