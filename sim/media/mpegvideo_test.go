package media

import "testing"

// A GOP header speaks for the first picture after it, in the PES it came
// in or the next: a picture consumes it, and a new GOP header replaces it.
func TestAnMPEGGOPHeaderSpeaksForTheNextPictureAlone(t *testing.T) {
	gop := func(closed bool) []byte {
		b := []byte{mpegGOPStart, 0x00, 0x08, 0x00, 0x00} // time_code 00:00:00:00 (its marker bit set)
		if closed {
			b[4] |= 0x40
		}
		return b
	}
	picture := func(typ int) []byte { return []byte{mpegPictureStart, 0x00, byte(typ) << 3, 0xff, 0xf8} }
	slice := []byte{mpegSliceFirst, 0x12, 0x34}
	for _, c := range []struct {
		name     string
		units    [][]byte
		carried  bool // the PES before left a closed GOP header
		open     bool // the I-picture is outside a closed GOP
		leftOver bool // the unit leaves a closed GOP header for the next picture
	}{
		{"headers alone, closed", [][]byte{gop(true)}, false, false, true},
		{"an I-picture after a closed GOP header of the PES before", [][]byte{picture(mpegPictureI), slice}, true, false, false},
		{"an I-picture after an open GOP header of the PES before, or none", [][]byte{picture(mpegPictureI), slice}, false, true, false},
		{"its own open GOP header over a closed one carried", [][]byte{gop(false), picture(mpegPictureI), slice}, true, true, false},
		{"a second I-picture in the PES comes under no GOP header", [][]byte{gop(true), picture(mpegPictureB), slice, picture(mpegPictureI), slice}, false, true, false},
		{"a GOP header after the picture is the next's", [][]byte{picture(mpegPictureI), slice, gop(true)}, false, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := inspectMPEGVideo(c.units, c.carried)
			if u.key && u.openIRAP != c.open {
				t.Errorf("openIRAP %v, want %v", u.openIRAP, c.open)
			}
			if u.closedGOP != c.leftOver {
				t.Errorf("left a closed GOP header for the next picture: %v, want %v", u.closedGOP, c.leftOver)
			}
		})
	}
	// A P-picture consumes the GOP header carried to it: the I-picture
	// after it, with none of its own, is outside a closed GOP.
	p := inspectMPEGVideo([][]byte{picture(2), slice}, true) // picture_coding_type 2: a P-picture
	if i := inspectMPEGVideo([][]byte{picture(mpegPictureI), slice}, p.closedGOP); !i.key || !i.openIRAP {
		t.Errorf("the I-picture after a P-picture that took the closed GOP header: key %v, openIRAP %v", i.key, i.openIRAP)
	}
}
