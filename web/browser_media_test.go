package web_test

import (
	"net/http/httptest"
	"testing"
	"time"
)

// TestBrowserMediaStripShowsTheSeam: on a migration with a media report
// the frames around the switch are visible in the output lane, source
// above target, the switch line sits where the seam verdict's dot is, and
// the Media seam panel links the received stream.
func TestBrowserMediaStripShowsTheSeam(t *testing.T) {
	f := newFake()
	f.addMig(mediaSeamMigration())
	srv := httptest.NewServer(newServer(t, f, nil))
	t.Cleanup(srv.Close)
	b := newBrowser(t) // after the server: its cleanup, closing the event stream, runs first

	b.open(srv.URL + "/migrations/mig-media")
	b.wait("the media strip", `!!document.querySelector('#timeline [data-lane="output"] #media-strip')`, 10*time.Second)
	b.screenshot("media-seam")

	// Every tick drawn is visible inside the output lane's track; the
	// source's row above the target's.
	bad := evalJS[[]string](b, `(() => {
		const out = [];
		const track = document.querySelector('#timeline [data-lane="output"] .tl-track').getBoundingClientRect();
		for (const side of ['source', 'target']) {
			const ticks = [...document.querySelectorAll('#media-strip .media-row.' + side + ' .fr')];
			if (ticks.length === 0) out.push('no ' + side + ' frames drawn');
			for (const e of ticks) {
				const r = e.getBoundingClientRect(), s = getComputedStyle(e);
				if (r.width < 1 || r.height < 4 || s.visibility !== 'visible' || s.display === 'none' || s.backgroundColor === 'rgba(0, 0, 0, 0)')
					out.push(side + ' frame not visible: ' + e.title);
				if (r.left < track.left - 2 || r.right > track.right + 2 || r.top < track.top || r.bottom > track.bottom)
					out.push(side + ' frame outside the output lane: ' + e.title);
			}
		}
		const src = document.querySelector('#media-strip .media-row.source').getBoundingClientRect();
		const tgt = document.querySelector('#media-strip .media-row.target').getBoundingClientRect();
		if (!(src.bottom <= tgt.top)) out.push('the source row is not above the target row');
		const a = getComputedStyle(document.querySelector('.media-row.source .fr')).backgroundColor;
		const c = getComputedStyle(document.querySelector('.media-row.target .fr')).backgroundColor;
		if (a === c) out.push('source and target frames share a colour: ' + a);
		const key = document.querySelector('#media-strip .fr.key'), plain = document.querySelector('#media-strip .fr:not(.key)');
		if (!key || key.getBoundingClientRect().height <= plain.getBoundingClientRect().height) out.push('no keyframe taller than a frame');
		return out;
	})()`)
	if len(bad) > 0 {
		b.fail("media strip: %q", bad)
	}

	// The switch line goes through the media verdict's dot (its centre is
	// 7 px inside the mark's edge, the one it opens from).
	dx := evalJS[float64](b, `(() => {
		const line = document.getElementById('switch-line').getBoundingClientRect();
		const mark = [...document.querySelectorAll('#timeline [data-lane="output"] .mark')].find(e => e.textContent.trim() === 'media glitch');
		const r = mark.getBoundingClientRect();
		const dot = mark.classList.contains('flip') ? r.right - 7 : r.left + 7;
		return (line.left + line.width / 2) - dot;
	})()`)
	if dx < -2 || dx > 2 {
		b.fail("the switch line is %.1f px from the seam verdict's dot", dx)
	}
	// And through the target's first frame, which arrived at the switch.
	dx = evalJS[float64](b, `(() => {
		const line = document.getElementById('switch-line').getBoundingClientRect();
		const first = [...document.querySelectorAll('#media-strip .media-row.target .fr')].find(e => e.title.includes('PTS 900000 '));
		const r = first.getBoundingClientRect();
		return (line.left + line.width / 2) - (r.left + r.width / 2);
	})()`)
	if dx < -2 || dx > 2 {
		b.fail("the switch line is %.1f px from the target's first frame", dx)
	}

	if href := evalJS[string](b, `document.getElementById('seam-ts').getAttribute('href')`); href != "/api/v1/migrations/mig-media/seam.ts" {
		b.fail("seam.ts link %q", href)
	}
	if n := evalJS[int](b, `document.querySelectorAll('#media-defects tbody tr').length`); n != 2 {
		b.fail("%d defects listed, want 2", n)
	}
	b.noScriptErrors()
}
