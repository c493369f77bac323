package protocol

import (
	"strings"
	"testing"
)

func TestPath(t *testing.T) {
	tests := []struct {
		jobID, role string
		want        string
	}{
		{"job1", "a", "/instances/job1/a"},
		{"job 1", "role/x", "/instances/job%201/role%2Fx"},
		{"A-Z_a.z!0~9*'()", "r", "/instances/A-Z_a.z!0~9*'()/r"},
		{"$&+,:;=?@#[]%\"<>\\^`{|}", "r", "/instances/%24%26%2B%2C%3A%3B%3D%3F%40%23%5B%5D%25%22%3C%3E%5C%5E%60%7B%7C%7D/r"},
		{"nøkkel", "ключ", "/instances/n%C3%B8kkel/%D0%BA%D0%BB%D1%8E%D1%87"},
		{"😀", "\u0000\n", "/instances/%F0%9F%98%80/%00%0A"},
		{"", "", "/instances//"},
		{"bad\xff", "r", "/instances/bad%FF/r"},
	}
	for _, tt := range tests {
		if got := Path(tt.jobID, tt.role); got != tt.want {
			t.Errorf("Path(%q, %q) = %q, want %q", tt.jobID, tt.role, got, tt.want)
		}
	}
}

func TestURL(t *testing.T) {
	got := URL(ContainerHost, DefaultPort, "job/1", "key 2")
	want := "ws://host.docker.internal:6797/instances/job%2F1/key%202"
	if got != want {
		t.Fatalf("URL = %q, want %q", got, want)
	}
	if got := URL("[::1]", 6798, "j", "r"); got != "ws://[::1]:6798/instances/j/r" {
		t.Fatalf("URL with IPv6 = %q", got)
	}
}

func TestParsePath(t *testing.T) {
	tests := []struct {
		path        string
		jobID, role string
		ok          bool
	}{
		{"/instances/job1/a", "job1", "a", true},
		{"/instances/job1/a/", "job1", "a", true},
		{"/instances/job1/a?token=x", "job1", "a", true},
		{"/instances/job1/a/?x=1&y=/z", "job1", "a", true},
		{"/instances/job1/a#frag", "job1", "a", true},
		{"/instances/job1/a/#frag/more", "job1", "a", true},
		{"/instances/job1/a?", "job1", "a", true},
		{"/instances/job%201/role%2Fx", "job 1", "role/x", true},
		{"/instances/n%C3%B8kkel/%d0%ba%d0%bb%d1%8e%d1%87", "nøkkel", "ключ", true},
		{"/instances/nøkkel/raw ✓", "nøkkel", "raw ✓", true},
		{"/instances/%F0%9F%98%80/%00", "😀", "\x00", true},
		{"/instances/a+b/c", "a+b", "c", true}, // '+' is not a space to decodeURIComponent
		{"/instances/%3F/%23", "?", "#", true},
		{"/instances/a\nb/c", "a\nb", "c", true}, // [^/?#] matches a line terminator

		{"/instances/job1/a//", "", "", false},
		{"/instances/job1/a/b", "", "", false},
		{"/instances/job1", "", "", false},
		{"/instances/job1/", "", "", false},
		{"/instances//a", "", "", false},
		{"/instances/", "", "", false},
		{"/instances", "", "", false},
		{"instances/a/b", "", "", false},
		{"//instances/a/b", "", "", false},
		{"/Instances/a/b", "", "", false},
		{"/x/instances/a/b", "", "", false},
		{"ws://h:1/instances/a/b", "", "", false},
		{"/instances/a/b?x\ny", "", "", false},     // "." does not match \n
		{"/instances/a/b#x\ry", "", "", false},     // nor \r
		{"/instances/a/b?x\u2028y", "", "", false}, // nor U+2028
		{"/instances/a?/b", "", "", false},
		{"/instances/%E0%A4%A/b", "", "", false}, // truncated escape
		{"/instances/%E0%A4/b", "", "", false},   // truncated UTF-8 sequence
		{"/instances/%/b", "", "", false},
		{"/instances/a%2/b", "", "", false},
		{"/instances/a/%zz", "", "", false},
		{"/instances/%FF/b", "", "", false},          // not UTF-8
		{"/instances/%C0%AF/b", "", "", false},       // overlong
		{"/instances/%ED%A0%80/b", "", "", false},    // surrogate
		{"/instances/%F4%90%80%80/b", "", "", false}, // past U+10FFFF
		{"/instances/%C3%B8%/b", "", "", false},
		{"/instances/a\xff/b", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		jobID, role, ok := ParsePath(tt.path)
		if ok != tt.ok || jobID != tt.jobID || role != tt.role {
			t.Errorf("ParsePath(%q) = %q, %q, %v; want %q, %q, %v", tt.path, jobID, role, ok, tt.jobID, tt.role, tt.ok)
		}
	}
}

func TestPathRoundTrip(t *testing.T) {
	names := []string{"a", "job 1", "x/y", "?#%", "nøkkel", "😀", "\u0000", "'()*!~", "a+b=c&d", strings.Repeat("é", 100)}
	for _, j := range names {
		for _, r := range names {
			p := Path(j, r)
			gotJ, gotR, ok := ParsePath(p)
			if !ok || gotJ != j || gotR != r {
				t.Errorf("ParsePath(Path(%q, %q) = %q) = %q, %q, %v", j, r, p, gotJ, gotR, ok)
			}
			if _, _, ok := ParsePath(p + "/"); !ok {
				t.Errorf("ParsePath(%q) with trailing slash refused", p+"/")
			}
		}
	}
	// A name that is not valid UTF-8 yields a path that names nothing.
	if _, _, ok := ParsePath(Path("bad\xff", "r")); ok {
		t.Error("path for an invalid UTF-8 job id was accepted")
	}
	// Empty names yield a path that names nothing, as in the reference.
	if _, _, ok := ParsePath(Path("", "r")); ok {
		t.Error("path for an empty job id was accepted")
	}
}
